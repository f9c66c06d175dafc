"""Bulk imports in the portal's database: made from a checked file, started, discarded, counted.

Every change of state is one conditional UPDATE, so two tabs, processes or hosts pressing the same button change it
once. These functions only add to the session: the request, or the runner's step, commits.
"""

import hashlib
import secrets
from collections import Counter
from collections.abc import Collection
from datetime import timedelta
from enum import Enum
from typing import Any

from sqlalchemy import ColumnElement, CursorResult, delete, exists, func, insert, select, update

from petportal.clock import now
from petportal.data.models import BulkImport, ImportRow, ImportState, RowReason, TicketState, User
from petportal.data.payloads import InvalidRow, RowReasonPayload, decode, encode
from petportal.data.unit_of_work import updated_one
from petportal.extensions import db
from petportal.imports.files import Row

# A preview nobody started is deleted after this long (clear_expired_previews).
PREVIEW_LIFETIME = timedelta(days=1)
RECENT = 20
# A runner may take over an import in these states; the others wait for staff.
RUNNABLE = (ImportState.QUEUED, ImportState.RUNNING)
# Sending has stopped: the runner paused (store unavailable, key refused), stopped (a switch) or finished.
STOPPED = (ImportState.PAUSED, ImportState.STOPPED, ImportState.DONE)
STARTABLE = (ImportState.PREVIEW, ImportState.PAUSED, ImportState.STOPPED)
FAILED_STATES = (TicketState.INVALID, TicketState.REFUSED)


def create(
    user: User, environment_name: str, filename: str, raw: bytes, rows: list[Row], source: str | None = None
) -> BulkImport:
    """Store a checked file as a preview; nothing is sent. `source`: the environment a promotion's rows come from."""
    clear_expired_previews()
    batch = BulkImport(
        id=secrets.token_urlsafe(16),
        user_id=user.id,
        username=user.username,
        environment=environment_name,
        filename=filename[:255],
        digest=hashlib.sha256(raw).hexdigest(),
        total=len(rows),
        state=ImportState.PREVIEW,
        source=source,
    )
    db.session.add(batch)
    db.session.flush()
    updated_at = now()
    db.session.execute(
        insert(ImportRow),
        [
            {
                "import_id": batch.id,
                "position": position,
                "line": row.line,
                "name": row.name,
                "category": row.category,
                "category_id": row.category_id,
                "status": row.status,
                "state": TicketState.INVALID if row.problems or row.left_out else TicketState.ISSUED,
                # Only what the row does not keep: its reasons are worked out again when shown (imports/reasons.py).
                "reason": encode(row.left_out or InvalidRow(values=row.values, columns=row.columns))
                if row.left_out or row.problems
                else None,
                "source_id": row.source_id,
                "updated_at": updated_at,
            }
            for position, row in enumerate(rows, start=1)
        ],
    )
    return batch


class Closed(Enum):
    """Why an import cannot be opened by the person asking (`find`)."""

    MISSING = "missing"  # no such import, or another person's (which is not said)
    OTHER_ENVIRONMENT = "other_environment"  # theirs, or any for an admin, but to an environment they no longer work on


def clear_expired_previews() -> None:
    """Delete every preview nobody started within PREVIEW_LIFETIME, with its rows: none was sent, nothing is lost."""
    expired = select(BulkImport.id).where(
        BulkImport.state == ImportState.PREVIEW, BulkImport.created_at < now() - PREVIEW_LIFETIME
    )
    # The rows first, by hand: SQLite enforces no foreign keys unless told to, so ON DELETE CASCADE is not enough.
    db.session.execute(delete(ImportRow).where(ImportRow.import_id.in_(expired)))
    db.session.execute(
        delete(BulkImport).where(BulkImport.id.in_(expired.scalar_subquery())),
        execution_options={"synchronize_session": False},
    )


def find(import_id: str, user: User) -> BulkImport | Closed:
    """The import `import_id` if `user` may see it (their own, or any for an admin, to an environment they work on),
    else why not (`Closed`). A preview left unstarted for PREVIEW_LIFETIME is gone (and cleared now)."""
    batch = db.session.get(BulkImport, import_id)
    if batch is None or not (batch.user_id == user.id or user.is_admin):
        return Closed.MISSING
    if batch.state == ImportState.PREVIEW and batch.created_at < now() - PREVIEW_LIFETIME:
        db.session.expunge(batch)
        clear_expired_previews()
        return Closed.MISSING
    if not user.works_on(batch.environment):
        return Closed.OTHER_ENVIRONMENT
    return batch


def still_there(import_id: str) -> bool:
    """Whether the import still exists (another request may have discarded it since it was read)."""
    return db.session.scalar(select(BulkImport.id).where(BulkImport.id == import_id)) is not None


def recent(user: User) -> list[BulkImport]:
    """This account's latest imports to the environments it works on, newest first (expired previews cleared)."""
    clear_expired_previews()
    query = (
        select(BulkImport)
        .where(
            BulkImport.user_id == user.id,
            BulkImport.environment.in_(sorted(user.environments)),
            BulkImport.kept.is_(False),  # an animal kept by the add form is shown in Your additions
        )
        .order_by(BulkImport.created_at.desc())
    )
    return list(db.session.scalars(query.limit(RECENT)))


