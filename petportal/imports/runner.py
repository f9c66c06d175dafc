"""Sending an import's rows: at most one createPet per row, through crashes, restarts and second runners.

Each row goes through the add form's token states. A runner holds the import by a lease it renews every
second, and claims a row (issued -> sending) in one UPDATE that only succeeds while its lease holds.
A runner that takes over an expired lease (its holder died) marks the rows left in `sending` unknown:
their call may have reached the store, so they are never resent. The rows still `issued` are then sent.

The store's answer settles each row: created, refused (400), or unknown (no usable answer). A 401, or a
store that is not answering, puts the row back to `issued` and pauses the import until staff resume it.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from flask import Flask, current_app
from sqlalchemy import CursorResult, exists, select, update

from .. import audit, page_cache
from ..catalog import additions
from ..environments import environments
from ..extensions import db
from ..models import BulkImport, ImportRow, utcnow
from ..petstore import InvalidRequest, OutcomeUnknown, Unauthorized, Unavailable, UnexpectedResponse
from .batches import FAILED_STATES, RUNNABLE, change, counts

log = logging.getLogger(__name__)
RENEW_SECONDS = 1.0
UNKNOWN_AFTER_CRASH = "The portal stopped while this animal was being sent: the pet store may or may not have added it."
UNKNOWN_NO_ANSWER = "The pet store gave no usable answer: it may or may not have added this animal."
PAUSED = {
    "key_rejected": "The pet store refused the portal's key for {environment}. Nothing more was sent.",
    "unavailable": "The pet store of {environment} stopped answering. Nothing more was sent.",
    "no_answer": (
        "The pet store of {environment} gave no usable answer for a row, so nothing more was sent. Check the rows "
        "listed under “Outcome unknown” first."
    ),
}


def run(import_id: str) -> None:
    """Send every unsent row of the import, unless another live runner holds it. In an app context."""
    app: Flask = current_app._get_current_object()  # type: ignore[attr-defined]  # the app, for the sending threads
    runner = f"{socket.gethostname()[:40]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    if not _take_over(import_id, runner, app.config["IMPORT_LEASE_SECONDS"]):
        return
    log.info("bulk import %s: sending, runner %s", import_id, runner)
    try:
        _send_rows(app, import_id, runner)
    finally:
        db.session.rollback()


def _take_over(import_id: str, runner: str, lease: float) -> bool:
    """Hold the import if it waits to be sent and no live runner holds it (none took it yet, or its lease
    ran out: its runner died or stalled); False otherwise. The engines' watchers try again later."""
    taken = change(
        import_id,
        BulkImport.state.in_(RUNNABLE) & (BulkImport.lease_until.is_(None) | (BulkImport.lease_until < utcnow())),
        state="running",
        runner=runner,
        lease_until=utcnow() + timedelta(seconds=lease),
    )
    if taken:
        # Whatever an earlier runner left being sent may have reached the store: never send it again.
        db.session.execute(
            update(ImportRow)
            .where(ImportRow.import_id == import_id, ImportRow.state == "sending")
            .values(state="unknown", message=UNKNOWN_AFTER_CRASH, updated_at=utcnow()),
            execution_options={"synchronize_session": False},
        )
        db.session.commit()
    return taken


@dataclass(frozen=True)
class Sending:
    """What the sending threads need of the import: plain values, never an ORM object of another thread's session."""

    id: str
    environment: str
    active_at_start: str | None
    user_id: int
    username: str
    filename: str
    total: int


def _send_rows(app: Flask, import_id: str, runner: str) -> None:
    found = db.session.get(BulkImport, import_id)
    assert found is not None
    batch = Sending(
        found.id, found.environment, found.active_at_start, found.user_id, found.username, found.filename, found.total
    )
    db.session.commit()
    environment, active_at_start = batch.environment, batch.active_at_start
    lease = app.config["IMPORT_LEASE_SECONDS"]
    concurrency = app.config["IMPORT_CONCURRENCY"]
    # The places of this process's imports to this environment: never more calls than its import client has.
    places = _places(app, environment)
    in_flight: set[Future[str | None]] = set()
    pause: str | None = None
    stop: str | None = None
    all_claimed = False
    created_since_invalidated = False
    renewed_at = time.monotonic()  # _take_over has just set the lease
    with ThreadPoolExecutor(concurrency, thread_name_prefix="import") as pool:
        while True:
            if time.monotonic() - renewed_at >= RENEW_SECONDS:
                if not change(import_id, _held_by(runner), lease_until=utcnow() + timedelta(seconds=lease)):
                    log.warning("bulk import %s: runner %s lost its lease; another runner goes on", import_id, runner)
                    break
                renewed_at = time.monotonic()
            active = environments().active().name
            if stop is None and active_at_start is not None and active != active_at_start:
                stop = (
                    f"The portal switched from {active_at_start} to {active} while this import ran. "
                    f"Nothing more was sent to {environment}."
                )
            while not all_claimed and pause is None and stop is None and len(in_flight) < concurrency:
                if not places.acquire(timeout=0 if in_flight else RENEW_SECONDS):
                    break  # another import of this process has the places; wait for one
                position = _claim_next(import_id, runner)
                if position is None:
                    places.release()
                    all_claimed = True
                    break
                future = pool.submit(_in_app, app, _send_one, batch, position)
                future.add_done_callback(lambda _: places.release())
                in_flight.add(future)
            if not in_flight and (all_claimed or pause is not None or stop is not None):
                break
            if not in_flight:
                continue
            finished, in_flight = wait(in_flight, timeout=RENEW_SECONDS, return_when=FIRST_COMPLETED)
            for future in finished:
                outcome = future.result()
                if outcome == "created":
                    created_since_invalidated = True
                elif outcome in PAUSED and pause is None:
                    pause = outcome
            if created_since_invalidated:
                page_cache.invalidate(environment)
                created_since_invalidated = False
    _finish(batch, runner, pause, stop)


