"""Logging in (with a second factor where the account has one) and out."""

from __future__ import annotations

from flask import Blueprint, Response, current_app, flash, jsonify, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue
from flask_babel import gettext as _
from flask_babel import ngettext
from flask_login import current_user

from petportal.auth import devices, logins, mfa, passkeys, sessions, sso, throttle
from petportal.auth.access import require_own_password
from petportal.auth.forms import CodeForm, LoginForm
from petportal.config import settings
from petportal.data import audit, passwords
from petportal.data.models import AuditAction, AuditDetail, SecondFactor, User
from petportal.data.payloads import Count, PasskeyDetails
from petportal.extensions import csrf, db
from petportal.telemetry import metrics
from petportal.web.error_pages import render_error
from petportal.web.forms import ButtonForm
from petportal.web.readers import json_object, safe_next

bp = Blueprint("auth", __name__)
bp.before_app_request(require_own_password)


@bp.route("/login", methods=["GET", "POST"])
def login() -> ResponseReturnValue:
    """Log a staff member or admin in, then go on to `next` if it is a path on this site."""
    sessions.require_session_store(probe=True)
    form = LoginForm()
    destination = safe_next(request.args.get("next"), url_for("catalog.list_animals"))
    if not form.validate_on_submit():
        return _login_page(form, 400 if form.is_submitted() else 200)
    user = db.session.scalar(db.select(User).filter_by(username=form.username.data))
    device = devices.presented(user)
    if (limit := throttle.attempt(form.username.data, device=device)) is not None:
        metrics.LOGINS.labels("limited").inc()
        # Refused for its address alone: counted for the address, whatever names it tries (audit.COUNTED).
        actor = audit.ANONYMOUS if limit == throttle.Limit.ADDRESS else form.username.data
        audit.record(AuditAction.LOGIN_LIMITED, actor=actor)
        return _too_many_attempts()
    # One hash checked whatever the name: unknown, with a password, or of the company's sign-in (auth.passwords).
    matched = passwords.matches(user.password_hash if user else None, form.password.data)
    # A disabled account answers as a wrong password does, and keeps the attempt counted: nothing confirms a password.
    if user is None or not matched or not user.enabled:
        metrics.LOGINS.labels("failure").inc()
        if user is not None and matched:
            audit.record(AuditAction.LOGIN_REFUSED, actor=user.username, detail=AuditDetail.ACCOUNT_DISABLED)
        else:
            audit.record(AuditAction.LOGIN_FAILED, actor=form.username.data)
        form.form_errors.append(_("Unknown user name or wrong password."))
        return _login_page(form, 401)
    throttle.succeeded(form.username.data, device=device)
    if passkeys.has_second_factor(user):
        logins.await_second_factor(user, form.remember.data, destination)
        return redirect(url_for(".second_factor"), 303)
    return _logged_in(user, form.remember.data, destination)


def _login_page(form: LoginForm, status: int) -> ResponseReturnValue:
    """The login form, with "Sign in with ..." when single sign-on is configured (it keeps `next`)."""
    next_path = request.args.get("next") or None
    return render_template(
        "auth/login.html",
        form=form,
        sso_name=sso.provider_name(),
        sso_url=url_for(".sso_login", next=next_path),
        passkey_url=url_for(".passkey_login", next=next_path) if settings().public_url else None,
    ), status


@bp.route("/login/mfa", methods=["GET", "POST"])
def second_factor() -> ResponseReturnValue:
    """The second step of a login with a second factor: a code from the app, or a recovery code."""
    sessions.require_session_store()
    waiting = logins.awaiting_second_factor()
    if waiting is None:
        flash(_("Log in with your user name and password first."), "info")
        return redirect(url_for(".login"), 303)
    form = CodeForm()
    user = waiting.user
    if not form.validate_on_submit():
        return _second_factor_page(form, user, 400 if form.is_submitted() else 200)
    if throttle.attempt(user.username, "mfa") is not None:
        audit.record(AuditAction.MFA_LIMITED, actor=user.username)
        return _too_many_attempts()
    accepted = mfa.verify(user, form.code.data)
    if accepted is None:
        metrics.LOGINS.labels("failure").inc()
        audit.record(AuditAction.MFA_FAILED, actor=user.username)
        form.code.errors.append(_("That code is wrong or has been used already. Wait for the next one and try again."))
        return _second_factor_page(form, user, 401)
    throttle.succeeded(user.username, "mfa")
    if accepted == SecondFactor.TOTP:
        audit.record(AuditAction.MFA_SUCCEEDED, actor=user.username)
        return _logged_in(user, waiting.remember, waiting.destination, second_factor=accepted)
    left = mfa.recovery_codes_left(user)
    codes_left = Count(code=AuditDetail.CODES_LEFT, count=left)
    audit.record(AuditAction.RECOVERY_CODE_USED, actor=user.username, detail=codes_left)

    response = _logged_in(user, waiting.remember, waiting.destination, second_factor=accepted)

    used = ngettext(
        "You used a recovery code; %(num)d is left. Set up your app again under Your account.",
        "You used a recovery code; %(num)d are left. Set up your app again under Your account.",
        left,
    )
    flash(used, "warning")
    return response


