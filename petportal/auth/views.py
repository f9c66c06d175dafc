"""Logging in (with a second factor where the account has one) and out."""

from __future__ import annotations

from flask import Blueprint, flash, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue
from flask_babel import gettext as _
from flask_babel import ngettext
from flask_login import current_user

from .. import audit, metrics
from ..extensions import db
from ..forms import ButtonForm
from ..models import User
from . import logins, mfa, sessions, throttle
from .access import require_own_password, safe_next
from .forms import CodeForm, LoginForm

bp = Blueprint("auth", __name__)
bp.before_app_request(require_own_password)

# Checked when the user name is unknown, so a wrong name costs as long as a wrong password.
_UNKNOWN_USER = User(password_hash="scrypt:32768:8:1$8mCbKZTmYr8g3X7S$" + "0" * 128)


@bp.route("/login", methods=["GET", "POST"])
def login() -> ResponseReturnValue:
    """Log a staff member or admin in, then go on to `next` if it is a path on this site."""
    sessions.require_session_store(probe=True)
    form = LoginForm()
    destination = safe_next(request.args.get("next"), url_for("catalog.list_animals"))
    if not form.validate_on_submit():
        return render_template("auth/login.html", form=form), 400 if form.is_submitted() else 200
    if not throttle.attempt(form.username.data):
        metrics.LOGINS.labels("limited").inc()
        audit.record("login_limited", actor=form.username.data)
        return _too_many_attempts()
    user = db.session.scalar(db.select(User).filter_by(username=form.username.data))
    if not (user or _UNKNOWN_USER).check_password(form.password.data) or user is None:
        metrics.LOGINS.labels("failure").inc()
        audit.record("login_failed", actor=form.username.data)
        form.form_errors.append(_("Unknown user name or wrong password."))
        return render_template("auth/login.html", form=form), 401
    throttle.succeeded(form.username.data)
    if not user.enabled:
        metrics.LOGINS.labels("failure").inc()
        audit.record("login_refused", actor=user.username, detail="the account is disabled")
        form.form_errors.append(_("This account is disabled. Ask an admin to enable it."))
        return render_template("auth/login.html", form=form), 403
    if user.mfa_enabled:
        logins.await_second_factor(user, form.remember.data, destination)
        return redirect(url_for(".second_factor"), 303)
    return _logged_in(user, form.remember.data, destination)


@bp.route("/login/mfa", methods=["GET", "POST"])
def second_factor() -> ResponseReturnValue:
    """The second step of a login with a second factor: a code from the app, or a recovery code."""
    sessions.require_session_store()
    waiting = logins.awaiting_second_factor()
    if waiting is None:
        flash(_("Log in with your user name and password first."), "info")
        return redirect(url_for(".login"), 303)
    form = CodeForm()
    if not form.validate_on_submit():
        return render_template("auth/mfa.html", form=form), 400 if form.is_submitted() else 200
    user = waiting.user
    if not throttle.attempt(user.username, "mfa"):
        audit.record("mfa_limited", actor=user.username)
        return _too_many_attempts()
    accepted = mfa.verify(user, form.code.data)
    if accepted is None:
        metrics.LOGINS.labels("failure").inc()
        audit.record("mfa_failed", actor=user.username)
        form.code.errors.append(_("That code is wrong or has been used already. Wait for the next one and try again."))
        return render_template("auth/mfa.html", form=form), 401
    throttle.succeeded(user.username, "mfa")
    if accepted == "totp":
        audit.record("mfa_succeeded", actor=user.username)
        return _logged_in(user, waiting.remember, waiting.destination)
    left = mfa.recovery_codes_left(user)
    audit.record("recovery_code_used", actor=user.username, detail=f"{left} left")
    response = _logged_in(user, waiting.remember, waiting.destination)
    used = ngettext(
        "You used a recovery code; %(num)d is left. Set up your app again under Your account.",
        "You used a recovery code; %(num)d are left. Set up your app again under Your account.",
        left,
    )
    flash(used, "warning")
    return response


@bp.post("/logout")
def logout() -> ResponseReturnValue:
    """Log out (a POST with a CSRF token, so no other site can do it for the user): the login ends for good."""
    form = ButtonForm()
    if form.validate_on_submit() and current_user.is_authenticated:
        audit.record("logout")
        logins.end()
        flash(_("Logged out."), "info")
    return redirect(url_for("catalog.list_animals"), 303)


def _logged_in(user: User, remember: bool, destination: str) -> ResponseReturnValue:
    logins.start(user, remember_me=remember)
    metrics.LOGINS.labels("success").inc()
    audit.record("login", actor=user.username)
    flash(_("Logged in as %(username)s.", username=user.username), "success")
    return redirect(destination, 303)


def _too_many_attempts() -> ResponseReturnValue:
    # Returned, not raised: an error handler rolls the request back, and the refusal's audit entry with it.
    from ..errors import render_error  # errors imports this package (its sessions module)

    return render_error(429)
