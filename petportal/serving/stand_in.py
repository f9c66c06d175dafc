"""The pet store's last good answer to a read, standing in while the store is not answering (RFC 5861's
stale-if-error): the one place that decides when a page may show it.

What is kept is the store's answer (its records), not a page: every visitor, in every language and role, gets it
drawn afresh, and it is read back through the same parsing and key guard as a fresh answer. It is kept per
environment, store address and call (operation and values), in Redis when the portal has one, else in the portal's
database, so every worker and instance can stand in with it; it stands in for at most `PETPORTAL_STALE_SECONDS`
after the store gave it, and only for a failure that says nothing about the answer (`Unavailable`: a timeout, a
refused or reset connection, a 5xx, a 429). `/readyz` asks the store itself and still says it is down.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Generic, TypeVar, cast

from flask import Flask, current_app, g
from sqlalchemy import delete, select
from sqlalchemy.exc import SQLAlchemyError

from petportal.clock import now
from petportal.config import settings
from petportal.data.database import insert_into
from petportal.data.models import JsonValue, LastGoodAnswer
from petportal.extensions import db
from petportal.petstore import Operation, Pet, Unavailable
from petportal.petstore.records import Guard, parse_pet, parse_pets
from petportal.serving.request import Serving

log = logging.getLogger(__name__)
T = TypeVar("T")
REDIS_PREFIX = "petportal:last-good:"
# The same answer is written again at most this often (a fraction of the limit, so its time stays near the truth):
# a list read by every visitor costs a write now and then, not one per page.
REWRITE_FRACTION = 0.1
REWRITE_MAX_SECONDS = 60.0
# How many calls a process remembers writing before it starts again.
REMEMBERED_WRITES = 4096
# Expired rows of the database are deleted on one write in this many.
CLEANUP_EVERY = 200
_EXTENSION = "petportal.serving.stand_in"


@dataclass(frozen=True, slots=True)
class Answer(Generic[T]):
    """A read's answer; `as_of` is None for the store's fresh answer, else the time of its last good answer, which
    stands in because the store is not answering now."""

    value: T
    as_of: datetime | None = None


def list_pets(current: Serving, limit: int, status: str | None) -> Answer[list[Pet]]:
    """listPets on the environment `current` serves, or its last good answer to the same values while the store is
    not answering."""
    return _read(
        current,
        Operation.LIST_PETS,
        {"limit": limit, "status": status},
        lambda: current.client.list_pets(limit=limit, status=status),
        lambda pets: [_record(pet) for pet in pets],
        parse_pets,
    )


def get_pet(current: Serving, pet_id: int) -> Answer[Pet]:
    """getPet on the environment `current` serves, or its last good answer for the same id while the store is not
    answering."""
    return _read(current, Operation.GET_PET, {"id": pet_id}, lambda: current.client.get_pet(pet_id), _record, parse_pet)


def stood_in() -> bool:
    """Whether a last good answer stood in for the store in this request: its page is not kept (page_cache), so
    the store's own answer is shown as soon as it answers again."""
    return bool(g.get("stood_in"))


def answer_key(current: Serving, operation: Operation, values: dict[str, object]) -> str:
    """What one call's answer is kept under: the environment, its store's address (an environment pointed at another
    store never shows the first one's answer), the operation and its values."""
    call = json.dumps([current.client.base_url, operation, values], sort_keys=True)
    return f"{current.environment.name}:{operation}:{hashlib.sha256(call.encode()).hexdigest()}"


def _read(
    current: Serving,
    operation: Operation,
    values: dict[str, object],
    fetch: Callable[[], T],
    records: Callable[[T], JsonValue],
    parse: Callable[[Any, Guard], T],
) -> Answer[T]:
    limit = settings().stale_seconds
    if not limit:
        return Answer(fetch())
    keeper = _keeper(current_app)
    key = answer_key(current, operation, values)
    try:
        value = fetch()
    except Unavailable as error:
        kept = keeper.read(key, now() - timedelta(seconds=limit))
        if kept is None:
            raise
        answered_at, stored = kept
        try:
            # Read as a fresh answer is: its shape checked, every name through this store's key guard.
            value = parse(stored, current.client.quotes_secret)
        except ValueError:  # ShapeError too: an answer kept by an older release, or changed by hand
            raise error from None
        log.warning(
            "%s on %s: the store is not answering (%s); its answer of %s stands in",
            operation,
            current.environment.name,
            error.reason,
            answered_at.isoformat(timespec="seconds"),
        )
        g.stood_in = True
        return Answer(value, answered_at)
    # Its records are made only when it is due to be kept: most pages' fresh answers cost a hash.
    keeper.keep(
        key,
        current.environment.name,
        hash(tuple(value) if isinstance(value, list) else value),
        limit,
        lambda: records(value),
    )
    return Answer(value)


