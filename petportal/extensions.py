"""The Flask extensions, created unbound here and bound to the app in the factory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from flask import Flask
from flask_caching import Cache
from flask_login import LoginManager
from flask_sqlalchemy import SQLAlchemy
from flask_wtf.csrf import CSRFProtect
from sqlalchemy import event
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout


class Migrations:
    """Flask-Migrate, bound to an app without being imported. Importing it loads Alembic, about 11 MB a
    process; only `init-db`, the `flask db` commands and the migration tests use it, never a page, so a
    serving worker never loads it."""

    def init_app(self, app: Flask, db: SQLAlchemy, **options: Any) -> None:
        """What `flask_migrate.Migrate().init_app(app, db, **options)` does, the import left to first use."""
        app.extensions["migrate"] = _MigrateOnFirstUse(app, db, options)
        app.cli.add_command(_MigrateCommands("db", help="Perform database migrations."))


class _MigrateOnFirstUse:
    """Stands as `app.extensions["migrate"]` until Flask-Migrate's functions first read it; then binds
    Flask-Migrate to the app, which puts its own record there, and answers from that."""

    def __init__(self, app: Flask, db: SQLAlchemy, options: dict[str, Any]) -> None:
        self._app, self._db, self._options = app, db, options

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # copy, pickle and friends asking for optional protocols
            raise AttributeError(name)
        from flask_migrate import Migrate  # Alembic, about 11 MB: loaded by the first migration, not at start-up

        Migrate().init_app(self._app, self._db, **self._options)
        return getattr(self._app.extensions["migrate"], name)


class _MigrateCommands(click.Group):
    """`flask db ...`: Flask-Migrate's own command group, imported when one of its commands is run."""

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any
    ) -> click.Context:
        from flask_migrate.cli import db as commands  # as above: loaded when a `flask db` command runs

        return commands.make_context(info_name, args, parent=parent, **extra)


MIGRATIONS = Path(__file__).resolve().parent / "migrations"
db = SQLAlchemy()
migrate = Migrations()
csrf = CSRFProtect()
login = LoginManager()
cache = Cache()
# The database errors that mean it cannot be reached or answer now; any other is a bug, never an outage.
DATABASE_OUTAGES = (OperationalError, InterfaceError, PoolTimeout)


def init_extensions(app: Flask) -> None:
    """Bind the extensions to `app`: the database (with its migrations), CSRF protection and logins."""
    db.init_app(app)
    # SQLite cannot alter a column in place: batch mode copies the table, as Alembic recommends.
    migrate.init_app(app, db, directory=str(MIGRATIONS), render_as_batch=True, compare_type=True)
    if app.config["SQLALCHEMY_DATABASE_URI"].startswith("sqlite"):
        with app.app_context():
            event.listen(db.engine, "connect", _use_sqlite_wal)
    csrf.init_app(app)
    login.init_app(app)
    # "basic": a session seen from another client loses freshness, so it must log in again for a switch.
    # ("strong" would also wipe every session restored from the remember-me cookie on its next request.)
    login.session_protection = "basic"


def _use_sqlite_wal(connection: Any, _record: Any) -> None:
    """WAL lets readers and the one writer proceed at once, as a threaded server needs."""
    connection.execute("PRAGMA journal_mode=WAL")
