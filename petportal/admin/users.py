"""Admins manage accounts: create them, change roles, disable and enable, reset passwords and second
factors, and end sessions. Every change is a fresh-login POST, and audited with who, whom and what."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps

from flask import Blueprint, abort, flash, redirect, render_template, url_for
from flask.typing import ResponseReturnValue
from flask_babel import gettext as _
from flask_babel import ngettext
from flask_login import current_user, login_fresh

from petportal.admin.forms import EnvironmentsForm, NewUserForm, ResetPasswordForm, RoleForm
from petportal.auth import accounts, logins, passkeys
from petportal.auth.access import log_in_again, role_required
from petportal.data import audit
from petportal.data.models import AuditAction, AuditDetail, Role, User
from petportal.data.payloads import Count, EnvironmentsChange, RoleDetails
from petportal.extensions import db
from petportal.i18n.languages import environments_label, role_label
from petportal.web.forms import ButtonForm

bp = Blueprint("users", __name__, url_prefix="/admin/users")
# Nobody grants what they cannot do themselves: only an admin who works on both environments changes accounts.
account_changers = role_required(Role.ADMIN, every_environment=True)


@bp.get("")
@role_required(Role.ADMIN)
def list_users() -> ResponseReturnValue:
    """Every account: role, enabled, second factor, last login and open sessions."""
    return render_template(
        "admin/users/list.html",
        users=db.session.scalars(db.select(User).order_by(User.username)).all(),
        open_logins=logins.open_login_counts(),
        with_passkeys=passkeys.accounts_with_passkeys(),
    )


@bp.route("/new", methods=["GET", "POST"])
@account_changers
def new_user() -> ResponseReturnValue:
    """Add an account with an initial password, which it must change at its first login."""
    form = NewUserForm()
    if not form.validate_on_submit():
        return render_template("admin/users/new.html", form=form), 400 if form.is_submitted() else 200
    if not login_fresh():
        return log_in_again(url_for(".new_user"), _("Log in again to add an account."))
    try:
        user = accounts.create(
            form.username.data,
            Role(form.role.data),
            form.password.data,
            must_change_password=True,
            environments=form.environments.chosen,
        )
    except accounts.AccountError as error:
        form.username.errors.append(str(error))
        return render_template("admin/users/new.html", form=form), 400
    name = user.username
    audit.record(
        AuditAction.USER_CREATED, target=name, detail=RoleDetails(code=AuditDetail.CREATED_BY_ADMIN, role=user.role)
    )
    if user.role == Role.STAFF:
        added = _("Added staff %(username)s. They choose their own password when they first log in.", username=name)
    else:
        added = _("Added admin %(username)s. They choose their own password when they first log in.", username=name)
    flash(added, "success")
    return redirect(url_for(".manage_user", name=name), 303)


@bp.get("/<name>")
@role_required(Role.ADMIN)
def manage_user(name: str) -> ResponseReturnValue:
    """One account, and every change an admin can make to it."""
    return _manage_page(_account(name))


def account_change(view: Callable[[User], ResponseReturnValue]) -> Callable[[str], ResponseReturnValue]:
    """An admin's POST that changes the account named in the path: `account_changers` only, a fresh login, then
    the change or its refusal. `view` returns a success message to flash (a str), or a page of its own."""

    @wraps(view)
    def changed(name: str) -> ResponseReturnValue:
        user = _account(name)
        back = url_for(".manage_user", name=user.username)
        if not login_fresh():
            return log_in_again(back, _("Log in again to change %(username)s's account.", username=user.username))
        try:
            outcome = view(user)
        except accounts.AccountError as error:
            flash(str(error), "danger")
            return redirect(back, 303)
        if isinstance(outcome, str):
            flash(outcome, "success")
            return redirect(back, 303)
        return outcome

    return account_changers(changed)


@bp.post("/<name>/role")
@account_change
def change_role(user: User) -> ResponseReturnValue:
    """Give the account another role."""
    form = RoleForm()
    if not form.validate_on_submit():
        return _manage_page(user, role_form=form, status=400)
    before = user.role
    if before == form.role.data:
        return _("%(username)s is already %(role)s; nothing changed.", username=user.username, role=role_label(before))
    accounts.change_role(current_user, user, Role(form.role.data))
    audit.record(
        AuditAction.ROLE_CHANGED,
        target=user.username,
        detail=RoleDetails(code=AuditDetail.ROLE_CHANGED, previous=before, role=user.role),
    )
    return _(
        "%(username)s is now %(role)s, from their next request on.", username=user.username, role=role_label(user.role)
    )


@bp.post("/<name>/environments")
@account_change
def change_environments(user: User) -> ResponseReturnValue:
    """Let the account work on production, staging or both, from its next request on."""
    form = EnvironmentsForm()
    if not form.validate_on_submit():
        return _manage_page(user, environments_form=form, status=400)
    before = user.environments
    if before == form.environments.chosen:
        return _("%(username)s already works on %(environments)s; nothing changed.", **_works_on(user))
    accounts.set_environments(user, form.environments.chosen)
    audit.record(
        AuditAction.ENVIRONMENTS_CHANGED,
        target=user.username,
        detail=EnvironmentsChange(code=AuditDetail.ENVIRONMENTS, previous=before, environments=user.environments),
    )
    return _("%(username)s works on %(environments)s from their next request on.", **_works_on(user))


def _works_on(user: User) -> dict[str, str]:
    return {"username": user.username, "environments": environments_label(user.environments)}


@bp.post("/<name>/disable")
@account_change
def disable(user: User) -> ResponseReturnValue:
    """Disable the account: it cannot log in, and its sessions end."""
    accounts.set_enabled(current_user, user, enabled=False)
    audit.record(AuditAction.USER_DISABLED, target=user.username, detail=AuditDetail.EVERY_SESSION_ENDED)
    return _("%(username)s is disabled and logged out everywhere.", username=user.username)


@bp.post("/<name>/enable")
@account_change
def enable(user: User) -> ResponseReturnValue:
    """Let a disabled account log in again."""
    accounts.set_enabled(current_user, user, enabled=True)
    audit.record(AuditAction.USER_ENABLED, target=user.username)
    return _("%(username)s can log in again.", username=user.username)


@bp.post("/<name>/sessions/end")
@account_change
def end_sessions(user: User) -> ResponseReturnValue:
    """End every session of the account: each browser is logged out on its next request."""
    ended = len(logins.open_logins(user.id))
    logins.end_all(user.id)
    audit.record(
        AuditAction.SESSIONS_ENDED, target=user.username, detail=Count(code=AuditDetail.SESSIONS_ENDED, count=ended)
    )
    if user.id == current_user.id:
        return redirect(url_for("auth.login"), 303)
    return ngettext(
        "Every session of %(username)s has ended (%(num)d was open).",
        "Every session of %(username)s has ended (%(num)d were open).",
        ended,
        username=user.username,
    )


@bp.post("/<name>/password")
@account_change
def reset_password(user: User) -> ResponseReturnValue:
    """Set a new password that the account must change at its next login; its sessions end."""
    _not_yourself(user, _("Change your own password under Your account."))
    form = ResetPasswordForm()
    if not form.validate_on_submit():
        return _manage_page(user, password_form=form, status=400)
    accounts.reset_password(user, form.password.data)
    audit.record(AuditAction.PASSWORD_RESET, target=user.username, detail=AuditDetail.PASSWORD_RESET)
    return _(
        "%(username)s's password is reset. Tell them the new one; they must change it when they log in.",
        username=user.username,
    )


@bp.post("/<name>/mfa/reset")
@account_change
def reset_mfa(user: User) -> ResponseReturnValue:
    """Remove the account's second factors, app and passkeys (a lost or stolen device), to set up anew when needed."""
    _not_yourself(user, _("Set up a new device for your own second factor under Your account."))
    accounts.reset_mfa(user)
    audit.record(AuditAction.MFA_RESET, target=user.username)
    return _(
        "%(username)s's second factor is removed. They set up a new one from Your account.", username=user.username
    )


def _not_yourself(user: User, instead: str) -> None:
    if user.id == current_user.id:
        raise accounts.AccountError(instead)


def _account(name: str) -> User:
    return accounts.find(name) or abort(404)


def _manage_page(
    user: User,
    role_form: RoleForm | None = None,
    password_form: ResetPasswordForm | None = None,
    environments_form: EnvironmentsForm | None = None,
    status: int = 200,
) -> tuple[str, int]:
    # Only the form that was sent keeps what was typed; the others show the account as it is.
    return render_template(
        "admin/users/manage.html",
        user=user,
        is_you=user.id == current_user.id,
        logins=logins.open_logins(user.id),
        role_form=role_form or RoleForm(formdata=None, data={"role": user.role}),
        password_form=password_form or ResetPasswordForm(formdata=None),
        environments_form=environments_form
        or EnvironmentsForm(formdata=None, data={"environments": sorted(user.environments)}),
        button=ButtonForm(),
        fresh=login_fresh(),
        second_factor=passkeys.has_second_factor(user),
        passkey_count=passkeys.count(user),
    ), status
