"""Your own account: change your password, see and end your sessions, set up a second factor and passkeys."""

from __future__ import annotations

from flask import Blueprint, Response, abort, flash, jsonify, redirect, render_template, request, session, url_for
from flask.typing import ResponseReturnValue
from flask_babel import gettext as _
from flask_login import current_user, login_fresh

from petportal.account.forms import ChangePasswordForm
from petportal.auth import accounts, logins, mfa, passkeys, throttle
from petportal.auth.access import log_in_again, login_required
from petportal.auth.forms import CodeForm
from petportal.config import settings
from petportal.data import audit
from petportal.data.models import AuditAction, AuditDetail, User
from petportal.data.payloads import PasskeyDetails
from petportal.web import compression
from petportal.web.forms import ButtonForm
from petportal.web.readers import json_object

bp = Blueprint("account", __name__, url_prefix="/account")
# The secret being enrolled (encrypted) until a code confirms it, and the recovery codes to show once.
ENROLMENT_KEY = "mfa_enrolment"
NEW_CODES_KEY = "mfa_recovery_codes"


@bp.get("")
@login_required
def index() -> ResponseReturnValue:
    return redirect(url_for(".sessions_page"))


@bp.route("/password", methods=["GET", "POST"])
@login_required
def password() -> ResponseReturnValue:
    """Change your password; every other session of the account ends."""
    form = ChangePasswordForm()
    user = current_user._get_current_object()
    if user.is_sso or not form.validate_on_submit():  # the company's sign-in: the page says there is no password
        return _password_page(form, 400 if form.is_submitted() else 200)
    if throttle.attempt(user.username) is not None:
        abort(429)
    if not user.check_password(form.current_password.data):
        audit.record(AuditAction.PASSWORD_CHANGE_FAILED, target=user.username, detail=AuditDetail.WRONG_PASSWORD)
        form.current_password.errors.append(_("This is not your current password."))
        return _password_page(form, 400)
    throttle.succeeded(user.username)
    try:
        accounts.change_password(user, form.new_password.data, keep_login=logins.current_login_id())
    except accounts.AccountError as error:
        form.new_password.errors.append(str(error))
        return _password_page(form, 400)
    audit.record(AuditAction.PASSWORD_CHANGED, target=user.username, detail=AuditDetail.OTHER_SESSIONS_ENDED)
    flash(_("Your password is changed, and your account is logged out everywhere else."), "success")
    return redirect(url_for("catalog.list_animals"), 303)


@bp.get("/sessions")
@login_required
def sessions_page() -> ResponseReturnValue:
    """Where your account is logged in now, and a button that ends every session but this one."""
    return render_template(
        "account/sessions.html",
        logins=logins.open_logins(current_user.id),
        this_login=logins.current_login_id(),
        browser_in_words=logins.browser_in_words,
        form=ButtonForm(),
    )


@bp.post("/sessions/end-others")
@login_required
def end_other_sessions() -> ResponseReturnValue:
    logins.end_all(current_user.id, keep=logins.current_login_id())
    audit.record(AuditAction.OTHER_SESSIONS_ENDED, target=current_user.username)
    flash(_("Every other session of your account has ended."), "success")
    return redirect(url_for(".sessions_page"), 303)


@bp.route("/mfa", methods=["GET", "POST"])
@login_required
@compression.uncompressed  # the key to scan and the recovery codes
def mfa_page() -> ResponseReturnValue:
    """Set up a second factor: scan the code, confirm with a code from the app, keep the recovery codes."""
    user = current_user._get_current_object()
    if request.method == "GET" and (codes := session.pop(NEW_CODES_KEY, None)):
        return render_template("account/mfa_codes.html", codes=codes)
    replacing = user.mfa_enabled
    if request.method == "GET" and replacing and not request.args.get("new"):
        return render_template("account/mfa_on.html", user=user, codes_left=mfa.recovery_codes_left(user))
    # A stolen remember-me cookie must not be able to put its own device on the account.
    if not login_fresh():
        return log_in_again(url_for(".mfa_page", new=1), _("Log in again to set up your second factor."))
    secret = _enrolment_secret()
    form = CodeForm()
    if not form.validate_on_submit():
        return _enrolment_page(user, secret, form, 400 if form.is_submitted() else 200)
    codes = mfa.enrol(user, secret, form.code.data)
    if codes is None:
        form.code.errors.append(
            _("That code does not match. Check that your phone's clock is right and enter the code shown now.")
        )
        return _enrolment_page(user, secret, form, 400)
    session.pop(ENROLMENT_KEY, None)
    session[NEW_CODES_KEY] = codes
    audit.record(AuditAction.MFA_ENROLLED, target=user.username, detail=AuditDetail.NEW_DEVICE if replacing else None)
    flash(_("Your second factor is on. From now on you log in with a code from your app."), "success")
    return redirect(url_for(".mfa_page"), 303)


