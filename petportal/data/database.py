"""The state of the portal's database as its pages, probes and commands report it."""

from enum import StrEnum

from sqlalchemy.exc import SQLAlchemyError

from petportal.data.models import User
from petportal.extensions import db

# What to run when the portal's tables are not there: said by the commands, the error pages' log line and /readyz.
INIT_DB_HINT = "run `flask --app app init-db` first"


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


def database_state() -> DatabaseState:
    """Probe the portal's database with a read of one of its tables (a bare SELECT 1 needs none); in an app context."""
    try:
        db.session.execute(db.select(User.id).limit(1))
    except SQLAlchemyError as error:
        db.session.rollback()
        return DatabaseState.NO_TABLES if tables_missing(error) else DatabaseState.UNAVAILABLE
    return DatabaseState.OK
