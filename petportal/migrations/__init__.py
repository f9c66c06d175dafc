"""The portal's schema migrations (Alembic, through Flask-Migrate); shipped inside the package."""