@bp.get("/passkeys")
@login_required
def passkeys_page() -> ResponseReturnValue:
    """Your passkeys (name, added, last used), a button that adds one in this browser, and a remove button each."""
    return render_template(
        "account/passkeys.html",
        passkeys=passkeys.of_account(current_user),
        form=ButtonForm(),
        fresh=login_fresh(),
        available=bool(settings().public_url),
        name_max_length=passkeys.NAME_MAX_LENGTH,
        name_too_long=passkeys.too_long_name(),
    )


@bp.post("/passkeys/options")
@login_required
def passkey_options() -> ResponseReturnValue:
    """What the browser needs to make a new passkey for your account (JSON); only after a fresh login."""
    if not login_fresh():
        return jsonify(error=_("Log in again to add a passkey.")), 403
    try:
        options = passkeys.registration_options(current_user._get_current_object())
    except passkeys.PasskeyError as error:
        return jsonify(error=str(error)), 400
    return Response(options, mimetype="application/json")


@bp.post("/passkeys")
@login_required
def add_passkey() -> ResponseReturnValue:
    """Keep the passkey the browser just made, checked against this session's challenge (JSON in and out)."""
    if not login_fresh():
        return jsonify(error=_("Log in again to add a passkey.")), 403
    user = current_user._get_current_object()
    answer = json_object(request)
    if answer is None:
        return jsonify(error=_("That passkey could not be added. Try again.")), 400
    try:
        passkey = passkeys.register(user, answer.get("credential"), str(answer.get("name") or ""))
    except passkeys.PasskeyError as error:
        return jsonify(error=str(error)), 400
    audit.record(AuditAction.PASSKEY_ADDED, target=user.username, detail=PasskeyDetails(name=passkey.name))
    flash(_("Your passkey “%(name)s” is added. You can sign in with it alone.", name=passkey.name), "success")
    return jsonify(redirect=url_for(".passkeys_page"))


@bp.post("/passkeys/<int:passkey_id>/remove")
@login_required
def remove_passkey(passkey_id: int) -> ResponseReturnValue:
    """Remove one of your passkeys; an admin who must have a second factor keeps their last one."""
    user = current_user._get_current_object()
    if not ButtonForm().validate_on_submit():
        abort(400)
    if not login_fresh():
        return log_in_again(url_for(".passkeys_page"), _("Log in again to remove a passkey."))
    required = user.is_admin and settings().require_admin_mfa
    try:
        removed = passkeys.remove(user, passkey_id, second_factor_required=required)
    except passkeys.PasskeyError as error:
        flash(str(error), "danger")
        return redirect(url_for(".passkeys_page"), 303)
    audit.record(AuditAction.PASSKEY_REMOVED, target=user.username, detail=PasskeyDetails(name=removed.name))
    flash(_("Your passkey “%(name)s” is removed.", name=removed.name), "success")
    return redirect(url_for(".passkeys_page"), 303)


def _enrolment_secret() -> str:
    """The secret this session is enrolling: the same one across reloads, until a code confirms it."""
    kept = session.get(ENROLMENT_KEY)
    secret = mfa.decrypt(kept) if kept else None
    if secret is None:
        secret = mfa.new_secret()
        session[ENROLMENT_KEY] = mfa.encrypt(secret)
    return secret


def _enrolment_page(user: User, secret: str, form: CodeForm, status: int) -> tuple[str, int]:
    return render_template(
        "account/mfa_enrol.html",
        form=form,
        secret=secret,
        qr_code=mfa.qr_code(user, secret),
        replacing=user.mfa_enabled,
    ), status


def _password_page(form: ChangePasswordForm, status: int) -> tuple[str, int]:
    return render_template("account/password.html", form=form, forced=current_user.must_change_password), status
