"""Your account: your password, where you are logged in, and your second factor."""
