"""The checks every request makes of its login, through Flask-Login's user and request loaders.

A login counts only while its row is open: not ended, within the absolute limit (12 h, or
PETPORTAL_OIDC_SESSION_MAX_AGE for single sign-on) and used within the idle limit (30 min); an idled-out login is
restored, not fresh, by its remember token. With the session store or database down, nobody is logged in and pages
that need a login answer 503, while customers browse on.
"""

from __future__ import annotations

from datetime import timedelta

from flask import Request, abort, current_app, flash, g, session
from flask.typing import ResponseReturnValue
from flask_babel import gettext as _
from flask_wtf.csrf import CSRFError
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from petportal.auth import logins, remember
from petportal.clock import now
from petportal.config import REMEMBER_COOKIE, SESSION_ABSOLUTE_LIMIT, SESSION_IDLE_LIMIT, settings
from petportal.data import session_store
from petportal.data.database import cause
from petportal.data.models import LoginSession, User
from petportal.extensions import DATABASE_OUTAGES, db, login
from petportal.i18n.lazy_text import lazy_gettext as _l
from petportal.web.error_pages import render_error
from petportal.web.readers import whole_number

# A login's "last seen" is written at most this often, so a busy page does not write on every request.
SEEN_GRANULARITY = timedelta(seconds=60)
LOGINS_UNAVAILABLE = _l("Logging in is unavailable for the moment. Customers' pages still work; try again shortly.")


@login.user_loader
def load_user(user_id: str) -> User | None:
    try:
        return _check_login(user_id)
    except SQLAlchemyError as error:
        _database_failed(error)
        return None


def _check_login(user_id: str) -> User | None:
    row = logins.of_this_browser()
    number = whole_number(user_id)  # the id Flask-Login kept in the session, read as every id is
    user = db.session.get(User, number) if number is not None else None
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
    if not remember.matches(row, token) or user is None or not user.enabled:
        remember.forget()
        return None
    # Runs before the view changes anything, so the replacement's own commit takes nothing of the view's with it.
    if not remember.replace(row, token):
        return None
    logins.attach(user, row, fresh=False)  # a sensitive change asks for the password again
    return user


def logins_available(probe: bool = False) -> bool:
    """Whether the portal can keep and check logins now; with `probe`, the session store and database are asked."""
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
    if not logins_available(probe):
        abort(503, str(LOGINS_UNAVAILABLE))


register = remember.register  # write or delete the remember cookie when this request changed it


def _past_limit(row: LoginSession, user: User) -> bool:
    """Whether `row` is past the absolute limit (for single sign-on, PETPORTAL_OIDC_SESSION_MAX_AGE if shorter)."""
    limit = SESSION_ABSOLUTE_LIMIT
    oidc = settings().single_sign_on
    if user.sso_subject is not None and oidc is not None and oidc.session_max_age is not None:
        limit = min(limit, oidc.session_max_age)
    return now() - row.started_at > limit


def _end_at_limit(row: LoginSession) -> None:
    logins.close(row)
    flash(_("Your session has ended. Please log in again."), "info")


def _database_failed(error: SQLAlchemyError) -> None:
    """Roll back; an outage logs nobody in (pages needing a login answer 503), any other error is raised."""
    db.session.rollback()
    if not isinstance(error, DATABASE_OUTAGES):
        raise error
    if not g.get("database_unavailable"):
        current_app.logger.error("the portal's database is unavailable: %s", cause(error))
    g.database_unavailable = True


def refuse_form(error: CSRFError) -> ResponseReturnValue:
    """A form whose CSRF token failed (expired, another site's), or could not be checked without the session store."""
    if not logins_available(probe=True):
        return render_error(503, str(LOGINS_UNAVAILABLE), title=_("Temporarily unavailable"), retry=True)
    return render_error(400, _("This form has expired or was not sent from this site. Reload the page and try again."))
