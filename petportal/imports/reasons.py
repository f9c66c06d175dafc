"""Why an import's row, or the import itself, stands where it does, in words.

The database keeps a reason's code and the values its words need (`ImportRow.reason`, `BulkImport.reason`: see
`RowReason` and `StopReason`), never the words: they are chosen here when a page shows them, in the visitor's
language. A row the portal's own checks refused keeps no words at all: `files.refusals` works its reasons out again
from what the row kept, with the check that refused it. results.csv, a file for scripts, has the words in English.
"""

from __future__ import annotations

from collections.abc import Iterable

from flask.sansio.app import App
from flask_babel import force_locale
from flask_babel import gettext as _

from petportal.data.models import BulkImport, ImportRow, RowReason, StopReason, TicketState
from petportal.imports import files
from petportal.petstore import StoreReason
from petportal.petstore.words import store_words
from petportal.web.downloads import FILE_LANGUAGE


def row_reason(row: ImportRow) -> str | None:
    """Why the row was refused, or why its outcome is unknown; None when there is nothing to say."""
    reason = row.reason or {}
    match reason.get("code"):
        case RowReason.INVALID:
            values, columns = reason.get("values", len(files.HEADER)), reason.get("columns", len(files.HEADER))
            problems = files.refusals(row.name, row.category, row.category_id, row.status, values, columns)
            return " ".join(problems) or None
        case RowReason.REFUSED:
            # A row refused before reasons were codes keeps the store's words alone (`message`).
            code = StoreReason(reason.get("said", StoreReason.STORE_SAID))
            said = store_words(code, reason.get("message", ""), reason.get("status"))
            return _("The pet store refused it: %(message)s", message=said)
        case RowReason.NO_ANSWER:
            return _("The pet store gave no usable answer: it may or may not have added this animal.")
        case RowReason.PORTAL_STOPPED:
            return _("The portal stopped while this animal was being sent: the pet store may or may not have added it.")
        case RowReason.PROMOTED_BEFORE if reason.get("pet_id") is not None:
            return _("Promoted before: production has it as id %(id)s. It is never sent twice.", id=reason["pet_id"])
        case RowReason.PROMOTED_BEFORE:
            return _("Promoted before, with an outcome not known yet or unknown. It is never sent twice.")
        case RowReason.GONE if reason.get("said"):
            said = store_words(StoreReason(reason["said"]), reason.get("message", ""), reason.get("status"))
            return _("Staging no longer has this animal: %(message)s", message=said)
        case RowReason.GONE:
            return _("Staging no longer has this animal.")
        case RowReason.DUPLICATE:
            return _(
                "The pet store already lists this animal (id %(id)s): left out unless chosen.", id=reason.get("pet_id")
            )
        case RowReason.RECORDED:
            return str(reason.get("text", "")) or None
    return None


def is_copy(row: ImportRow) -> bool:
    """Whether the row was left out as a copy of an animal the target store lists, and may still be chosen."""
    return row.state == TicketState.INVALID and (row.reason or {}).get("code") == RowReason.DUPLICATE


def import_reason(batch: BulkImport) -> str | None:
    """Why the import stopped sending (paused or stopped); None while it is not stopped."""
    reason = batch.reason or {}
    environment = batch.environment
    match reason.get("code"):
        case StopReason.KEY_REJECTED:
            return _(
                "The pet store refused the portal's key for %(environment)s. Nothing more was sent.",
                environment=environment,
            )
        case StopReason.UNAVAILABLE:
            return _(
                "The pet store of %(environment)s stopped answering. Nothing more was sent.", environment=environment
            )
        case StopReason.ROW_UNKNOWN:
            return _(
                "The pet store of %(environment)s gave no usable answer for a row, so nothing more was sent. Check the "
                "rows listed under “Outcome unknown” first.",
                environment=environment,
            )
        case StopReason.SWITCHED:
            return _(
                "The portal switched from %(previous)s to %(active)s while this import ran. Nothing more was sent to "
                "%(environment)s.",
                previous=reason.get("previous"),
                active=reason.get("active"),
                environment=environment,
            )
        case StopReason.LIMITED:
            return _(
                "%(owner)s may no longer add to %(environment)s (limited or disabled), so nothing more was sent.",
                owner=batch.username,
                environment=environment,
            )
        case StopReason.RECORDED:
            return str(reason.get("text", "")) or None
    return None


def for_the_file(rows: Iterable[ImportRow]) -> list[str | None]:
    """Each row's reason as results.csv gives it: in English, whatever the language of the page that asked."""
    with force_locale(FILE_LANGUAGE):
        return [row_reason(row) for row in rows]


def register(app: App) -> None:
    """Let the import's page say why: `{{ import_row_reason(row) }}` and `{{ import_reason(batch) }}`."""
    app.jinja_env.globals.update(import_row_reason=row_reason, import_reason=import_reason, import_row_is_copy=is_copy)
