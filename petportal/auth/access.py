"""Who may open which page, and where a login may send the user next."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import ParamSpec

from flask import abort, flash, redirect, request, url_for
from flask.typing import ResponseReturnValue
from flask_babel import gettext as _
from flask_login import current_user
from werkzeug.wrappers import Response

from petportal.auth import logins
from petportal.auth.sessions import require_session_store
from petportal.config import STATIC_ENDPOINTS, settings
from petportal.data.models import Role
from petportal.extensions import login

Params = ParamSpec("Params")


@login.unauthorized_handler
def send_to_login() -> Response:
    """Anonymous users are sent to log in, and brought back afterwards (503 while logins cannot work)."""
    require_session_store()
    return redirect(url_for("auth.login", next=request.full_path.rstrip("?")))


# What an account that must choose its own password may still open: that page, logging out, and files.
OPEN_BEFORE_PASSWORD_CHANGE = frozenset({"account.password", "auth.logout", *STATIC_ENDPOINTS})


def require_own_password() -> Response | None:
    """An account given its password by an admin reaches only the password change until it chooses its own."""
    if request.endpoint in OPEN_BEFORE_PASSWORD_CHANGE or request.blueprint == "ops":
        return None
    if current_user.is_authenticated and current_user.must_change_password:
        return redirect(url_for("account.password"), 303)
    return None


def role_required(
    role: Role | None, *, every_environment: bool = False
) -> Callable[[Callable[Params, ResponseReturnValue]], Callable[Params, ResponseReturnValue]]:
    """Let in users who have `role` (None: any account), send anonymous users to log in, 403 others; with
    `every_environment`, also 403 an account limited to one environment (the change reaches every one)."""

    def decorator(view: Callable[Params, ResponseReturnValue]) -> Callable[Params, ResponseReturnValue]:
        @wraps(view)
        def guarded(*args: Params.args, **kwargs: Params.kwargs) -> ResponseReturnValue:
            if not current_user.is_authenticated:
                return send_to_login()
            if role is not None and not current_user.has_role(role):
                abort(403)
            if every_environment and current_user.only_environment is not None:
                abort(403)
            if (
                role == Role.ADMIN
                and settings().require_admin_mfa
                and not (current_user.mfa_enabled or logins.used_second_factor())
            ):
                flash(_("This portal requires admins to use a second factor. Set yours up first."), "warning")
                return redirect(url_for("account.mfa_page"), 303)
            return view(*args, **kwargs)

        return guarded

    return decorator


login_required = role_required(None)


def log_in_again(back_to: str, message: str) -> Response:
    """Send a login that is not fresh to log in again before a sensitive change, with `message`."""
    flash(message, "warning")
    return redirect(url_for("auth.login", next=back_to), 303)
