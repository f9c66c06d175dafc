"""Running the portal: the active environment, previews, the audit log, the status page, the accounts and
the category labels."""
