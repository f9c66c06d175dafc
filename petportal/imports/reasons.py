"""Why an import's row, or the import itself, stands where it does, in words.

The database keeps a reason's code and the values its words need (`RowReason`, `StopReason`), never the words: they
are chosen here when a page shows them, in the visitor's language (results.csv's in English). A row the
portal's own checks refused keeps no words at all: `files.refusals` works its reasons out again from what it kept.
"""

from flask.sansio.app import App
from flask_babel import gettext as _

from petportal.data.models import BulkImport, ImportRow, RowReason, StopReason, TicketState
from petportal.data.payloads import (
    InvalidRow,
    PromotedBefore,
    RecordedRow,
    RecordedStop,
    RowReasonPayload,
    StopReasonPayload,
    StoreRefusal,
    Switched,
    decode,
)
from petportal.imports import files
from petportal.petstore import StoreReason
from petportal.petstore.words import store_words


def row_reason(row: ImportRow) -> str | None:
    """Why the row was refused, or why its outcome is unknown; None when there is nothing to say."""
    match decode(RowReasonPayload, row.reason):
        case InvalidRow(values=values, columns=columns):
            values, columns = (len(files.HEADER) if n is None else n for n in (values, columns))
            problems = files.refusals(row.name, row.category, row.category_id, row.status, values, columns)
            return " ".join(problems) or None
        case StoreRefusal(code=RowReason.REFUSED, said=said, message=message, status=status):
            # A row refused before reasons were codes keeps the store's words alone (`message`).
            words = store_words(StoreReason(said or StoreReason.STORE_SAID), message, status)
            return _("The pet store refused it: %(message)s", message=words)
        case RowReasonPayload(code=RowReason.NO_ANSWER):
            return _("The pet store gave no usable answer: it may or may not have added this animal.")
        case RowReasonPayload(code=RowReason.PORTAL_STOPPED):
            return _("The portal stopped while this animal was being sent: the pet store may or may not have added it.")
        case PromotedBefore(code=RowReason.DUPLICATE, pet_id=pet_id):
            return _("The pet store already lists this animal (id %(id)s): left out unless chosen.", id=pet_id)
        case PromotedBefore(pet_id=int() as pet_id):
            return _("Promoted before: production has it as id %(id)s. It is never sent twice.", id=pet_id)
        case PromotedBefore():
            return _("Promoted before, with an outcome not known yet or unknown. It is never sent twice.")
        case StoreRefusal(code=RowReason.GONE, said=str() as said, message=message, status=status):
            words = store_words(StoreReason(said), message, status)
            return _("Staging no longer has this animal: %(message)s", message=words)
        case RowReasonPayload(code=RowReason.GONE):
            return _("Staging no longer has this animal.")
        case RecordedRow(text=text):
            return text or None
    return None


def is_copy(row: ImportRow) -> bool:
    """Whether the row was left out as a copy of an animal the target store lists, and may still be chosen."""
    reason = decode(RowReasonPayload, row.reason)
    return row.state == TicketState.INVALID and reason is not None and reason.code == RowReason.DUPLICATE


def import_reason(batch: BulkImport) -> str | None:
    """Why the import stopped sending (paused or stopped); None while it is not stopped."""
    environment = batch.environment
    match decode(StopReasonPayload, batch.reason):
        case StopReasonPayload(code=StopReason.KEY_REJECTED):
            return _(
                "The pet store refused the portal's key for %(environment)s. Nothing more was sent.",
                environment=environment,
            )
        case StopReasonPayload(code=StopReason.UNAVAILABLE):
            return _(
                "The pet store of %(environment)s stopped answering. Nothing more was sent.", environment=environment
            )
        case StopReasonPayload(code=StopReason.ROW_UNKNOWN):
            return _(
                "The pet store of %(environment)s gave no usable answer for a row, so nothing more was sent. Check the "
                "rows listed under “Outcome unknown” first.",
                environment=environment,
            )
        case Switched(previous=previous, active=active):
            return _(
                "The portal switched from %(previous)s to %(active)s while this import ran. Nothing more was sent to "
                "%(environment)s.",
                previous=previous,
                active=active,
                environment=environment,
            )
        case StopReasonPayload(code=StopReason.LIMITED):
            return _(
                "%(owner)s may no longer add to %(environment)s (limited or disabled), so nothing more was sent.",
                owner=batch.username,
                environment=environment,
            )
        case RecordedStop(text=text):
            return text or None
    return None


def register(app: App) -> None:
    """Let the import's page say why: `{{ import_row_reason(row) }}` and `{{ import_reason(batch) }}`."""
    app.jinja_env.globals.update(import_row_reason=row_reason, import_reason=import_reason, import_row_is_copy=is_copy)
