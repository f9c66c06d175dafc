"""Logging in and out."""

from flask import Blueprint, abort, flash, redirect, render_template, request, url_for
from flask_login import current_user

from .. import audit, metrics
from ..extensions import db
from ..models import User
from . import sessions, throttle
from .access import safe_next
from .forms import LoginForm, LogoutForm

bp = Blueprint("auth", __name__)

# Checked when the user name is unknown, so a wrong name costs as long as a wrong password.
_UNKNOWN_USER = User(password_hash="scrypt:32768:8:1$8mCbKZTmYr8g3X7S$" + "0" * 128)


@bp.route("/login", methods=["GET", "POST"])
def login():
    """Log a staff member or admin in, then go on to `next` if it is a path on this site."""
    sessions.require_session_store(probe=True)
    form = LoginForm()
    destination = safe_next(request.args.get("next"), url_for("catalog.list_animals"))
    if not form.validate_on_submit():
        return render_template("auth/login.html", form=form), 400 if form.is_submitted() else 200
    if not throttle.attempt(form.username.data):
        metrics.LOGINS.labels("limited").inc()
        audit.record("login_limited", actor=form.username.data)
        abort(429)
    user = db.session.scalar(db.select(User).filter_by(username=form.username.data))
    if not (user or _UNKNOWN_USER).check_password(form.password.data) or user is None:
        metrics.LOGINS.labels("failure").inc()
        audit.record("login_failed", actor=form.username.data)
        form.form_errors.append("Unknown user name or wrong password.")
        return render_template("auth/login.html", form=form), 401
    throttle.succeeded(form.username.data)
    sessions.start(user, remember=form.remember.data)
    metrics.LOGINS.labels("success").inc()
    audit.record("login", actor=user.username)
    flash(f"Logged in as {user.username}.", "success")
    return redirect(destination, 303)


@bp.post("/logout")
def logout():
    """Log out (a POST with a CSRF token, so no other site can do it for the user): the login ends for good."""
    form = LogoutForm()
    if form.validate_on_submit() and current_user.is_authenticated:
        audit.record("logout")
        sessions.end()
        flash("Logged out.", "info")
    return redirect(url_for("catalog.list_animals"), 303)
