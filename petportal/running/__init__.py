"""Running the portal: the `serve` command and its processes, demo mode, the `flask` commands, and the endpoints
for operators and load balancers."""