def _record(pet: Pet) -> dict[str, JsonValue]:
    """A pet as the store's own record (what `parse_pet` reads)."""
    record: dict[str, JsonValue] = {"id": pet.id, "name": pet.name, "categoryId": pet.category_id}
    if pet.status is not None:
        record["status"] = pet.status
    return record


class Keeper:
    """Where the last good answers are kept: Redis, else the portal's database. A keeper that cannot be reached costs
    a log line, never a page: the fresh answer is shown all the same, and without a stand-in the store's failure."""

    def __init__(self, app: Flask) -> None:
        self._lock = threading.Lock()
        # key -> (hash of the answer, time.monotonic() it was written): an answer unchanged is not rewritten at once.
        self._written: dict[str, tuple[int, float]] = {}
        self._writes = 0
        self._redis: Any = None
        if redis_url := settings(app).redis_url:
            import redis

            self._redis = redis.Redis.from_url(redis_url, socket_timeout=0.25, socket_connect_timeout=0.25)

    def keep(self, key: str, environment: str, digest: int, limit: float, make: Callable[[], JsonValue]) -> None:
        """Keep the answer to `key` now (`make` makes its records; `digest` is its hash), unless the same answer was
        kept here a moment ago."""
        written = self._written.get(key)
        if written is not None and written[0] == digest:
            if time.monotonic() - written[1] < min(REWRITE_MAX_SECONDS, limit * REWRITE_FRACTION):
                return
        records = make()
        at = now()
        try:
            if self._redis is not None:
                value = json.dumps({"at": at.isoformat(), "records": records})
                self._redis.set(REDIS_PREFIX + key, value, ex=max(1, int(limit) + 1))
            else:
                self._keep_in_database(key, environment, records, at, limit)
        except Exception as error:  # noqa: BLE001 - any failure of Redis or the database
            log.error("the store's answer could not be kept to stand in later: %s", type(error).__name__)
            if isinstance(error, SQLAlchemyError):
                db.session.rollback()  # as categories.labels does: the page goes on, without the database
            return
        with self._lock:
            if len(self._written) >= REMEMBERED_WRITES:
                self._written.clear()
            self._written[key] = (digest, time.monotonic())

    def read(self, key: str, oldest: datetime) -> tuple[datetime, JsonValue] | None:
        """The time and records of the answer kept for `key`, if it was given at `oldest` or later."""
        try:
            if self._redis is not None:
                raw = self._redis.get(REDIS_PREFIX + key)
                if raw is None:
                    return None
                value = json.loads(raw)
                at, records = datetime.fromisoformat(value["at"]), value["records"]
            else:
                row = db.session.execute(
                    select(LastGoodAnswer.answered_at, LastGoodAnswer.records).where(LastGoodAnswer.key == key)
                ).one_or_none()
                if row is None:
                    return None
                at, records = row.answered_at, row.records
        except Exception as error:  # noqa: BLE001 - any failure of Redis or the database, or a value not ours
            log.error("no stand-in for the store's answer could be read: %s", type(error).__name__)
            if isinstance(error, SQLAlchemyError):
                db.session.rollback()
            return None
        return (at, records) if at >= oldest else None

    def _keep_in_database(self, key: str, environment: str, records: JsonValue, at: datetime, limit: float) -> None:
        """An upsert, committed with the request that read the answer (a page's request commits at its end)."""
        new = insert_into(LastGoodAnswer).values(key=key, environment=environment, answered_at=at, records=records)
        db.session.execute(
            new.on_conflict_do_update(
                index_elements=[LastGoodAnswer.key],
                set_={"answered_at": new.excluded.answered_at, "records": new.excluded.records},
            )
        )
        with self._lock:
            self._writes += 1
            cleanup = self._writes % CLEANUP_EVERY == 0
        if cleanup:
            db.session.execute(
                delete(LastGoodAnswer).where(LastGoodAnswer.answered_at < at - timedelta(seconds=limit)),
                execution_options={"synchronize_session": False},
            )


def _keeper(app: Flask) -> Keeper:
    return cast(Keeper, app.extensions[_EXTENSION])


def register(app: Flask) -> None:
    """Give `app` its keeper of the store's last good answers."""
    app.extensions[_EXTENSION] = Keeper(app)
