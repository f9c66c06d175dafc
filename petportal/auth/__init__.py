"""Staff and admin accounts: logging in and out, and who may do what."""
