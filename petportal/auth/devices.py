"""Device cookies (OWASP's "Slow down online guessing attacks with device cookies"): each login leaves its browser
a signed cookie naming the account and a random device id. That browser's attempts at the account are counted on
the device's own counter instead of the account's (throttle.py), so failures from elsewhere never refuse it, and
its own failures refuse nobody else. The signature is made with the account's password hash too: a new password
(changed, or reset by an admin) makes every device cookie of the account worthless, so cookies gathered while a
password was known do not outlast it.
"""

from __future__ import annotations

import secrets

from flask import Response, after_this_request, current_app, request
from itsdangerous import BadData, URLSafeTimedSerializer

from petportal.config import DEVICE_COOKIE
from petportal.data.models import User

# A browser stays known for a year after its last login.
LIFETIME = 365 * 24 * 60 * 60


def issue(user: User) -> None:
    """Mark this browser as one where `user` logged in: a new device cookie goes out with this response."""
    value = _signer(user).dumps([user.username, secrets.token_urlsafe(16)])

    @after_this_request
    def set_device_cookie(response: Response) -> Response:
        config = current_app.config
        secure, samesite = bool(config["SESSION_COOKIE_SECURE"]), config["SESSION_COOKIE_SAMESITE"]
        response.set_cookie(DEVICE_COOKIE, value, max_age=LIFETIME, httponly=True, secure=secure, samesite=samesite)
        return response


def presented(user: User | None) -> str | None:
    """The device id of this browser's cookie when it is genuine, in date and made for `user` with its password of
    now; else None."""
    if user is None:
        return None
    try:
        account, device = _signer(user).loads(request.cookies.get(DEVICE_COOKIE, ""), max_age=LIFETIME)
    except (BadData, TypeError, ValueError):
        return None
    return device if account == user.username and isinstance(device, str) else None


def _signer(user: User) -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(current_app.config["SECRET_KEY"], salt=f"petportal device {user.password_hash}")
