"""Staff and admin accounts: logging in and out, and who may do what."""

from .views import bp

__all__ = ["bp"]
