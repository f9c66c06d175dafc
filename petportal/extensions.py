"""The Flask extensions, created unbound here and bound to the app in the factory."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, cast

import click
from flask import Flask
from flask_caching import Cache
from flask_login import LoginManager
from flask_sqlalchemy import SQLAlchemy
from flask_wtf.csrf import CSRFProtect
from sqlalchemy import event
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.orm import DeclarativeBase

if TYPE_CHECKING:
    import sqlite3


class Migrations:
    """Flask-Migrate, bound without being imported: Alembic (11 MB) loads only for init-db and `flask db`."""

    def init_app(self, app: Flask, db: SQLAlchemy, **options: str | bool) -> None:
        app.extensions["migrate"] = _MigrateOnFirstUse(app, db, options)
        app.cli.add_command(_MigrateCommands("db", help="Perform database migrations."))


class _MigrateOnFirstUse:
    """`app.extensions["migrate"]` until first read; then binds Flask-Migrate, which replaces it, and answers."""

    def __init__(self, app: Flask, db: SQLAlchemy, options: dict[str, str | bool]) -> None:
        self._app, self._db, self._options = app, db, options

    def __getattr__(self, name: str) -> object:
        if name.startswith("__"):  # copy, pickle and friends asking for optional protocols
            raise AttributeError(name)
        from flask_migrate import Migrate

        Migrate().init_app(self._app, self._db, **self._options)
        return getattr(self._app.extensions["migrate"], name)


class _MigrateCommands(click.Group):
    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: object
    ) -> click.Context:
        from flask_migrate.cli import db as commands  # imported when a `flask db` command runs

        return cast(click.Context, commands.make_context(info_name, args, parent=parent, **extra))


class Base(DeclarativeBase):
    """What every table of the portal is declared from (models.py)."""


db = SQLAlchemy(model_class=Base)
# Flask-SQLAlchemy makes `db.Model` from `Base` at run time, where a type checker cannot follow it.
if TYPE_CHECKING:
    Model = Base
else:
    Model = db.Model
MIGRATIONS = Path(__file__).resolve().parent / "migrations"
migrate = Migrations()
csrf = CSRFProtect()
login = LoginManager()
cache = Cache()
# The database errors that mean it cannot be reached or answer now; any other is a bug, never an outage.
DATABASE_OUTAGES = (OperationalError, InterfaceError, PoolTimeout)


def init_extensions(app: Flask) -> None:
    db.init_app(app)
    # SQLite cannot alter a column in place: batch mode copies the table, as Alembic recommends.
    migrate.init_app(app, db, directory=str(MIGRATIONS), render_as_batch=True, compare_type=True)
    if app.config["SQLALCHEMY_DATABASE_URI"].startswith("sqlite"):
        with app.app_context():
            event.listen(db.engine, "connect", _use_sqlite_wal)
    csrf.init_app(app)
    login.init_app(app)
    # "basic": a session seen from another client loses freshness ("strong" would wipe remember-me restores).
    login.session_protection = "basic"


def _use_sqlite_wal(connection: sqlite3.Connection, _record: object) -> None:
    """WAL lets readers and the one writer proceed at once, as a threaded server needs."""
    connection.execute("PRAGMA journal_mode=WAL")