def earlier_import(batch: BulkImport) -> BulkImport | None:
    """A started import of the same file by the same account to the same environment (a promotion has its ledger)."""
    if batch.source is not None:
        return None
    query = select(BulkImport).where(
        BulkImport.digest == batch.digest,
        BulkImport.user_id == batch.user_id,
        BulkImport.environment == batch.environment,
        BulkImport.state != ImportState.PREVIEW,
        BulkImport.id != batch.id,
    )
    return db.session.scalars(query.order_by(BulkImport.created_at.desc()).limit(1)).first()


def counts(import_id: str) -> Counter[str]:
    """How many rows are in each state."""
    query = select(ImportRow.state, func.count()).where(ImportRow.import_id == import_id).group_by(ImportRow.state)
    return Counter({state: number for state, number in db.session.execute(query).all()})


def progress(batch: BulkImport, found: Counter[str] | None = None) -> dict[str, object]:
    """What /animals/import/<id>.json answers: the import's state and counts (`found`: already read by `counts`)."""
    found = counts(batch.id) if found is None else found
    return {
        "state": batch.state,
        "total": batch.total,
        "created": found[TicketState.CREATED],
        "failed": sum(found[state] for state in FAILED_STATES),
        "unknown": found[TicketState.UNKNOWN],
    }


def start(batch: BulkImport, active_name: str | None, chosen: Collection[int] = ()) -> bool:
    """Queue the import's unsent rows (and, at the first start, the copies at positions `chosen`), bound to its
    environment while `active_name` stays active (None: a promotion); False when another tab or process came first."""
    values = {
        "state": ImportState.QUEUED,
        "reason": None,
        "active_at_start": active_name,
        "started_at": func.coalesce(BulkImport.started_at, now()),
    }
    # From the preview first: that UPDATE holds the import, so the chosen copies join only the start that wins.
    changed = change(batch.id, BulkImport.state == ImportState.PREVIEW, **values)
    if changed:
        _add_chosen_copies(batch.id, chosen)
    else:
        changed = change(batch.id, BulkImport.state.in_(STARTABLE), **values)
    if changed:
        db.session.refresh(batch)  # only then: the loser of a race with a discard finds no row to refresh
    return changed


def copies(import_id: str) -> list[int]:
    """The positions of the rows left out as copies of animals the store lists (RowReason.DUPLICATE), not sent."""
    query = select(ImportRow.position, ImportRow.reason).where(
        ImportRow.import_id == import_id, ImportRow.state == TicketState.INVALID
    )
    found = ((position, decode(RowReasonPayload, reason)) for position, reason in db.session.execute(query))
    return [position for position, reason in found if reason is not None and reason.code == RowReason.DUPLICATE]


def sendable(import_id: str) -> int:
    """How many of the import's rows a start would send as they stand (the copies not chosen are not)."""
    query = select(func.count()).where(ImportRow.import_id == import_id, ImportRow.state == TicketState.ISSUED)
    return db.session.scalar(query) or 0


def _add_chosen_copies(import_id: str, chosen: Collection[int]) -> None:
    """Queue the rows at the positions `chosen` that were left out as copies: the person chose to add them anyway."""
    positions = sorted(set(copies(import_id)) & set(chosen))
    if positions:
        db.session.execute(
            update(ImportRow)
            .where(
                ImportRow.import_id == import_id,
                ImportRow.position.in_(positions),
                ImportRow.state == TicketState.INVALID,
            )
            .values(state=TicketState.ISSUED, reason=None, updated_at=now()),
            execution_options={"synchronize_session": False},
        )


def retry_refused(batch: BulkImport, active_name: str | None) -> int:
    """Queue again the rows the store refused, once the import has stopped sending; how many."""
    stopped = exists().where(BulkImport.id == batch.id, BulkImport.state.in_(STOPPED))
    result: CursorResult[Any] = db.session.execute(  # type: ignore[assignment]  # an UPDATE's result has a rowcount
        update(ImportRow)
        .where(ImportRow.import_id == batch.id, ImportRow.state == TicketState.REFUSED, stopped)
        .values(state=TicketState.ISSUED, reason=None, updated_at=now()),
        execution_options={"synchronize_session": False},
    )
    if not result.rowcount:
        return 0
    queued = {"state": ImportState.QUEUED, "reason": None, "active_at_start": active_name, "finished_at": None}
    change(batch.id, BulkImport.state.in_(STOPPED), **queued)
    db.session.refresh(batch)
    return result.rowcount


def discard(batch: BulkImport) -> bool:
    """Delete an import that was never started, with its rows; False once it was started (or already gone)."""
    if updated_one(delete(BulkImport).where(BulkImport.id == batch.id, BulkImport.state == ImportState.PREVIEW)):
        db.session.execute(delete(ImportRow).where(ImportRow.import_id == batch.id))
        return True
    if still_there(batch.id):
        db.session.refresh(batch)  # started by another request: show it as it is now
    return False


def needs_runner(batch: BulkImport) -> bool:
    """Whether the import waits to be sent and no runner holds it (none took it yet, or its runner died)."""
    return batch.state in RUNNABLE and (batch.lease_until is None or batch.lease_until < now())


def unheld_ids() -> list[str]:
    """Every import that waits to be sent while no live runner holds it: what the engines' watchers pick up."""
    unheld = BulkImport.lease_until.is_(None) | (BulkImport.lease_until < now())
    return list(db.session.scalars(select(BulkImport.id).where(BulkImport.state.in_(RUNNABLE), unheld)))


def change(import_id: str, condition: ColumnElement[bool], **values: object) -> bool:
    """Set the import's columns to `values` where `condition` holds, in one UPDATE; whether it did."""
    return updated_one(update(BulkImport).where(BulkImport.id == import_id, condition).values(**values))
