"""Browsing, filtering, viewing and adding animals."""

from .views import bp

__all__ = ["bp"]
