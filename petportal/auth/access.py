"""Who may open which page, and where a login may send the user next."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import ParamSpec
from urllib.parse import urlsplit

from flask import abort, flash, redirect, request, url_for
from flask.typing import ResponseReturnValue
from flask_babel import gettext as _
from flask_login import current_user
from werkzeug.wrappers import Response

from ..config import settings
from ..extensions import login
from ..models import Role
from . import logins
from .sessions import require_session_store

Params = ParamSpec("Params")


@login.unauthorized_handler
def send_to_login() -> Response:
    """Anonymous users are sent to log in, and brought back afterwards (503 while logins cannot work)."""
    require_session_store()
    return redirect(url_for("auth.login", next=request.full_path.rstrip("?")))


# What an account that must choose its own password may still open: that page, logging out, and files.
OPEN_BEFORE_PASSWORD_CHANGE = frozenset({"account.password", "auth.logout", "static", "bootstrap.static"})


def require_own_password() -> Response | None:
    """An account given a password by an admin reaches no page but the password change until it has chosen its own."""
    if request.endpoint in OPEN_BEFORE_PASSWORD_CHANGE or request.blueprint == "ops":
        return None
    if current_user.is_authenticated and current_user.must_change_password:
        return redirect(url_for("account.password"), 303)
    return None


def login_required(view: Callable[Params, ResponseReturnValue]) -> Callable[Params, ResponseReturnValue]:
    """Let in any logged-in user; send anonymous users to log in."""
    return role_required(None)(view)


def role_required(
    role: Role | None,
) -> Callable[[Callable[Params, ResponseReturnValue]], Callable[Params, ResponseReturnValue]]:
    """Let in users who have `role` (admins have every role; None: any account); send anonymous users to log in;
    403 others. An admin page first needs a second factor where PETPORTAL_REQUIRE_ADMIN_MFA asks for one."""

    def decorator(view: Callable[Params, ResponseReturnValue]) -> Callable[Params, ResponseReturnValue]:
        @wraps(view)
        def guarded(*args: Params.args, **kwargs: Params.kwargs) -> ResponseReturnValue:
            if not current_user.is_authenticated:
                return send_to_login()
            if role is not None and not current_user.has_role(role):
                abort(403)
            if role == Role.ADMIN and settings().require_admin_mfa and not second_factor_satisfied():
                flash(_("This portal requires admins to use a second factor. Set yours up first."), "warning")
                return redirect(url_for("account.mfa_page"), 303)
            return view(*args, **kwargs)

        return guarded

    return decorator


def second_factor_satisfied() -> bool:
    """An admin's second factor, as PETPORTAL_REQUIRE_ADMIN_MFA asks: the account has one of the portal's own
    (which every password login then asks for), or this login proved one at the identity provider."""
    return bool(current_user.mfa_enabled) or logins.used_second_factor()


def safe_next(target: str | None, default: str) -> str:
    """`target` if it is a path on this site, else `default`: never another host or scheme."""
    if not target or not target.startswith("/") or target.startswith("//"):
        return default
    if "\\" in target or any(ord(char) < 32 or ord(char) == 127 for char in target):
        return default
    parts = urlsplit(target)
    if parts.scheme or parts.netloc:
        return default
    return target


def log_in_again(back_to: str, message: str) -> Response:
    """Send a login that is not fresh to log in again (its password, and code) before a sensitive change;
    `message` says so, naming the change ("Log in again to add an account.")."""
    flash(message, "warning")
    return redirect(url_for("auth.login", next=back_to), 303)
