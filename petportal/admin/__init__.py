"""Running the portal: the active environment, previews, the audit log and the status page."""

from .views import bp

__all__ = ["bp"]
