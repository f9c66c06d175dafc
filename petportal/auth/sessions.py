"""Logins kept on the server: started by the password, checked on every request, ended for good.

Each login is a `LoginSession` row. The browser's server-side session names it; every request
checks it, so logout, "end every session of this account" and the idle (30 min) and absolute (12 h)
limits take effect on the next request in every process. "Keep me logged in" is a random token
stored hashed on the row, replaced at every use and dropped when the login ends.

An account with a second factor is logged in in two steps: the password leaves the session waiting
for a code (for 5 minutes, and not logged in); the code starts the login.
"""

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import timedelta

from flask import abort, current_app, flash, g, request, session
from flask_login import login_user, logout_user
from sqlalchemy import func, or_, select, text, update
from sqlalchemy.exc import SQLAlchemyError

from ..config import SESSION_ABSOLUTE_LIMIT, SESSION_IDLE_LIMIT
from ..extensions import db, login
from ..models import LoginSession, User

# A login's "last seen" is written at most this often, so a busy page does not write on every request.
SEEN_GRANULARITY = timedelta(seconds=60)
REMEMBER_COOKIE = "remember"
LOGIN_KEY = "login_id"
SECOND_FACTOR_KEY = "awaiting_second_factor"
# The password step of a login with a second factor stays good this long.
SECOND_FACTOR_LIMIT = timedelta(minutes=5)
LOGINS_UNAVAILABLE = "Logging in is unavailable for the moment. Customers' pages still work; try again shortly."


def _now():
    return current_app.config["CLOCK"]()


def _hash(token):
    return hashlib.sha256(token.encode()).hexdigest()


def start(user, remember):
    """Log `user` in: a new, empty session under a new id, a new login row, and a remember token when asked for."""
    _new_session_id()
    session.clear()
    now = _now()
    row = LoginSession(
        id=secrets.token_urlsafe(32),
        user_id=user.id,
        started_at=now,
        last_seen_at=now,
        address=(request.remote_addr or "")[:64] or None,
        user_agent=request.user_agent.string[:255] or None,
    )
    if remember:
        _give_remember_token(row)
    db.session.add(row)
    user.last_login_at = now
    db.session.commit()
    login_user(user)
    session[LOGIN_KEY] = row.id


@dataclass(frozen=True)
class AwaitingLogin:
    """A login whose password was right and whose second factor is still to come."""

    user: User
    remember: bool
    destination: str


def await_second_factor(user, remember, destination):
    """The password was right: a new session that waits for `user`'s code, and is not logged in.

    A login this browser already had ends here, with its remember-me cookie, which would otherwise
    restore it over the waiting session on the next request.
    """
    row = db.session.get(LoginSession, session.get(LOGIN_KEY, ""))
    if row is not None:
        _end(row)
        db.session.commit()
    g.remember_cookie = ""
    _new_session_id()
    session.clear()
    session[SECOND_FACTOR_KEY] = {
        "user_id": user.id,
        "remember": bool(remember),
        "next": destination,
        "at": _now().timestamp(),
    }


def awaiting_second_factor():
    """The login waiting for its code in this session, or None (none, expired, or the account changed)."""
    waiting = session.get(SECOND_FACTOR_KEY)
    if not isinstance(waiting, dict):
        return None
    user = db.session.get(User, waiting["user_id"])
    expired = _now().timestamp() - waiting["at"] > SECOND_FACTOR_LIMIT.total_seconds()
    ended = user is not None and user.logins_ended_at is not None and user.logins_ended_at.timestamp() > waiting["at"]
    if expired or ended or user is None or not user.enabled or not user.mfa_enabled:
        session.pop(SECOND_FACTOR_KEY, None)
        return None
    return AwaitingLogin(user, waiting["remember"], waiting["next"])


def end():
    """Log the current browser out: its login ends for good, with its session and remember token."""
    row = db.session.get(LoginSession, session.get(LOGIN_KEY, ""))
    if row is not None:
        _end(row)
        db.session.commit()
    logout_user()
    _new_session_id()
    session.clear()
    g.remember_cookie = ""


def end_all(user_id, keep=None):
    """End every open login of an account (but `keep`): each browser is logged out on its next request,
    and a login still waiting for its second factor cannot finish."""
    now = _now()
    db.session.execute(
        update(LoginSession)
        .where(LoginSession.user_id == user_id, LoginSession.ended_at.is_(None), LoginSession.id != (keep or ""))
        .values(ended_at=now, remember_hash=None)
    )
    db.session.execute(update(User).where(User.id == user_id).values(logins_ended_at=now))
    db.session.commit()


def current_login_id():
    """The id of this browser's login, or None."""
    return session.get(LOGIN_KEY)


def open_logins(user_id):
    """The account's logins that are still open, most recently used first."""
    query = select(LoginSession).where(LoginSession.user_id == user_id, *_still_open(_now()))
    return db.session.scalars(query.order_by(LoginSession.last_seen_at.desc())).all()


def open_login_counts():
    """How many open logins each account has, by user id (accounts without any are absent)."""
    query = select(LoginSession.user_id, func.count()).where(*_still_open(_now())).group_by(LoginSession.user_id)
    return {user_id: count for user_id, count in db.session.execute(query)}


