"""Keep me logged in: a random token for one login, stored hashed on its row and replaced at every use.

The cookie holds `<login id>.<token>`. Not Flask-Login's remember cookie: that one (the account's id, signed) cannot
be ended for one login and is not replaced when used, so a stolen copy stays good. A copy of this one used once is
worthless.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from flask import Flask, Response, g
from sqlalchemy import update

from petportal.clock import now
from petportal.config import REMEMBER_COOKIE, SESSION_ABSOLUTE_LIMIT
from petportal.data.models import LoginSession
from petportal.data.unit_of_work import updated_one
from petportal.extensions import db


def issue(row: LoginSession) -> None:
    """Give login `row` a new token; the cookie carrying it goes out with this response."""
    token = secrets.token_urlsafe(32)
    row.remember_hash = _hash(token)
    g.remember_cookie = f"{row.id}.{token}"


def forget() -> None:
    g.remember_cookie = ""


def presented(cookie: str) -> tuple[str, str] | None:
    """The login id and the token in a remember cookie's value, or None when it holds none."""
    login_id, _, token = cookie.partition(".")
    return (login_id, token) if token else None


def matches(row: LoginSession, token: str) -> bool:
    return bool(row.remember_hash) and hmac.compare_digest(row.remember_hash or "", _hash(token))


def replace(row: LoginSession, token: str) -> bool:
    """Swap login `row`'s `token` for a new one (sent with this response); False when another request used it first."""
    new_token = secrets.token_urlsafe(32)
    replaced = updated_one(
        update(LoginSession)
        .where(LoginSession.id == row.id, LoginSession.remember_hash == _hash(token))
        .values(remember_hash=_hash(new_token), last_seen_at=now())
    )
    # Committed at once: of two racing requests one wins, and its new cookie holds even if its view then fails.
    db.session.commit()
    if replaced:
        g.remember_cookie = f"{row.id}.{new_token}"
    return replaced


def register(app: Flask) -> None:
    """Write or delete the remember cookie when this request changed it."""

    @app.after_request
    def set_remember_cookie(response: Response) -> Response:
        # The value this request left for the cookie: "" deletes it, None leaves it alone.
        value = g.pop("remember_cookie", None)
        secure = bool(app.config["SESSION_COOKIE_SECURE"])
        samesite = app.config["SESSION_COOKIE_SAMESITE"]
        if value:
            response.set_cookie(
                REMEMBER_COOKIE, value, max_age=SESSION_ABSOLUTE_LIMIT, httponly=True, secure=secure, samesite=samesite
            )
        elif value is not None:
            response.delete_cookie(REMEMBER_COOKIE, httponly=True, secure=secure, samesite=samesite)
        return response


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()