_PLACES_LOCK = threading.Lock()


def _places(app: Flask, environment: str) -> threading.BoundedSemaphore:
    with _PLACES_LOCK:
        places: dict[str, threading.BoundedSemaphore] = app.extensions.setdefault("petportal.import_places", {})
        if environment not in places:
            places[environment] = threading.BoundedSemaphore(app.config["IMPORT_CONCURRENCY"])
        return places[environment]


def _finish(batch: Sending, runner: str, pause: str | None, stop: str | None) -> None:
    if (pause is not None or stop is not None) and not counts(batch.id)["issued"]:
        pause = stop = None  # nothing is left to send: the import is done, its unknown rows listed
    if pause is not None:
        state, message = "paused", PAUSED[pause].format(environment=batch.environment)
    elif stop is not None:
        state, message = "stopped", stop
    else:
        state, message = "done", None
    ended = change(
        batch.id,
        _held_by(runner),
        state=state,
        message=message,
        runner=None,
        lease_until=None,
        finished_at=utcnow() if state == "done" else None,
    )
    if not ended:
        return
    log.info("bulk import %s: %s", batch.id, state)
    if state == "done":
        found = counts(batch.id)
        failed = sum(found[name] for name in FAILED_STATES)
        detail = (
            f"import {batch.id} of {batch.filename!r}: {found['created']} created, {failed} refused, "
            f"{found['unknown']} unknown, of {batch.total} rows"
        )
        audit.record("animals_imported", actor=batch.username, environment=batch.environment, detail=detail)


def _held_by(runner: str) -> Any:
    return (BulkImport.runner == runner) & (BulkImport.lease_until > utcnow())


def _claim_next(import_id: str, runner: str) -> int | None:
    """Move the first unsent row to `sending` for this runner, while its lease holds; that row's position."""
    while True:
        position = db.session.scalar(
            select(ImportRow.position)
            .where(ImportRow.import_id == import_id, ImportRow.state == "issued")
            .order_by(ImportRow.position)
            .limit(1)
        )
        if position is None:
            db.session.commit()
            return None
        lease_holds = exists().where(BulkImport.id == import_id, _held_by(runner))
        result: CursorResult[Any] = db.session.execute(  # type: ignore[assignment]  # an UPDATE's result has a rowcount
            update(ImportRow)
            .where(
                ImportRow.import_id == import_id,
                ImportRow.position == position,
                ImportRow.state == "issued",
                lease_holds,
            )
            .values(state="sending", updated_at=utcnow()),
            execution_options={"synchronize_session": False},
        )
        db.session.commit()
        if result.rowcount == 1:
            return position
        if not db.session.scalar(select(lease_holds)):
            return None


def _in_app(app: Flask, work: Any, *args: Any) -> Any:
    with app.app_context():
        try:
            return work(*args)
        finally:
            db.session.remove()


def _send_one(batch: Sending, position: int) -> str | None:
    """Send one claimed row of `batch` and settle it; what happened: created, refused, unknown, or why to pause."""
    import_id, environment = batch.id, batch.environment
    row = db.session.get(ImportRow, (import_id, position))
    assert row is not None and row.category_id is not None
    name, category_id, status, line = row.name, row.category_id, row.status, row.line
    db.session.commit()
    client = environments().client(environment, background=True)
    try:
        pet = client.create_pet(name, category_id, status, deadline=time.monotonic() + client.timeout)
    except InvalidRequest as refused:
        _settle(import_id, position, "refused", message=f"The pet store refused it: {refused.message}")
        return "refused"
    except Unauthorized:
        _settle(import_id, position, "issued")
        return "key_rejected"
    except (OutcomeUnknown, UnexpectedResponse):
        _settle(import_id, position, "unknown", message=UNKNOWN_NO_ANSWER)
        return "no_answer"
    except Unavailable as error:
        if error.status is not None:
            # An answer the API does not define (503, 429): it may come from a gateway after the store got the
            # call, so the row is never resent on its word.
            _settle(import_id, position, "unknown", message=UNKNOWN_NO_ANSWER)
            return "no_answer"
        # The call never reached the store (refused, no place, no time left): it is sent when the import resumes.
        _settle(import_id, position, "issued")
        return "unavailable"
    except BaseException:
        _settle(import_id, position, "unknown", message=UNKNOWN_NO_ANSWER)
        raise
    _settle(import_id, position, "created", pet_id=pet.id, commit=False)
    additions.record(batch.user_id, environment, pet.id, name)
    detail = f"id {pet.id}: {name} (bulk import {import_id}, line {line})"
    audit.record("animal_added", actor=batch.username, environment=environment, detail=detail)
    return "created"


def _settle(import_id: str, position: int, state: str, *, commit: bool = True, **values: Any) -> None:
    """Record a row's outcome. A row marked unknown by a runner that took over may still learn it was created."""
    db.session.rollback()
    db.session.execute(
        update(ImportRow)
        .where(
            ImportRow.import_id == import_id,
            ImportRow.position == position,
            ImportRow.state.in_(("sending", "unknown") if state == "created" else ("sending",)),
        )
        .values(state=state, updated_at=utcnow(), **values),
        execution_options={"synchronize_session": False},
    )
    if commit:
        db.session.commit()
