"""Alembic's environment: the portal's own engine and models, through Flask-Migrate."""

import logging

from alembic import context
from flask import current_app

log = logging.getLogger("alembic.env")
migrate = current_app.extensions["migrate"]
config = context.config


def skip_empty_autogenerate(migration_context, revision, directives):
    """`flask db migrate` writes no file when the models and the schema already agree."""
    if getattr(config.cmd_opts, "autogenerate", False) and directives[0].upgrade_ops.is_empty():
        directives[:] = []
        log.info("No changes in schema detected.")


def run_migrations_offline():
    """Write the SQL of the migrations instead of running them (`flask db upgrade --sql`)."""
    context.configure(url=migrate.db.engine.url, target_metadata=migrate.db.metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online():
    """Run the migrations on the portal's database."""
    options = dict(migrate.configure_args)
    options.setdefault("process_revision_directives", skip_empty_autogenerate)
    with migrate.db.engine.connect() as connection:
        context.configure(connection=connection, target_metadata=migrate.db.metadata, **options)
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
