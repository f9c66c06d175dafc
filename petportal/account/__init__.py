"""Your account: your password, where you are logged in, and your second factor."""

from .views import bp

__all__ = ["bp"]
