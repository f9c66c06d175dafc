"""Views of bulk imports: upload, preview, start, progress and results."""

from collections.abc import Callable

from flask import Blueprint, Response, abort, flash, make_response, redirect, render_template, request, url_for
from flask.blueprints import BlueprintSetupState
from flask.typing import ResponseReturnValue
from flask_babel import force_locale, ngettext
from flask_babel import gettext as _
from flask_login import current_user
from werkzeug.datastructures import CombinedMultiDict

from petportal.auth.access import role_required
from petportal.catalog import categories, duplicates
from petportal.catalog.forms import BIDI_CONTROLS
from petportal.config import settings
from petportal.data import audit
from petportal.data.models import AuditAction, AuditDetail, BulkImport, ImportRow, ImportState, Role, TicketState
from petportal.data.payloads import ImportDetails
from petportal.i18n.lazy_text import lazy_gettext as _l
from petportal.imports import batches, engines, files, reasons
from petportal.imports.forms import StartForm, UploadForm
from petportal.petstore import Unavailable
from petportal.serving.choice import active_choice
from petportal.serving.request import serving
from petportal.web.downloads import FILE_LANGUAGE, Cell, csv_download
from petportal.web.error_pages import ErrorPage, render_error
from petportal.web.forms import ECHO_CHARS, ButtonForm

bp = Blueprint("imports", __name__, url_prefix="/animals/import")
# secrets.token_urlsafe(16): 22 characters, so "<id>.json" never reads as an id.
IMPORT_ID = "<string(length=22):import_id>"
OUTCOMES = {
    TicketState.INVALID: _l("Refused by the portal"),
    TicketState.ISSUED: _l("Not sent yet"),
    TicketState.SENDING: _l("Being sent"),
    TicketState.CREATED: _l("Added"),
    TicketState.REFUSED: _l("Refused by the pet store"),
    TicketState.UNKNOWN: _l("Unknown"),
}
STATES = {
    ImportState.PREVIEW: _l("preview, not started"),
    ImportState.QUEUED: _l("waiting to be sent"),
    ImportState.RUNNING: _l("being sent"),
    ImportState.PAUSED: _l("paused"),
    ImportState.STOPPED: _l("stopped by a switch"),
    ImportState.DONE: _l("done"),
}
DISCARDED = _l("This import was discarded: nothing of it was sent.")
OTHER_ENVIRONMENT = _l(
    "This import was made for an environment your account no longer works on, so it cannot be opened here. "
    "An admin who works on that environment can still open it."
)
RESULT_COLUMNS = ("line", "name", "categoryId", "status", "outcome", "id", "message")
PROMOTION_COLUMNS = ("stagingId", "name", "categoryId", "status", "outcome", "productionId", "message")


@bp.record_once
def share_the_outcomes(state: BlueprintSetupState) -> None:
    state.app.jinja_env.globals.update(IMPORT_OUTCOMES=OUTCOMES, IMPORT_STATES=STATES, ECHO_CHARS=ECHO_CHARS)
    reasons.register(state.app)


@bp.route("", methods=["GET", "POST"])
@role_required(Role.STAFF)
def upload() -> ResponseReturnValue:
    """The upload form, and this account's earlier imports; a checked file becomes a preview."""
    environment = serving().environment
    # The file and the text fields together (PortalForm alone reads only the text fields).
    form = UploadForm(CombinedMultiDict((request.files, request.form))) if request.method == "POST" else UploadForm()
    if form.validate_on_submit():
        upload = form.file.data
        raw = upload.read(files.FILE_MAX_BYTES + 1)
        try:
            rows = files.read(raw, categories.label_ids(environment.name))
        except files.FileRefused as refused:
            form.file.errors.append(_("%(problem)s Nothing was stored.", problem=str(refused)))
        else:
            try:
                # Rows the store already lists are left out unless chosen: a copy made by mistake stays forever.
                rows = files.left_out_copies(rows, duplicates.listed(serving().client))
            except Unavailable:
                form.file.errors.append(
                    _(
                        "The pet store is not answering, so the file could not be checked against the animals it "
                        "lists. Nothing was stored; upload it again in a moment."
                    )
                )
            else:
                batch = batches.create(current_user, environment.name, _shown_name(upload.filename), raw, rows)
                return redirect(url_for(".show", import_id=batch.id), 303)
    page = render_template("imports/upload.html", form=form, recent=batches.recent(current_user))
    return page, 400 if form.is_submitted() else 200


