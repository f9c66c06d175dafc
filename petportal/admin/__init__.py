"""Running the portal: the active environment, previews, the audit log, the status page, the accounts and
the category labels."""

from .categories import bp as categories_bp
from .users import bp as users_bp
from .views import bp

__all__ = ["bp", "categories_bp", "users_bp"]
