"""Who commits the portal's database session: the code that owns a unit of work, once, at its end.

- A request is one unit. It commits once, after its view and every other hook have run, when its
  answer is not a server error; an error page, or a request that failed on the way, rolls back whatever
  it had added. Views and helpers (the audit log, labels, accounts, logins) only add to the session.
- A job step of the import runner commits itself, once per step (imports/runner.py).
- A few protocol steps must be durable before the next thing happens, so they commit on their own:
  claiming and settling an add's ticket around its createPet call (adding.py), replacing a remember-me
  token, counting a login attempt in the database before its password is checked (auth/throttle.py), and
  saving a server-side session. Each says so where it does it.

Work that must follow a commit (waking an import runner, clearing cached pages) is handed to
`after_commit`, so nothing outside the database runs ahead of a change that is then rolled back.
"""

from __future__ import annotations

from collections.abc import Callable

from flask import Flask, Response, current_app
from flask.typing import ResponseReturnValue
from sqlalchemy import event
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from petportal.extensions import db

_AFTER_COMMIT = "petportal.after_commit"


def after_commit(callback: Callable[[], None]) -> None:
    """Run `callback` once the current unit of work commits; never, if it is rolled back."""
    db.session.info.setdefault(_AFTER_COMMIT, []).append(callback)


def pending() -> bool:
    """Whether the current unit has anything to commit: a transaction under way (it read or wrote), objects to
    write, or work waiting for the commit. A request that never touched the database has nothing (an anonymous
    visitor's list page), and its commit is skipped rather than made on an empty session."""
    if not db.session.registry.has():
        return False
    session = db.session()
    changes = session.new or session.dirty or session.deleted
    return session.in_transaction() or bool(changes) or _AFTER_COMMIT in session.info


@event.listens_for(Session, "after_commit")
def _run_after_commit(session: Session) -> None:
    for callback in session.info.pop(_AFTER_COMMIT, []):
        callback()


@event.listens_for(Session, "after_soft_rollback")
def _forget_after_rollback(session: Session, _previous_transaction: object) -> None:
    session.info.pop(_AFTER_COMMIT, None)


def register(app: Flask, database_failed: Callable[[SQLAlchemyError], ResponseReturnValue]) -> None:
    """Commit each request's work at its end; a commit that fails is answered by `database_failed`.
    Registered before every other `after_request` hook, so it runs after all of them (Flask runs them in
    reverse order)."""

    @app.after_request
    def commit_the_request(response: Response) -> Response:
        if response.status_code >= 500:
            db.session.rollback()
            return response
        if not pending():
            return response
        try:
            db.session.commit()
        except SQLAlchemyError as error:
            db.session.rollback()  # before anything else reads the session (even a log line naming the user)
            return current_app.make_response(database_failed(error))
        return response