@bp.get(f"/{IMPORT_ID}")
@role_required(Role.STAFF)
def show(import_id: str) -> str:
    """The preview before the start; the progress while it is sent; the results after."""
    return _page(_find(import_id))


@bp.get(f"/{IMPORT_ID}.json")
@role_required(Role.STAFF)
def progress(import_id: str) -> dict[str, object]:
    """{state, total, created, failed, unknown}, for the progress bar's script and for scripts."""
    return batches.progress(_find(import_id))


@bp.get(f"/{IMPORT_ID}/results.csv")
@role_required(Role.STAFF)
def results(import_id: str) -> Response:
    """Every row with its outcome and, once created, its new id."""
    batch = _find(import_id)
    # Read now: the body is written once the request's session is gone.
    found = batch.rows
    promotion = batch.source is not None
    with force_locale(FILE_LANGUAGE):  # a file for scripts: in English, whatever the page's language
        messages = [reasons.row_reason(row) for row in found]
    rows = [
        (row.source_id if promotion else row.line, row.name, _category(row), row.status, row.state, row.pet_id, message)
        for row, message in zip(found, messages, strict=True)
    ]
    return csv_download(f"import-{batch.id}-results.csv", PROMOTION_COLUMNS if promotion else RESULT_COLUMNS, rows)


@bp.post(f"/{IMPORT_ID}/start")
@role_required(Role.STAFF)
def start(import_id: str) -> ResponseReturnValue:
    """Send the rows not yet sent: the first start (with the copies chosen), or a resume after a pause or a switch."""
    form = StartForm()
    chosen = form.chosen() if form.validate_on_submit() else set()
    batch = _find(import_id)
    if batch.state == ImportState.PREVIEW and not batches.sendable(batch.id):
        if not batches.still_there(batch.id):  # discarded in another tab meanwhile: its rows are gone
            return render_error(404, str(DISCARDED))
        if not chosen & set(batches.copies(batch.id)):
            return _page(batch, _("Nothing was sent: no row is chosen to add.")), 400
    return _send(
        import_id,
        lambda batch, active: batches.start(batch, active, chosen),
        AuditDetail.IMPORT_STARTED,
        lambda batch, count: _(
            "Sending the animals to %(environment)s. You can leave this page and come back.",
            environment=batch.environment,
        ),
        _("This import was already started."),
    )


@bp.post(f"/{IMPORT_ID}/retry")
@role_required(Role.STAFF)
def retry(import_id: str) -> ResponseReturnValue:
    """Send again the rows the pet store refused; rows whose outcome is unknown are never resent."""
    return _send(
        import_id,
        batches.retry_refused,
        AuditDetail.IMPORT_RETRIED,
        lambda batch, count: ngettext(
            "Sending the %(num)d refused row again.", "Sending the %(num)d refused rows again.", count
        ),
        _("There is nothing to send again."),
    )


@bp.post(f"/{IMPORT_ID}/discard")
@role_required(Role.STAFF)
def discard(import_id: str) -> ResponseReturnValue:
    """Throw a preview away; nothing was sent."""
    batch = _find(import_id)
    if not ButtonForm().validate_on_submit():
        abort(400)
    filename, environment, owner = batch.filename, batch.environment, batch.username
    if not batches.discard(batch):
        # Another request got there first: it discarded the import, or started it.
        if not batches.still_there(import_id):
            return render_error(404, str(DISCARDED))
        return _page(batch, _("This import was already started, so it is kept with its results.")), 409
    audit.record(
        AuditAction.IMPORT_DISCARDED,
        environment=environment,
        detail=ImportDetails(code=AuditDetail.IMPORT_DISCARDED, import_id=import_id, filename=filename, owner=owner),
    )
    flash(_("Discarded the preview of %(filename)s. Nothing was sent.", filename=filename), "success")
    return redirect(url_for(".upload"), 303)


