"""What the portal tells its operators (log lines, metrics, traces), each passed through the egress guard first."""
