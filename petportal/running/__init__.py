"""Running the portal: `flask serve`, demo mode, the other `flask` commands, the operators' endpoints."""
