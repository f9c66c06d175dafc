"""Running the portal: the active environment, previews, the audit log, status, accounts and category labels."""
