"""Bulk imports in the portal's database: made from a checked file, started, discarded, counted.

Every change of state is one conditional UPDATE, so two tabs, two processes or two hosts pressing the
same button change it once. Sending the rows is runner.py's work; starting one is engines.py's.
"""

from __future__ import annotations

import hashlib
import secrets
from collections import Counter
from datetime import timedelta
from typing import Any

from sqlalchemy import CursorResult, delete, func, select, update

from ..extensions import db
from ..models import BulkImport, ImportRow, utcnow
from .files import Row

# A preview nobody started is deleted after this long (with the next upload).
PREVIEW_LIFETIME = timedelta(days=1)
RECENT = 20
# A runner may take over an import in these states; the others wait for staff.
RUNNABLE = ("queued", "running")
# Sending has stopped: the runner paused (store unavailable, key refused), stopped (a switch) or finished.
STOPPED = ("paused", "stopped", "done")
STARTABLE = ("preview", "paused", "stopped")
FAILED_STATES = ("invalid", "refused")


def create(user: Any, environment_name: str, filename: str, raw: bytes, rows: list[Row]) -> BulkImport:
    """Store a checked file as a preview for `user` and `environment_name`; nothing is sent."""
    expired = select(BulkImport.id).where(
        BulkImport.state == "preview", BulkImport.created_at < utcnow() - PREVIEW_LIFETIME
    )
    # The rows first, by hand: SQLite enforces no foreign keys unless told to, so ON DELETE CASCADE is not enough.
    db.session.execute(delete(ImportRow).where(ImportRow.import_id.in_(expired)))
    db.session.execute(
        delete(BulkImport).where(BulkImport.id.in_(expired.scalar_subquery())),
        execution_options={"synchronize_session": False},
    )
    batch = BulkImport(
        id=secrets.token_urlsafe(16),
        user_id=user.id,
        username=user.username,
        environment=environment_name,
        filename=filename[:255],
        digest=hashlib.sha256(raw).hexdigest(),
        total=len(rows),
        state="preview",
    )
    db.session.add(batch)
    db.session.flush()
    now = utcnow()
    db.session.execute(
        ImportRow.__table__.insert(),
        [
            {
                "import_id": batch.id,
                "position": position,
                "line": row.line,
                "name": row.name,
                "category": row.category,
                "category_id": row.category_id,
                "status": row.status,
                "state": "invalid" if row.problems else "issued",
                "message": " ".join(row.problems) or None,
                "updated_at": now,
            }
            for position, row in enumerate(rows, start=1)
        ],
    )
    db.session.commit()
    return batch


def find(import_id: str, user: Any) -> BulkImport | None:
    """The import `import_id` if `user` may see it: their own, or any for an admin."""
    batch = db.session.get(BulkImport, import_id)
    if batch is None or not (batch.user_id == user.id or user.is_admin):
        return None
    return batch


def recent(user_id: int) -> list[BulkImport]:
    """This account's latest imports, newest first."""
    query = select(BulkImport).where(BulkImport.user_id == user_id).order_by(BulkImport.created_at.desc())
    return list(db.session.scalars(query.limit(RECENT)))


def earlier_import(batch: BulkImport) -> BulkImport | None:
    """An import of the same file by the same account to the same environment, already started."""
    query = select(BulkImport).where(
        BulkImport.digest == batch.digest,
        BulkImport.user_id == batch.user_id,
        BulkImport.environment == batch.environment,
        BulkImport.state != "preview",
        BulkImport.id != batch.id,
    )
    return db.session.scalars(query.order_by(BulkImport.created_at.desc()).limit(1)).first()


def rows(batch: BulkImport) -> list[ImportRow]:
    """Every row of the import, in the file's order."""
    query = select(ImportRow).where(ImportRow.import_id == batch.id).order_by(ImportRow.position)
    return list(db.session.scalars(query))


def counts(import_id: str) -> Counter[str]:
    """How many rows are in each state."""
    query = select(ImportRow.state, func.count()).where(ImportRow.import_id == import_id).group_by(ImportRow.state)
    found: Counter[str] = Counter({state: number for state, number in db.session.execute(query).all()})
    db.session.commit()
    return found


def progress(batch: BulkImport, found: Counter[str] | None = None) -> dict[str, Any]:
    """What /animals/import/<id>.json answers: the import's state and its counts so far (`found`, when the
    caller has already read them with `counts`)."""
    found = counts(batch.id) if found is None else found
    return {
        "state": batch.state,
        "total": batch.total,
        "created": found["created"],
        "failed": sum(found[state] for state in FAILED_STATES),
        "unknown": found["unknown"],
    }


def start(batch: BulkImport, active_name: str) -> bool:
    """Queue the import's unsent rows, bound to its environment while `active_name` stays active; False when it
    was already queued, running or done (another tab or process started it first)."""
    changed = change(
        batch.id,
        BulkImport.state.in_(STARTABLE),
        state="queued",
        message=None,
        active_at_start=active_name,
        started_at=func.coalesce(BulkImport.started_at, utcnow()),
    )
    db.session.refresh(batch)
    return changed


def retry_refused(batch: BulkImport, active_name: str) -> int:
    """Queue again the rows the store refused, once the import has stopped sending; how many."""
    queued = change(
        batch.id,
        BulkImport.state.in_(STOPPED),
        commit=False,
        state="queued",
        message=None,
        active_at_start=active_name,
        finished_at=None,
    )
    result: CursorResult[Any] = db.session.execute(  # type: ignore[assignment]  # an UPDATE's result has a rowcount
        update(ImportRow)
        .where(ImportRow.import_id == batch.id, ImportRow.state == "refused")
        .values(state="issued", message=None, updated_at=utcnow()),
        execution_options={"synchronize_session": False},
    )
    if not queued or not result.rowcount:
        db.session.rollback()
        return 0
    db.session.commit()
    db.session.refresh(batch)
    return result.rowcount


def discard(batch: BulkImport) -> bool:
    """Delete an import that was never started, with its rows; False once it was started."""
    result: CursorResult[Any] = db.session.execute(  # type: ignore[assignment]  # an UPDATE's result has a rowcount
        delete(BulkImport).where(BulkImport.id == batch.id, BulkImport.state == "preview"),
        execution_options={"synchronize_session": False},
    )
    if result.rowcount == 1:
        db.session.execute(delete(ImportRow).where(ImportRow.import_id == batch.id))
    db.session.commit()
    return result.rowcount == 1


def needs_runner(batch: BulkImport) -> bool:
    """Whether the import waits to be sent and no runner holds it (none took it yet, or its runner died)."""
    return batch.state in RUNNABLE and (batch.lease_until is None or batch.lease_until < utcnow())


def unheld_ids() -> list[str]:
    """Every import that waits to be sent while no live runner holds it: what the engines' watchers pick up."""
    unheld = BulkImport.lease_until.is_(None) | (BulkImport.lease_until < utcnow())
    found = list(db.session.scalars(select(BulkImport.id).where(BulkImport.state.in_(RUNNABLE), unheld)))
    db.session.commit()
    return found


def change(import_id: str, condition: Any, *, commit: bool = True, **values: Any) -> bool:
    """Set the import's columns to `values` where `condition` holds, in one UPDATE; whether it did."""
    result: CursorResult[Any] = db.session.execute(  # type: ignore[assignment]  # an UPDATE's result has a rowcount
        update(BulkImport).where(BulkImport.id == import_id, condition).values(**values),
        execution_options={"synchronize_session": False},
    )
    if commit:
        db.session.commit()
    return result.rowcount == 1
