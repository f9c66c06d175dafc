"""Writing the audit log, and reading it back newest first."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from flask import request
from flask_login import current_user
from sqlalchemy import Row, Select, select

from .extensions import db
from .models import AuditEntry

# How many entries a download reads at a time.
BATCH = 500


def record(
    action: str,
    *,
    actor: str | None = None,
    target: str | None = None,
    environment: str | None = None,
    detail: str = "",
) -> None:
    """Add one audit entry to the current unit of work (see unit_of_work); `target` is the account changed."""
    if actor is None:
        actor = current_user.username if current_user.is_authenticated else "anonymous"
    db.session.add(
        AuditEntry(
            actor=actor[:80],
            action=action,
            target=target,
            environment=environment,
            detail=detail,
            remote_addr=request.remote_addr if request else None,
        )
    )


def newest_first() -> Select[tuple[AuditEntry]]:
    """Every entry, newest first: the order of the audit page and of its download."""
    return select(AuditEntry).order_by(AuditEntry.id.desc())


def read_newest_first() -> Iterator[Row[Any]]:
    """Every entry, newest first, as rows of the entries' columns read BATCH at a time, each batch from where the
    last one ended (by id, so entries added meanwhile are not read twice). Each batch is read on a connection of
    its own, given back before its rows are used: a slow download holds none. The first batch is read by this
    call, so a database that is down fails the request (with the portal's 503 page), not a download begun."""
    return _from(_batch(None))


def _from(batch: Sequence[Row[Any]]) -> Iterator[Row[Any]]:
    while batch:
        yield from batch
        if len(batch) < BATCH:
            return
        batch = _batch(batch[-1].id)


def _batch(before: int | None) -> Sequence[Row[Any]]:
    query = newest_first().with_only_columns(*AuditEntry.__table__.columns).limit(BATCH)
    if before is not None:
        query = query.where(AuditEntry.id < before)
    with db.engine.connect() as connection:
        return connection.execute(query).all()