def _find(import_id: str) -> BulkImport:
    batch = batches.find(import_id, current_user)
    match batch:
        case batches.Closed.MISSING:
            abort(404)
        case batches.Closed.OTHER_ENVIRONMENT:
            # Theirs (or an admin's to see), but for an environment the account no longer works on: say so.
            abort(make_response(render_error(403, str(OTHER_ENVIRONMENT), title=_("Import on another environment"))))
    if batches.needs_runner(batch):
        engines.dispatch(batch.id)  # its runner stopped (a restart): resume it
    return batch


def _send(
    import_id: str,
    queue: Callable[[BulkImport, str | None], int],
    pressed: AuditDetail,
    sending: Callable[[BulkImport, int], str],
    nothing: str,
) -> ResponseReturnValue:
    """Queue rows with `queue` (batches.start or .retry_refused) and have them sent, audited as `pressed`; flash
    `sending(batch, count)`, or `nothing` when none were queued."""
    batch = _find(import_id)
    if refused := _refuse_unbound(batch):
        return refused
    # A promotion goes to production whatever is active; an import stops when the active environment changes.
    count = queue(batch, None if batch.source else active_choice().active().name)
    if count:
        # Who pressed the button: the entries of the animals it adds name the import's owner.
        audit.record(
            AuditAction.IMPORT_STARTED,
            environment=batch.environment,
            detail=ImportDetails(code=pressed, import_id=batch.id, filename=batch.filename, owner=batch.username),
        )
        engines.dispatch(batch.id)
        flash(sending(batch, count), "success")
    elif not batches.still_there(batch.id):
        return render_error(404, str(DISCARDED))
    else:
        flash(nothing, "info")
    return redirect(url_for(".show", import_id=batch.id), 303)


def _refuse_unbound(batch: BulkImport) -> ErrorPage | None:
    """The answer when the button's form is not valid or the import is for another environment than the one served."""
    if not ButtonForm().validate_on_submit():
        abort(400)
    if batch.source is not None:
        # A promotion's environments are its own, whatever is served: for those who work on both.
        return render_error(403) if current_user.only_environment is not None else None
    now = serving().environment.name
    if batch.environment != now:
        problem = _(
            "This import was previewed for %(environment)s, but the portal now serves %(now)s. Nothing was sent. "
            "It can be started while the portal serves %(environment)s; to add these animals to %(now)s, "
            "upload the file again.",
            environment=batch.environment,
            now=now,
        )
        return _page(batch, problem), 409
    return None


def _page(batch: BulkImport, problem: str | None = None) -> str:
    found = batches.counts(batch.id)
    return render_template(
        "imports/show.html",
        batch=batch,
        rows=batch.rows,
        counts=found,
        progress=batches.progress(batch, found),
        earlier=batches.earlier_import(batch) if batch.state == ImportState.PREVIEW else None,
        waits_for_worker=settings().import_runner == "rq",
        labels=categories.labels(batch.environment),
        button=ButtonForm(),
        problem=problem,
        sendable=batches.sendable(batch.id),
        copies=len(batches.copies(batch.id)) if batch.state == ImportState.PREVIEW else 0,
    )


def _shown_name(filename: str | None) -> str:
    """The file's name as the browser sent it, reduced to something safe to show: no folders, no control characters."""
    name = (filename or "").replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(char for char in name if char.isprintable() and char not in BIDI_CONTROLS).strip()
    return name[:120] or "upload.csv"


def _category(row: ImportRow) -> Cell:
    """The category as the file gave it: the id it was read as, as a number (so -3 is no formula), else the text."""
    return row.category_id if row.category_id is not None and row.category == str(row.category_id) else row.category
