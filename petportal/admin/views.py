"""The admin pages: environments, audit log and status."""

from __future__ import annotations

from flask import Blueprint, flash, redirect, render_template, request, url_for
from flask.blueprints import BlueprintSetupState
from flask.typing import ResponseReturnValue
from flask_babel import gettext as _
from flask_login import current_user, login_fresh

from petportal.admin import audit_log as audit_words
from petportal.admin.forms import AuditFilterForm, PreviewForm, SwitchEnvironmentForm, environment_choices
from petportal.admin.status import in_words, probe_all, stability_in_words
from petportal.auth.access import log_in_again, role_required
from petportal.clock import now
from petportal.data import audit
from petportal.data.models import AuditAction, AuditDetail, Role
from petportal.data.payloads import SwitchedFrom
from petportal.extensions import db
from petportal.i18n.languages import role_label
from petportal.petstore import GET_PET_REMOVAL
from petportal.petstore.environments import environments
from petportal.serving.choice import active_choice
from petportal.serving.request import previewed_name, set_preview
from petportal.web.downloads import csv_download
from petportal.web.error_pages import render_error
from petportal.web.readers import whole_number

bp = Blueprint("admin", __name__, url_prefix="/admin")
AUDIT_PAGE_SIZE = 25
# Far beyond any real log, and small enough that the row offset always fits the database's integers.
LAST_AUDIT_PAGE = 10**9
# Who may read the audit log, on its page and as a download.
audit_readers = role_required(Role.ADMIN)


@bp.record_once
def share_the_labels(state: BlueprintSetupState) -> None:
    """Let every page name audit entries (`audit_action`, `audit_details`) and roles (`role_name`, `Role`)."""
    state.app.jinja_env.globals.update(
        audit_action=audit_words.action_label, audit_details=audit_words.details, role_name=role_label, Role=Role
    )


@bp.get("")
@role_required(Role.ADMIN)
def index() -> ResponseReturnValue:
    """The admin section opens on its first page."""
    return redirect(url_for(".environment"))


@bp.get("/environment")
@role_required(Role.ADMIN)
def environment() -> ResponseReturnValue:
    """The configured environments, the active one, and the forms to switch or preview."""
    return _environment_page(_switch_form(), _preview_form())


@bp.post("/environment")
@role_required(Role.ADMIN, every_environment=True)
def switch_environment() -> ResponseReturnValue:
    """Switch the active environment for every user and every portal process."""
    if not login_fresh():
        return log_in_again(url_for(".environment"), _("Log in again to switch the environment for everyone."))
    form = _switch_form(sent=True)
    if not form.validate_on_submit():
        return _environment_page(form, _preview_form(), 400)
    target = environments().get(form.environment.data)
    if target is None or not target.configured:
        form.environment.errors.append(
            _("%(environment)s is not configured and cannot be chosen.", environment=form.environment.data)
        )
        return _environment_page(form, _preview_form(), 400)
    previous = active_choice().active()
    if previous.name == target.name:
        flash(_("%(environment)s is already the active environment; nothing changed.", environment=target.name), "info")
        return redirect(url_for(".environment"), 303)
    active_choice().set_active(target.name)
    audit.record(AuditAction.ENVIRONMENT_SWITCHED, environment=target.name, detail=SwitchedFrom(previous=previous.name))
    flash(_("Everyone is now served from %(environment)s.", environment=target.name), "success")
    return redirect(url_for(".environment"), 303)


@bp.post("/environment/preview")
@role_required(Role.ADMIN, every_environment=True)
def preview_environment() -> ResponseReturnValue:
    """Serve one environment to this admin's session only, or clear the preview."""
    form = _preview_form(sent=True)
    if not form.validate_on_submit():
        return _environment_page(_switch_form(), form, 400)
    chosen = environments().get(form.environment.data)
    if chosen is not None and not chosen.configured:
        form.environment.errors.append(
            _("%(environment)s is not configured and cannot be previewed.", environment=chosen.name)
        )
        return _environment_page(_switch_form(), form, 400)
    set_preview(chosen)
    active = active_choice().active().name
    if chosen is None:
        audit.record(AuditAction.PREVIEW_CHANGED, detail=AuditDetail.PREVIEW_CLEARED)
        flash(_("Preview cleared: you see the active environment, %(environment)s.", environment=active), "info")
    else:
        audit.record(AuditAction.PREVIEW_CHANGED, environment=chosen.name)
        seen = _(
            "You alone now see %(environment)s. Everyone else still sees %(active)s.",
            environment=chosen.name,
            active=active,
        )
        flash(seen, "info")
    return redirect(url_for(".environment"), 303)


@bp.get("/audit")
@audit_readers
def audit_log() -> ResponseReturnValue:
    """Who did what, when, as the filter in the URL chooses: newest first, a page at a time."""
    form = AuditFilterForm(formdata=request.args)
    if not form.validate():
        return render_template("admin/audit.html", form=form, entries=None, kept={}), 400
    # Any page number is a page: one that is not a whole number is the first, one past the end shows nothing.
    page = whole_number(request.args.get("page", "")) or 1
    entries = db.paginate(
        audit.matching(form.chosen()),
        page=min(max(page, 1), LAST_AUDIT_PAGE),
        per_page=AUDIT_PAGE_SIZE,
        error_out=False,
    )
    return render_template("admin/audit.html", form=form, entries=entries, kept=form.kept())


@bp.get("/audit.csv")
@audit_readers
def audit_log_csv() -> ResponseReturnValue:
    """Every entry the audit page shows for the same filter, as a CSV download with the page's columns."""
    form = AuditFilterForm(formdata=request.args)
    if not form.validate():
        problems = " ".join(
            _("%(field)s: %(error)s", field=field.label.text, error=error) for field in form for error in field.errors
        )
        return render_error(
            400, _("The audit log cannot be downloaded for this filter. %(problems)s", problems=problems)
        )
    entries = audit.read_newest_first(form.chosen())
    return csv_download("audit-log.csv", audit_words.COLUMNS, audit_words.file_cells(entries))


@bp.get("/status")
@role_required(Role.ADMIN)
def status() -> ResponseReturnValue:
    """Each environment: reachable, latency, key accepted, deprecation notices, stability markers."""
    return render_template(
        "admin/status.html",
        statuses=probe_all(environments()),
        removal=GET_PET_REMOVAL,
        today=now().date(),
        in_words=in_words,
        stability_in_words=stability_in_words,
    )


# Both forms of the environment page name their field `environment`: each reads the request only when it is the one
# sent, so a refused switch leaves the preview menu showing the preview there is (and the other way round).
def _switch_form(sent: bool = False) -> SwitchEnvironmentForm:
    form = SwitchEnvironmentForm() if sent else SwitchEnvironmentForm(formdata=None)
    form.environment.choices = environment_choices()
    if not sent:
        form.environment.data = next(
            (e.name for e in environments().all() if e.configured and e.name != active_choice().active().name), None
        )
    return form


def _preview_form(sent: bool = False) -> PreviewForm:
    form = PreviewForm() if sent else PreviewForm(formdata=None)
    form.environment.choices = environment_choices(_("No preview: see the active environment"))
    if not sent:
        form.environment.data = previewed_name()
    return form


def _environment_page(
    switch_form: SwitchEnvironmentForm, preview_form: PreviewForm, status: int = 200
) -> tuple[str, int]:
    return render_template(
        "admin/environment.html",
        environments=environments().all(),
        active=active_choice().active(),
        switch_form=switch_form,
        preview_form=preview_form,
        fresh=login_fresh(),
        admin=current_user,
    ), status
