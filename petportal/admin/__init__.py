"""Running the portal: the active environment, previews, the audit log, the status page and the accounts."""

from .users import bp as users_bp
from .views import bp

__all__ = ["bp", "users_bp"]
