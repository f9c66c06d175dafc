"""Logging in and out."""

from flask import Blueprint, current_app, flash, redirect, render_template, request, session, url_for
from flask_login import current_user, login_user, logout_user

from .. import audit
from ..extensions import db, limiter
from ..models import User
from ..security import start_session
from .access import safe_next
from .forms import LoginForm, LogoutForm

bp = Blueprint("auth", __name__)

# Checked when the user name is unknown, so a wrong name costs as long as a wrong password.
_UNKNOWN_USER = User(password_hash="scrypt:32768:8:1$8mCbKZTmYr8g3X7S$" + "0" * 128)


def _attempted_username():
    return "login-user:" + request.form.get("username", "").strip().lower()[:80]


def _failed(response):
    return response.status_code == 401


@bp.route("/login", methods=["GET", "POST"])
@limiter.limit(lambda: current_app.config["LOGIN_LIMIT_PER_USER"], key_func=_attempted_username, methods=["POST"], deduct_when=_failed)
@limiter.limit(lambda: current_app.config["LOGIN_LIMIT_PER_ADDRESS"], methods=["POST"], deduct_when=_failed)
def login():
    """Log a staff member or admin in, then go on to `next` if it is a path on this site."""
    form = LoginForm()
    destination = safe_next(request.args.get("next"), url_for("catalog.list_animals"))
    if not form.validate_on_submit():
        return render_template("auth/login.html", form=form), 400 if form.is_submitted() else 200
    user = db.session.scalar(db.select(User).filter_by(username=form.username.data))
    if not (user or _UNKNOWN_USER).check_password(form.password.data) or user is None:
        audit.record("login_failed", actor=form.username.data)
        form.form_errors.append("Unknown user name or wrong password.")
        return render_template("auth/login.html", form=form), 401
    session.clear()
    login_user(user, remember=form.remember.data)
    start_session(user)
    audit.record("login", actor=user.username)
    flash(f"Logged in as {user.username}.", "success")
    return redirect(destination, 303)


@bp.post("/logout")
def logout():
    """Log out (a POST with a CSRF token, so no other site can do it for the user)."""
    form = LogoutForm()
    if form.validate_on_submit() and current_user.is_authenticated:
        audit.record("logout")
        logout_user()
        session.clear()
        flash("Logged out.", "info")
    return redirect(url_for("catalog.list_animals"), 303)
