"""Sending an import's rows: at most one createPet per row, through crashes, restarts and second runners.

Each row is a ticket of the one way an animal is added (catalog/adding.py). A runner holds the import by a lease it
renews every second, and claims each row once (claims.py); once an admin has limited the owner, the import stops.
A runner that takes over an expired lease (its holder died) marks the rows left in `sending` unknown: their call may
have reached the store, so they are never resent. The rows still `issued` are then sent.

Each row's outcome settles it (created, refused, unknown, or not sent). An unknown outcome, a refused key or a store
that cannot be reached pauses the import until staff resume it; a row not sent goes back to `issued`. An animal the
add form kept for the store's return (a one-row import, `BulkImport.kept`) is never paused: it stays queued, and a
runner tries again after KEPT_RETRY_SECONDS (KEPT_KEY_RETRY_SECONDS for a refused key). Each step commits once:
taking the import over, claiming a row, settling it, finishing.

A process that stops (SIGTERM) hands its imports back (`hand_back`): its runners claim no more rows, settle the rows
under way and give their lease up, so another process takes each import at once rather than after the lease runs out.
"""

import logging
import os
import socket
import threading
import time
import uuid
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from datetime import timedelta

from flask import Flask, current_app
from sqlalchemy import update

from petportal.catalog import adding
from petportal.clock import now
from petportal.config import Environment, settings
from petportal.data import audit
from petportal.data.models import (
    AuditAction,
    AuditDetail,
    BulkImport,
    ImportRow,
    ImportState,
    Promotion,
    RowReason,
    StopReason,
    TicketState,
)
from petportal.data.payloads import ImportTally, RowReasonPayload, StopReasonPayload, Switched, encode
from petportal.extensions import db
from petportal.imports.batches import FAILED_STATES, RUNNABLE, change, counts
from petportal.imports.claims import OwnerLimited, claim_next_row, held_by
from petportal.petstore import Outcome
from petportal.petstore.environments import environments
from petportal.serving.choice import active_choice

log = logging.getLogger(__name__)
RENEW_SECONDS = 1.0
# How long an animal kept for the store's return waits between tries while the store is not answering (the engines'
# watchers then pick it up, within `import_watch_seconds`).
KEPT_RETRY_SECONDS = 3.0
KEPT_KEY_RETRY_SECONDS = 60.0


class _Runners:
    """This process's runners under way, and whether the process is stopping."""

    def __init__(self) -> None:
        self.stopping = threading.Event()
        self.count = 0
        self.changed = threading.Condition()

    def __enter__(self) -> None:
        with self.changed:
            self.count += 1

    def __exit__(self, *_exc_info: object) -> None:
        with self.changed:
            self.count -= 1
            self.changed.notify_all()


_RUNNERS = _Runners()


def stopping_now() -> None:
    """This process stops: its runners claim no more rows, settle those under way, give their leases up and take no
    import after. Returns at once (a signal handler may call it)."""
    _RUNNERS.stopping.set()


def hand_back(seconds: float) -> bool:
    """`stopping_now`, then wait `seconds` at most for every runner to have handed back; whether all had."""
    stopping_now()
    with _RUNNERS.changed:
        return _RUNNERS.changed.wait_for(lambda: _RUNNERS.count == 0, timeout=seconds)


def stopping() -> bool:
    """Whether this process's runners are handing their imports back (`hand_back`)."""
    return _RUNNERS.stopping.is_set()


def run(import_id: str) -> None:
    """Send every unsent row of the import, unless another live runner holds it. In an app context."""
    app: Flask = current_app._get_current_object()  # type: ignore[attr-defined]  # the app, for the sending threads
    runner = f"{socket.gethostname()[:40]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    with _RUNNERS:
        if stopping() or not _take_over(import_id, runner, settings(app).import_lease_seconds):
            return
        log.info("bulk import %s: sending, runner %s", import_id, runner)
        try:
            _send_rows(app, import_id, runner)
        finally:
            db.session.rollback()


def _take_over(import_id: str, runner: str, lease: float) -> bool:
    """Hold the import if it waits to be sent and no live runner holds it (none took it yet, or its lease ran out)."""
    taken = change(
        import_id,
        BulkImport.state.in_(RUNNABLE) & (BulkImport.lease_until.is_(None) | (BulkImport.lease_until < now())),
        state=ImportState.RUNNING,
        runner=runner,
        lease_until=now() + timedelta(seconds=lease),
    )
    if taken:
        # Whatever an earlier runner left being sent may have reached the store: never send it again.
        db.session.execute(
            update(ImportRow)
            .where(ImportRow.import_id == import_id, ImportRow.state == TicketState.SENDING)
            .values(
                state=TicketState.UNKNOWN,
                reason=encode(RowReasonPayload(code=RowReason.PORTAL_STOPPED)),
                updated_at=now(),
            ),
            execution_options={"synchronize_session": False},
        )
        db.session.execute(
            update(Promotion)
            .where(Promotion.import_id == import_id, Promotion.state == TicketState.SENDING)
            .values(state=TicketState.UNKNOWN),
            execution_options={"synchronize_session": False},
        )
    db.session.commit()  # the take-over step
    return taken


