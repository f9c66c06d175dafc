"""Login records: each login is a `LoginSession` row, which the browser's server-side session names.

Every request checks the row (see `sessions`), so logout, "end every session" and the idle and absolute limits take
effect on the next request in every process. A login with a second factor takes two steps: the password leaves the
session waiting 5 minutes for a code, not logged in. The request commits before its session is saved, so a row
always exists before a cookie names it.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from flask import request, session
from flask_babel import gettext as _
from flask_login import login_user, logout_user
from sqlalchemy import ColumnElement, func, or_, select, update

from petportal.auth import devices, passkeys, remember
from petportal.clock import now
from petportal.config import SESSION_ABSOLUTE_LIMIT, SESSION_IDLE_LIMIT
from petportal.data import session_store
from petportal.data.models import LoginSession, SecondFactor, User
from petportal.extensions import db

LOGIN_KEY = "login_id"
SECOND_FACTOR_KEY = "awaiting_second_factor"
# The password step of a login with a second factor stays good this long.
SECOND_FACTOR_LIMIT = timedelta(minutes=5)


def start(user: User, remember_me: bool, second_factor: SecondFactor | None = None) -> None:
    """Log `user` in: a new, empty session under a new id, a new login row (with the second factor it used, if
    any), a remember token when asked for, and a new device cookie."""
    started = now()
    row = LoginSession(
        id=secrets.token_urlsafe(32),
        user_id=user.id,
        started_at=started,
        last_seen_at=started,
        address=(request.remote_addr or "")[:64] or None,
        user_agent=request.user_agent.string[:255] or None,
        second_factor=second_factor,
    )
    if remember_me:
        remember.issue(row)
    db.session.add(row)
    user.last_login_at = started
    devices.issue(user)
    attach(user, row, fresh=True)


def attach(user: User, row: LoginSession, fresh: bool) -> None:
    """Attach this browser to `user`'s login `row` in a new, empty session (not `fresh`: restored by its token)."""
    session_store.regenerate()
    session.clear()
    login_user(user, fresh=fresh)
    session[LOGIN_KEY] = row.id


@dataclass(frozen=True)
class AwaitingLogin:
    user: User
    remember: bool
    destination: str


def await_second_factor(user: User, remember_me: bool, destination: str) -> None:
    """The password was right: end this browser's login, and wait for `user`'s code in a new session."""
    end()
    waiting = {"user_id": user.id, "remember": bool(remember_me), "next": destination, "at": now().timestamp()}
    session[SECOND_FACTOR_KEY] = waiting


def awaiting_second_factor() -> AwaitingLogin | None:
    """The login waiting for its code in this session, or None (none, expired, or the account changed)."""
    waiting = session.get(SECOND_FACTOR_KEY)
    if not isinstance(waiting, dict):
        return None
    user = db.session.get(User, waiting["user_id"])
    expired = now().timestamp() - waiting["at"] > SECOND_FACTOR_LIMIT.total_seconds()
    ended = user is not None and user.logins_ended_at is not None and user.logins_ended_at.timestamp() > waiting["at"]
    if expired or ended or user is None or not user.enabled or not passkeys.has_second_factor(user):
        session.pop(SECOND_FACTOR_KEY, None)
        return None
    return AwaitingLogin(user, waiting["remember"], waiting["next"])


def end() -> None:
    """Log the current browser out: its login ends for good, with its session and remember token."""
    if (row := of_this_browser()) is not None:
        close(row)
    logout_user()
    session_store.regenerate()
    session.clear()
    remember.forget()


def end_all(user_id: int, keep: str | None = None) -> None:
    """End every open login of an account (but `keep`); a login waiting for its second factor cannot finish."""
    ended = now()
    db.session.execute(
        update(LoginSession)
        .where(LoginSession.user_id == user_id, LoginSession.ended_at.is_(None), LoginSession.id != (keep or ""))
        .values(ended_at=ended, remember_hash=None)
    )
    db.session.execute(update(User).where(User.id == user_id).values(logins_ended_at=ended))


def close(row: LoginSession) -> None:
    """End login `row` for good, with its remember token; this browser's remember cookie is deleted."""
    row.ended_at = now()
    row.remember_hash = None
    remember.forget()


def of_this_browser() -> LoginSession | None:
    return db.session.get(LoginSession, session.get(LOGIN_KEY, ""))


def used_second_factor() -> bool:
    """Whether this browser's login proved a second factor (a code, a recovery code, or the identity provider's)."""
    row = of_this_browser()
    return row is not None and row.second_factor is not None


def current_login_id() -> str | None:
    login_id = session.get(LOGIN_KEY)
    return login_id if isinstance(login_id, str) else None


def open_logins(user_id: int) -> Sequence[LoginSession]:
    query = select(LoginSession).where(LoginSession.user_id == user_id, *_still_open(now()))
    return db.session.scalars(query.order_by(LoginSession.last_seen_at.desc())).all()


def open_login_counts() -> dict[int, int]:
    query = select(LoginSession.user_id, func.count()).where(*_still_open(now())).group_by(LoginSession.user_id)
    return {user_id: count for user_id, count in db.session.execute(query)}


def browser_in_words(user_agent: str | None) -> str:
    """A login's browser and system from its User-Agent ("Firefox on Ubuntu")."""
    from ua_parser import parse as parse_user_agent  # 4 MB of patterns, loaded by the first sessions page

    parsed = parse_user_agent(user_agent or "")
    browser = parsed.user_agent.family if parsed.user_agent else None
    system = parsed.os.family if parsed.os else None
    if browser and system:
        return _("%(browser)s on %(system)s", browser=browser, system=system)
    return browser or system or _("an unknown browser")


def _still_open(at: datetime) -> tuple[ColumnElement[Any], ...]:
    """Not ended, within the absolute limit, and either used within the idle limit or remembered."""
    return (
        LoginSession.ended_at.is_(None),
        LoginSession.started_at > at - SESSION_ABSOLUTE_LIMIT,
        or_(LoginSession.last_seen_at > at - SESSION_IDLE_LIMIT, LoginSession.remember_hash.is_not(None)),
    )