def browser_in_words(user_agent):
    """A login's browser and system as people name them ("Firefox on Ubuntu"), from its User-Agent."""
    from ua_parser import parse as parse_user_agent  # 4 MB of patterns, loaded by the first sessions page

    parsed = parse_user_agent(user_agent or "")
    browser = parsed.user_agent.family if parsed.user_agent else None
    system = parsed.os.family if parsed.os else None
    if browser and system:
        return f"{browser} on {system}"
    return browser or system or "an unknown browser"


def _still_open(now):
    """Not ended, within the absolute limit, and either used within the idle limit or remembered."""
    return (
        LoginSession.ended_at.is_(None),
        LoginSession.started_at > now - SESSION_ABSOLUTE_LIMIT,
        or_(LoginSession.last_seen_at > now - SESSION_IDLE_LIMIT, LoginSession.remember_hash.is_not(None)),
    )


@login.user_loader
def load_user(user_id):
    """The account of this browser's login, while that login is open and within its limits."""
    try:
        return _check_login(user_id)
    except SQLAlchemyError as error:
        _database_failed(error)
        return None


def _check_login(user_id):
    row = db.session.get(LoginSession, session.get(LOGIN_KEY, ""))
    user = db.session.get(User, int(user_id)) if user_id.isdigit() else None
    if row is None or user is None or row.user_id != user.id or not user.enabled or not _open(row):
        for key in ("_user_id", "_fresh", "_id", LOGIN_KEY):
            session.pop(key, None)
        return None
    now = _now()
    if now - row.last_seen_at > SESSION_IDLE_LIMIT:
        session.clear()
        if row.remember_hash is None:
            _end(row)
            db.session.commit()
        return None  # Flask-Login then tries the remember cookie, which restores a login that is not fresh
    if now - row.last_seen_at > SEEN_GRANULARITY:
        row.last_seen_at = now
        db.session.commit()
    return user


@login.request_loader
def restore_from_remember_cookie(request):
    """Restore a login whose session ended while idle, from its remember token; never as a fresh login."""
    login_id, _, token = request.cookies.get(REMEMBER_COOKIE, "").partition(".")
    if not token or getattr(session, "unavailable", False):
        return None
    try:
        return _restore(login_id, token)
    except SQLAlchemyError as error:
        _database_failed(error)
        return None


def _restore(login_id, token):
    row = db.session.get(LoginSession, login_id)
    if (
        row is None
        or not _open(row)
        or not row.remember_hash
        or not hmac.compare_digest(row.remember_hash, _hash(token))
    ):
        g.remember_cookie = ""
        return None
    user = db.session.get(User, row.user_id)
    if user is None or not user.enabled:
        g.remember_cookie = ""
        return None
    # The token is replaced in one conditional write: of two requests using it at once, one wins.
    new_token = secrets.token_urlsafe(32)
    replaced = db.session.execute(
        update(LoginSession)
        .where(LoginSession.id == row.id, LoginSession.remember_hash == _hash(token))
        .values(remember_hash=_hash(new_token), last_seen_at=_now()),
        execution_options={"synchronize_session": False},
    )
    db.session.commit()
    if replaced.rowcount != 1:
        return None
    g.remember_cookie = f"{row.id}.{new_token}"
    _new_session_id()
    session.clear()
    session.update({"_user_id": user.get_id(), "_fresh": False, LOGIN_KEY: row.id})
    return user


def logins_available(probe=False):
    """Whether the portal can keep and check logins now; with `probe`, its session store and database are asked."""
    if getattr(session, "unavailable", False) or g.get("database_unavailable"):
        return False
    if not probe:
        return True
    try:
        db.session.execute(text("SELECT 1"))
    except SQLAlchemyError as error:
        _database_failed(error)
        return False
    return current_app.session_interface.reachable()


def require_session_store(probe=False):
    """A page that needs a login answers 503 while the portal cannot keep or check logins."""
    if not logins_available(probe):
        abort(503, LOGINS_UNAVAILABLE)


def _database_failed(error):
    """Customers browse on without the database; pages that need a login answer 503 (see above)."""
    db.session.rollback()
    if not g.get("database_unavailable"):
        current_app.logger.error("the portal's database is unavailable: %s", type(error).__name__)
    g.database_unavailable = True


def register(app):
    """Write or delete the remember cookie when this request changed it."""

    @app.after_request
    def set_remember_cookie(response):
        value = g.pop("remember_cookie", None)
        if value is None:
            return response
        options = {
            "httponly": True,
            "secure": app.config["SESSION_COOKIE_SECURE"],
            "samesite": app.config["SESSION_COOKIE_SAMESITE"],
        }
        if value:
            response.set_cookie(REMEMBER_COOKIE, value, max_age=int(SESSION_ABSOLUTE_LIMIT.total_seconds()), **options)
        else:
            response.delete_cookie(REMEMBER_COOKIE, **options)
        return response


def _open(row):
    if row.ended_at is not None:
        return False
    if _now() - row.started_at > SESSION_ABSOLUTE_LIMIT:
        _end(row)
        db.session.commit()
        flash("Your session has ended. Please log in again.", "info")
        return False
    return True


def _end(row):
    row.ended_at = _now()
    row.remember_hash = None
    g.remember_cookie = ""


def _give_remember_token(row):
    token = secrets.token_urlsafe(32)
    row.remember_hash = _hash(token)
    g.remember_cookie = f"{row.id}.{token}"


def _new_session_id():
    """A new id for this browser's session (the old one is deleted), so an id seen before login is worthless after."""
    current_app.session_interface.regenerate(session._get_current_object())
