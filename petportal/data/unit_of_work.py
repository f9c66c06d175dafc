"""Who commits the portal's database session: the code that owns a unit of work, once, at its end.

A request commits once after every hook has run, unless its answer is a server error; views and helpers only add.
An import job step commits itself. A few protocol steps commit on their own, and say so where they do. Work that must
follow a commit (waking a runner, clearing cached pages) goes to `after_commit`."""

from collections.abc import Callable
from typing import Any, cast

from flask import Flask, Response, current_app
from flask.typing import ResponseReturnValue
from sqlalchemy import CursorResult, Delete, Update, event
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from petportal.extensions import db

_AFTER_COMMIT = "petportal.after_commit"


def after_commit(callback: Callable[[], None]) -> None:
    """Run `callback` once the current unit of work commits; never, if it is rolled back."""
    db.session.info.setdefault(_AFTER_COMMIT, []).append(callback)


def pending() -> bool:
    """Whether the current unit has anything to commit: a transaction, objects to write, or after-commit work."""
    if not db.session.registry.has():
        return False
    session = db.session()
    changes = session.new or session.dirty or session.deleted
    return session.in_transaction() or bool(changes) or _AFTER_COMMIT in session.info


def updated_one(statement: Update | Delete) -> bool:
    """Run a conditional UPDATE or DELETE (the session's objects left as they are); whether it hit exactly one row."""
    result = cast("CursorResult[Any]", db.session.execute(statement, execution_options={"synchronize_session": False}))
    return result.rowcount == 1


@event.listens_for(Session, "after_commit")
def _run_after_commit(session: Session) -> None:
    for callback in session.info.pop(_AFTER_COMMIT, []):
        callback()


@event.listens_for(Session, "after_soft_rollback")
def _forget_after_rollback(session: Session, _previous_transaction: object) -> None:
    session.info.pop(_AFTER_COMMIT, None)


def register(app: Flask, database_failed: Callable[[SQLAlchemyError], ResponseReturnValue]) -> None:
    """Commit each request's work at its end; registered first, so it runs after every other `after_request` hook."""

    @app.after_request
    def commit_the_request(response: Response) -> Response:
        if response.status_code >= 500:
            db.session.rollback()
        elif pending():
            try:
                db.session.commit()
            except SQLAlchemyError as error:
                db.session.rollback()  # before anything else reads the session (even a log line naming the user)
                return current_app.make_response(database_failed(error))
        return response
