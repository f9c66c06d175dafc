"""Alembic's environment: the portal's own engine and models, through Flask-Migrate."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from alembic import context
from flask import current_app

if TYPE_CHECKING:
    from alembic.operations.ops import MigrationScript
    from alembic.runtime.migration import MigrationContext

log = logging.getLogger("alembic.env")
migrate = current_app.extensions["migrate"]
config = context.config


def skip_empty_autogenerate(
    migration_context: MigrationContext, revision: str | Iterable[str | None], directives: list[MigrationScript]
) -> None:
    """`flask db migrate` writes no file when the models and the schema already agree."""
    if (
        getattr(config.cmd_opts, "autogenerate", False)
        and directives[0].upgrade_ops is not None  # autogenerate always makes one
        and directives[0].upgrade_ops.is_empty()
    ):
        directives[:] = []
        log.info("No changes in schema detected.")


def run_migrations_offline() -> None:
    """Write the SQL of the migrations instead of running them (`flask db upgrade --sql`)."""
    context.configure(url=migrate.db.engine.url, target_metadata=migrate.db.metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
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
