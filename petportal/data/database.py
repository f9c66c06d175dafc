"""The state of the portal's database as its pages, probes and commands report it."""

import importlib
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, cast

from sqlalchemy.exc import SQLAlchemyError

from petportal.data.models import User
from petportal.extensions import db

if TYPE_CHECKING:
    from sqlalchemy.dialects import postgresql, sqlite

# What to run when the portal's tables are not there: said by the commands, the error pages' log line and /readyz.
INIT_DB_HINT = "run `flask --app app init-db` first"
# A password in a database URL (`scheme://user:password@host`) or a connection string (`password=...`).
_PASSWORDS = re.compile(r"(?P<keep>://[^:/@\s]*:)[^@\s]*@|(?P<name>password\s*=\s*)(?:'[^']*'|\S+)", re.IGNORECASE)
CAUSE_MAX = 300


def cause(error: BaseException) -> str:
    """What went wrong, for a log line about the portal's database (or its session store): the error's class and
    the first line of its message (the driver's, under SQLAlchemy's wrapper), any password in it hidden."""
    inner = getattr(error, "orig", None) or error
    lines = str(inner).strip().splitlines()
    message = _PASSWORDS.sub(
        lambda found: f"{found['keep']}***@" if found["keep"] else f"{found['name']}***", lines[0] if lines else ""
    )
    named = type(inner).__name__
    return f"{named}: {message[:CAUSE_MAX]}" if message else named


def insert_into(model: type[object]) -> "postgresql.Insert | sqlite.Insert":
    """An INSERT into `model` in the dialect of the session's database, for an upsert: PostgreSQL and SQLite say
    ON CONFLICT alike. Only that dialect is imported (PostgreSQL's costs a SQLite portal's workers 2 MB)."""
    dialect = importlib.import_module(f"sqlalchemy.dialects.{db.session.get_bind().dialect.name}")
    return cast("postgresql.Insert | sqlite.Insert", dialect.insert(model))


def tables_missing(error: SQLAlchemyError) -> bool:
    """Whether a database error says that a table of the portal does not exist: `init-db` was never run on this
    database (or not since an upgrade). SQLite says "no such table"; PostgreSQL, undefined_table (42P01)."""
    cause = getattr(error, "orig", None)
    return getattr(cause, "sqlstate", None) == "42P01" or "no such table" in str(cause)


class DatabaseState(StrEnum):
    """What a probe of the portal's database found (`/readyz` shows it)."""

    OK = "ok"
    NO_TABLES = "no tables"
    UNAVAILABLE = "unavailable"


@dataclass(frozen=True)
class Probe:
    """What a probe of the portal's database found, and why (`cause`) when it is not OK."""

    state: DatabaseState
    cause: str = ""


def probe() -> Probe:
    """Probe the portal's database with a read of one of its tables (a bare SELECT 1 needs none); in an app context."""
    try:
        db.session.execute(db.select(User.id).limit(1))
    except SQLAlchemyError as error:
        db.session.rollback()
        return Probe(DatabaseState.NO_TABLES if tables_missing(error) else DatabaseState.UNAVAILABLE, cause(error))
    return Probe(DatabaseState.OK)
