"""What the portal tells its operators about itself: log lines, metrics and traces, each passed through the one
egress guard (egress.py) before it leaves the process."""
