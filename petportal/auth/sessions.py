"""The checks every request makes of its login, through Flask-Login's user and request loaders.

The user loader accepts the login the browser's session names only while its row is open: not ended
(logout, an admin, the identity provider's back-channel logout), within the absolute limit (12 h, or
PETPORTAL_OIDC_SESSION_MAX_AGE for a login through single sign-on) and used within the idle limit (30 min). A login
that idled out is restored by its remember token, if it has one, as a login that is not fresh. When the
portal's session store or database is down, nobody is logged in and pages that need a login answer 503,
while customers browse on.

Nothing here commits but the remember token's replacement (see `remember.replace`): a login ended or
seen here is written with the request's own work, at its end.
"""

from __future__ import annotations

from datetime import timedelta

from flask import Flask, Request, abort, current_app, flash, g, session
from flask_babel import gettext as _
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from .. import session_store
from ..clock import now
from ..config import SESSION_ABSOLUTE_LIMIT, SESSION_IDLE_LIMIT, settings
from ..extensions import DATABASE_OUTAGES, db, login
from ..lazy_text import lazy_gettext as _l
from ..models import LoginSession, User
from . import logins, remember
from .remember import REMEMBER_COOKIE

# A login's "last seen" is written at most this often, so a busy page does not write on every request.
SEEN_GRANULARITY = timedelta(seconds=60)
LOGINS_UNAVAILABLE = _l("Logging in is unavailable for the moment. Customers' pages still work; try again shortly.")


@login.user_loader
def load_user(user_id: str) -> User | None:
    """The account of this browser's login, while that login is open and within its limits."""
    try:
        return _check_login(user_id)
    except SQLAlchemyError as error:
        _database_failed(error)
        return None


def _check_login(user_id: str) -> User | None:
    row = logins.of_this_browser()
    user = db.session.get(User, int(user_id)) if user_id.isdigit() else None
    if row is None or user is None or row.user_id != user.id or not user.enabled or row.ended_at is not None:
        # The session belonged to that login alone (a login starts with an empty one): nothing in it is kept.
        session.clear()
        return None
    if _past_limit(row, user):
        session.clear()
        _end_at_limit(row)
        return None
    seen = now()
    if seen - row.last_seen_at > SESSION_IDLE_LIMIT:
        session.clear()
        if row.remember_hash is None:
            logins.close(row)
        return None  # Flask-Login then asks the request loader, which restores a remembered login, not fresh
    if seen - row.last_seen_at > SEEN_GRANULARITY:
        row.last_seen_at = seen
    return user


@login.request_loader
def restore_from_remember_cookie(request: Request) -> User | None:
    """Restore a login whose session ended while idle, from its remember token; never as a fresh login."""
    presented = remember.presented(request.cookies.get(REMEMBER_COOKIE, ""))
    if presented is None or not session_store.available():
        return None
    try:
        return _restore(*presented)
    except SQLAlchemyError as error:
        _database_failed(error)
        return None


def _restore(login_id: str, token: str) -> User | None:
    row = db.session.get(LoginSession, login_id)
    if row is None or row.ended_at is not None:
        remember.forget()
        return None
    user = db.session.get(User, row.user_id)
    if user is not None and _past_limit(row, user):
        _end_at_limit(row)
        return None
    if not remember.matches(row, token):
        remember.forget()
        return None
    if user is None or not user.enabled:
        remember.forget()
        return None
    # This runs where the request first asks who is logged in, before its view has changed anything, so the
    # replacement's own commit takes nothing of the view's with it.
    if not remember.replace(row, token):
        return None
    logins.resume(user, row)
    return user


def logins_available(probe: bool = False) -> bool:
    """Whether the portal can keep and check logins now; with `probe`, its session store and database are asked."""
    if not session_store.available() or g.get("database_unavailable"):
        return False
    if not probe:
        return True
    try:
        db.session.execute(text("SELECT 1"))
    except SQLAlchemyError as error:
        _database_failed(error)
        return False
    return session_store.reachable()


def require_session_store(probe: bool = False) -> None:
    """A page that needs a login answers 503 while the portal cannot keep or check logins."""
    if not logins_available(probe):
        abort(503, str(LOGINS_UNAVAILABLE))


def register(app: Flask) -> None:
    """Write or delete the remember cookie when this request changed it."""
    remember.register(app)


def _past_limit(row: LoginSession, user: User) -> bool:
    """Whether login `row` of `user` is older than a login may be: 12 hours, or for an account of single sign-on
    the provider's sessions' maximum age where the operator set a shorter one (PETPORTAL_OIDC_SESSION_MAX_AGE)."""
    limit = SESSION_ABSOLUTE_LIMIT
    oidc = settings().oidc
    if user.sso_subject is not None and oidc is not None and oidc["session_max_age"] is not None:
        limit = min(limit, oidc["session_max_age"])
    return now() - row.started_at > limit


def _end_at_limit(row: LoginSession) -> None:
    logins.close(row)
    flash(_("Your session has ended. Please log in again."), "info")


def _database_failed(error: SQLAlchemyError) -> None:
    """Customers browse on without the database; pages that need a login answer 503 (see above). Only an
    outage counts: any other database error is a bug, raised as one (never reported as an outage)."""
    # A failed statement leaves the database session unusable until it is rolled back.
    db.session.rollback()
    if not isinstance(error, DATABASE_OUTAGES):
        raise error
    if not g.get("database_unavailable"):
        current_app.logger.error("the portal's database is unavailable: %s", type(error).__name__)
    g.database_unavailable = True