@bp.get("/login/sso")
def sso_login() -> ResponseReturnValue:
    """Sign in through the company's identity provider (404 when none is configured), then go on to `next`."""
    sessions.require_session_store(probe=True)
    destination = safe_next(request.args.get("next"), url_for("catalog.list_animals"))
    try:
        return sso.begin(destination)
    except sso.ProviderUnreachable:
        return _sign_in_unavailable()


@bp.get("/login/sso/callback")
def sso_callback() -> ResponseReturnValue:
    """The identity provider's way back: the account is found or made and logged in."""
    sessions.require_session_store()
    try:
        signed_in = sso.signed_in()
    except sso.SignInFailed as failed:
        metrics.LOGINS.labels("failure").inc()
        return render_error(400, str(failed), title=_("Sign-in not completed"))
    except sso.SignInRefused as refused:
        metrics.LOGINS.labels("failure").inc()
        return render_error(403, str(refused), title=_("Sign-in refused"))
    except sso.ProviderUnreachable:
        return _sign_in_unavailable()
    user = signed_in.user
    if signed_in.second_factor:
        return _logged_in(user, False, signed_in.destination, second_factor=SecondFactor.PROVIDER)
    if user.is_admin and settings().require_admin_mfa and passkeys.has_second_factor(user):
        logins.await_second_factor(user, False, signed_in.destination)
        return redirect(url_for(".second_factor"), 303)
    return _logged_in(user, False, signed_in.destination)


@bp.post("/login/sso/backchannel-logout")
@csrf.exempt  # the provider's server calls it, with a signed logout token instead of a browser's session
def sso_backchannel_logout() -> ResponseReturnValue:
    """OpenID Connect Back-Channel Logout: 200 when the logout token holds, else 400 naming the failed check."""
    no_store = {"Cache-Control": "no-store"}
    try:
        sso.logged_out(request.form.get("logout_token", ""))
    except sso.LogoutRefused as refused:
        current_app.logger.warning("back-channel logout refused: %s", refused)
        return jsonify(error="invalid_request", error_description=str(refused)), 400, no_store
    except sso.ProviderUnreachable:
        return jsonify(error="temporarily_unavailable"), 503, no_store
    return Response(status=200, headers=no_store)


@bp.post("/login/passkey/options")
def passkey_options() -> ResponseReturnValue:
    """What the browser needs to sign in with a passkey (JSON)."""
    sessions.require_session_store(probe=True)
    waiting = logins.awaiting_second_factor()
    try:
        options = passkeys.authentication_options(waiting.user if waiting else None)
    except passkeys.PasskeyError as error:
        return jsonify(error=str(error)), 400
    return Response(options, mimetype="application/json")


@bp.post("/login/passkey")
def passkey_login() -> ResponseReturnValue:
    """Sign in with a passkey, alone or as a login's second step; answers JSON: where to go, or what went wrong."""
    sessions.require_session_store()
    waiting = logins.awaiting_second_factor()
    credential = (json_object(request) or {}).get("credential")
    try:
        passkey, user = passkeys.authenticate(credential, waiting.user if waiting else None)
    except passkeys.PasskeyError as error:
        metrics.LOGINS.labels("failure").inc()
        account = error.account or (waiting.user.username if waiting else None)
        if account is not None:  # an answer that names no account is not audited: anyone could send thousands
            audit.record(AuditAction.PASSKEY_REFUSED, actor=account)
        return jsonify(error=str(error)), 401
    audit.record(AuditAction.PASSKEY_USED, actor=user.username, detail=PasskeyDetails(name=passkey.name))
    if waiting:
        destination, remember = waiting.destination, waiting.remember
    else:
        destination, remember = safe_next(request.args.get("next"), url_for("catalog.list_animals")), False
    _log_in(user, remember, second_factor=SecondFactor.PASSKEY)
    return jsonify(redirect=destination)


@bp.post("/logout")
def logout() -> ResponseReturnValue:
    """Log out (a POST with a CSRF token, so no other site can do it for the user)."""
    form = ButtonForm()
    if form.validate_on_submit() and current_user.is_authenticated:
        audit.record(AuditAction.LOGOUT)
        logins.end()
        flash(_("Logged out."), "info")
    return redirect(url_for("catalog.list_animals"), 303)


def _logged_in(
    user: User, remember: bool, destination: str, second_factor: SecondFactor | None = None
) -> ResponseReturnValue:
    _log_in(user, remember, second_factor)
    return redirect(destination, 303)


def _log_in(user: User, remember: bool, second_factor: SecondFactor | None = None) -> None:
    logins.start(user, remember_me=remember, second_factor=second_factor)
    metrics.LOGINS.labels("success").inc()
    audit.record(AuditAction.LOGIN, actor=user.username)
    flash(_("Logged in as %(username)s.", username=user.username), "success")


def _second_factor_page(form: CodeForm, user: User, status: int) -> ResponseReturnValue:
    return render_template("auth/mfa.html", form=form, codes=user.mfa_enabled, passkey=passkeys.count(user) > 0), status


def _sign_in_unavailable() -> ResponseReturnValue:
    message = _("The company's sign-in could not be reached. Try again in a moment, or log in with a password.")
    return render_error(503, message, retry=True)


def _too_many_attempts() -> ResponseReturnValue:
    # Returned, not raised: an error handler rolls the request back, and the refusal's audit entry with it.
    return render_error(429)