def _send_rows(app: Flask, import_id: str, runner: str) -> None:
    batch = db.session.get(BulkImport, import_id)
    assert batch is not None
    db.session.expunge(batch)  # kept as read: the loop below commits at every step, for minutes, and never reloads it
    db.session.commit()  # end the read
    lease = settings(app).import_lease_seconds
    concurrency = settings(app).import_concurrency
    # The places of this process's imports to this environment: never more calls than its import client has.
    places = _places(app, batch.environment)
    in_flight: set[Future[adding.AddOutcome]] = set()
    pause: StopReason | None = None
    stop: StopReasonPayload | None = None
    all_claimed = handing_back = False
    renewed_at = time.monotonic()  # _take_over has just set the lease
    with ThreadPoolExecutor(concurrency, thread_name_prefix="import") as pool:
        while True:
            if time.monotonic() - renewed_at >= RENEW_SECONDS:
                renewed = change(import_id, held_by(runner), lease_until=now() + timedelta(seconds=lease))
                db.session.commit()  # the renewal step
                if not renewed:
                    log.warning("bulk import %s: runner %s lost its lease; another runner goes on", import_id, runner)
                    break
                renewed_at = time.monotonic()
            active = active_choice().active().name
            if stop is None and batch.active_at_start is not None and active != batch.active_at_start:
                stop = Switched(previous=Environment(batch.active_at_start), active=active)
            handing_back = handing_back or stopping()
            while not (all_claimed or handing_back) and pause is None and stop is None and len(in_flight) < concurrency:
                if not places.acquire(timeout=0 if in_flight else RENEW_SECONDS):
                    break  # another import of this process has the places; wait for one
                try:
                    ticket = claim_next_row(batch, runner)
                except OwnerLimited:
                    places.release()
                    stop = StopReasonPayload(code=StopReason.LIMITED)
                    break
                if ticket is None:
                    places.release()
                    all_claimed = True
                    break
                future = pool.submit(_send_one, app, ticket)
                future.add_done_callback(lambda _: places.release())
                in_flight.add(future)
            if not in_flight and (all_claimed or handing_back or pause is not None or stop is not None):
                break
            if not in_flight:
                continue
            finished, in_flight = wait(in_flight, timeout=RENEW_SECONDS, return_when=FIRST_COMPLETED)
            for future in finished:
                pause = pause or _pause_for(future.result())
    if handing_back and pause is None and stop is None and not all_claimed:
        # Handed back, its rows under way settled: queued again, held by no one, for another runner now.
        if change(batch.id, held_by(runner), state=ImportState.QUEUED, runner=None, lease_until=None):
            log.info("bulk import %s: handed back as this process stops; another runner goes on with it", batch.id)
        db.session.commit()  # the handing-back step
    else:
        _finish(batch, runner, pause, stop)


_PLACES_LOCK = threading.Lock()


def _places(app: Flask, environment: str) -> threading.BoundedSemaphore:
    with _PLACES_LOCK:
        places: dict[str, threading.BoundedSemaphore] = app.extensions.setdefault("petportal.import_places", {})
        return places.setdefault(environment, threading.BoundedSemaphore(settings(app).import_concurrency))


def _finish(batch: BulkImport, runner: str, pause: StopReason | None, stop: StopReasonPayload | None) -> None:
    if (pause is not None or stop is not None) and not counts(batch.id)[TicketState.ISSUED]:
        pause = stop = None  # nothing is left to send: the import is done, its unknown rows listed
    state, again_at = ImportState.DONE, None
    if pause is not None:  # a pause outweighs a stop
        state, stop = ImportState.PAUSED, StopReasonPayload(code=pause)
    elif stop is not None:
        state = ImportState.STOPPED
    if pause is not None and batch.kept:
        # An animal kept for the store's return waits for it, queued: a runner tries again after a moment (a refused
        # key waits longer, for an operator to fix it). Nobody resumes it by hand: it is in no list of imports.
        wait = KEPT_RETRY_SECONDS if pause is StopReason.UNAVAILABLE else KEPT_KEY_RETRY_SECONDS
        state, again_at = ImportState.QUEUED, now() + timedelta(seconds=wait)
    ended = change(
        batch.id,
        held_by(runner),
        state=state,
        reason=stop and encode(stop),
        runner=None,
        lease_until=again_at,
        finished_at=now() if state == ImportState.DONE else None,
    )
    if ended:
        log.info("bulk import %s: %s", batch.id, state)
    if ended and state == ImportState.DONE and not batch.kept:  # a kept animal's row is audited as the form's
        found = counts(batch.id)
        promotion = batch.source is not None
        audit.record(
            AuditAction.ANIMALS_PROMOTED if promotion else AuditAction.ANIMALS_IMPORTED,
            actor=batch.username,
            environment=batch.environment,
            detail=ImportTally(
                code=AuditDetail.ANIMALS_PROMOTED if promotion else AuditDetail.ANIMALS_IMPORTED,
                import_id=batch.id,
                filename=None if promotion else batch.filename,
                created=found["created"],
                refused=sum(found[name] for name in FAILED_STATES),
                unknown=found["unknown"],
                total=batch.total,
            ),
        )
    db.session.commit()  # the finishing step: the import's end and its audit entry together


def _send_one(app: Flask, ticket: adding.RowTicket) -> adding.AddOutcome:
    """Send one claimed row through the one way an animal is added, with the import's own client."""
    with app.app_context():
        try:
            return adding.send(ticket, environments().client(ticket.environment, background=True))
        except adding.NotRecorded:
            # The row stays `sending`: a runner that takes the import over calls it unknown, never sends it again.
            return adding.Unknown()
        finally:
            db.session.remove()


def _pause_for(outcome: adding.AddOutcome) -> StopReason | None:
    """Why a row's outcome pauses the import (a key refused, a store not answering, an unknown outcome), or None."""
    match outcome:
        case adding.NotSent(reason=Outcome.KEY_REJECTED):
            return StopReason.KEY_REJECTED
        case adding.NotSent():
            return StopReason.UNAVAILABLE
        case adding.Unknown():
            return StopReason.ROW_UNKNOWN
    return None
