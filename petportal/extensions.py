"""The Flask extensions, created unbound here and bound to the app in the factory."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click
from flask import Flask
from flask_caching import Cache
from flask_login import LoginManager
from flask_sqlalchemy import SQLAlchemy
from flask_wtf.csrf import CSRFProtect
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.orm import DeclarativeBase


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

        context: click.Context = commands.make_context(info_name, args, parent=parent, **extra)
        return context


class Base(DeclarativeBase):
    """What every table of the portal is declared from (models.py)."""


db = SQLAlchemy(model_class=Base)
# Flask-SQLAlchemy makes `db.Model` from `Base` at run time, where a type checker cannot follow it.
if TYPE_CHECKING:
    Model = Base
else:
    Model = db.Model
migrate = Migrations()
csrf = CSRFProtect()
login = LoginManager()
cache = Cache()
# The database errors that mean it cannot be reached or answer now; any other is a bug, never an outage.
DATABASE_OUTAGES = (OperationalError, InterfaceError, PoolTimeout)
