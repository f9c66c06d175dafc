"""Login attempts, counted before the password (or the second factor's code) is checked, so a burst cannot slip past.

Three counters for passwords:
- one account from one address: stops guessing from one place without locking the account for others;
- one address, whatever the account: stops one place trying many accounts;
- one account, from anywhere: a higher ceiling, against a flood from many addresses. A browser where the account
  logged in before (its device cookie, devices.py) is counted on its own device's counter instead, so a flood from
  elsewhere never refuses it, and its own failures never fill the account's ceiling.
A successful login gives its attempt back, so only failures use up the limits; so does an attempt refused by a limit,
so a refused flood from one address cannot fill the account's ceiling. Second-factor codes have one counter, per
account from anywhere: whoever has the password is guessing, from as many addresses as they like.

The counts are the instance's, across its workers and processes: in Redis when one is configured (the `limits`
library), else in the database (`LoginCounter`), one INSERT ... ON CONFLICT DO UPDATE ... RETURNING per counter, so two
workers counting at once never both see the last free attempt (PostgreSQL locks the row until the count commits;
SQLite has one writer). The count commits at once, before the password is checked and before the request writes
anything: it is a protocol step of its own (see unit_of_work).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING

from flask import Flask, abort, current_app, request
from sqlalchemy import case, delete, select, update

from petportal.auth.sessions import LOGINS_UNAVAILABLE
from petportal.clock import now
from petportal.config import settings
from petportal.data.database import insert_into
from petportal.data.models import LoginCounter
from petportal.extensions import db

if TYPE_CHECKING:
    from limits import RateLimitItem
    from limits.strategies import FixedWindowRateLimiter

EXTENSION = "petportal.throttle"
# Expired windows deleted by one attempt at most, so no attempt pays for a long quiet spell's leftovers at once.
CLEANUP_BATCH = 100


class Limit(StrEnum):
    """A counter, named as its setting is (lower case): the limit that refused an attempt."""

    ACCOUNT_ADDRESS = "login_limit_per_account_address"
    ADDRESS = "login_limit_per_address"
    ACCOUNT = "login_limit_per_account"
    DEVICE = "login_limit_per_device"
    CODES = "mfa_limit_per_account"


COUNTERS: dict[str, tuple[tuple[Limit, Callable[[str], str]], ...]] = {
    "login": (
        (Limit.ACCOUNT_ADDRESS, lambda account: f"{account}|{_address()}"),
        (Limit.ADDRESS, lambda account: _address()),
        (Limit.ACCOUNT, lambda account: account),
    ),
    "mfa": ((Limit.CODES, lambda account: account),),
}


class Counted:
    """One counter of one attempt: its limit and window (`item`), whom it counts, and the key naming all three."""

    def __init__(self, limit: Limit, item: RateLimitItem, whom: str) -> None:
        self.limit, self.item, self.whom = limit, item, whom
        self.key = item.key_for(limit.value, whom)
        self.window = timedelta(seconds=item.get_expiry())


def register(app: Flask) -> None:
    """Nothing at start-up: a process's first attempt opens Redis's store (`_redis`) and imports `limits` (with its
    Redis client, about 7 MB), so no worker that serves no login pays for the counters."""
    app.extensions[EXTENSION] = None


def attempt(account: str, kind: str = "login", device: str | None = None) -> Limit | None:
    """Count one attempt of `kind` (a password, or "mfa" for a code) for `account`, from `device` when the browser
    has that account's device cookie: None when it may be checked, else the limit used up (the attempt then counted
    nowhere). Without its store (Redis or the database down) nobody logs in: a 503, never a 500."""
    counters = _counters(account, kind, device)
    try:
        if settings().throttle_storage_uri:
            return _count_in_redis(counters)
        return _count_in_database(counters)
    except Exception as error:  # noqa: BLE001 - any failure of the rate-limit store
        db.session.rollback()
        current_app.logger.error("the login rate-limit store is unavailable: %s", type(error).__name__)
        abort(503, str(LOGINS_UNAVAILABLE))


def succeeded(account: str, kind: str = "login", device: str | None = None) -> None:
    """Give back the attempt of a login (or a code) that succeeded; in the database, with the request's own work."""
    _give_back(_counters(account, kind, device), now())


def _counters(account: str, kind: str, device: str | None) -> list[Counted]:
    """Each counter of `kind` for this attempt, the device's in place of the account's; each key names its counter,
    so an account called like an address ("10.0.0.7") never counts against that address."""
    from limits import parse_many

    account = account.strip().lower()[:80]
    chosen = [
        (Limit.DEVICE, f"{account}|{device}") if device and limit == Limit.ACCOUNT else (limit, whom(account))
        for limit, whom in COUNTERS[kind]
    ]
    return [
        Counted(limit, item, whom)
        for limit, whom in chosen
        for item in parse_many(current_app.config[limit.value.upper()])
    ]


def _address() -> str:
    return (request.remote_addr or "-")[:64]


def _count_in_database(counters: Sequence[Counted]) -> Limit | None:
    """Count the attempt on each counter's row, in the order of their keys (so two attempts that share rows
    take them in the same order and never wait for each other in a circle); when one is used up, give every count
    back. Then delete a few windows that have expired, and commit, at once."""
    at = now()
    hits = {counter.key: _hit(counter, at) for counter in sorted(counters, key=lambda counter: counter.key)}
    refused = next((counter.limit for counter in counters if hits[counter.key] > counter.item.amount), None)

    if refused is not None:
        _give_back(counters, at)
    _forget_expired(at)
    # Durable at once: a worker counting next sees this attempt, whatever this request does afterwards.
    db.session.commit()
    return refused


def _hit(counter: Counted, at: datetime) -> int:
    """Add one attempt to `counter`'s row (a new window when it has none, or its window has ended); the hits
    of its window, this one included."""
    new = insert_into(LoginCounter).values(key=counter.key, hits=1, expires_at=at + counter.window)
    ended = LoginCounter.expires_at <= at
    statement = new.on_conflict_do_update(
        index_elements=[LoginCounter.key],
        set_={
            "hits": case((ended, 1), else_=LoginCounter.hits + 1),
            "expires_at": case((ended, new.excluded.expires_at), else_=LoginCounter.expires_at),
        },
    ).returning(LoginCounter.hits)
    return db.session.execute(statement).scalar_one()


def _give_back(counters: Sequence[Counted], at: datetime) -> None:
    """One attempt back to each of `counters`, in Redis or, where its window has not ended at `at`, in the database."""
    if settings().throttle_storage_uri:
        for counter in counters:
            _redis().hit(counter.item, counter.limit.value, counter.whom, cost=-1)
        return
    keys = [counter.key for counter in counters]
    db.session.execute(
        update(LoginCounter)
        .where(LoginCounter.key.in_(keys), LoginCounter.expires_at > at, LoginCounter.hits > 0)
        .values(hits=LoginCounter.hits - 1),
        execution_options={"synchronize_session": False},
    )


def _forget_expired(at: datetime) -> None:
    """Delete windows that have ended. Rows another attempt holds are skipped (PostgreSQL), never waited for."""
    expired = (
        select(LoginCounter.key)
        .where(LoginCounter.expires_at <= at)
        .limit(CLEANUP_BATCH)
        .with_for_update(skip_locked=True)
    )
    db.session.execute(
        delete(LoginCounter).where(LoginCounter.key.in_(expired)), execution_options={"synchronize_session": False}
    )


def _count_in_redis(counters: Sequence[Counted]) -> Limit | None:
    """The counters are taken in order and an attempt refused by one is given back to those before it,
    so attempts already refused from one address never use up the account's own ceiling."""
    strategy = _redis()
    for index, counter in enumerate(counters):
        if not strategy.hit(counter.item, counter.limit.value, counter.whom):
            _give_back(counters[: index + 1], now())
            return counter.limit
    return None


# One store per app and process, however many threads ask for it first at once.
_OPENING = threading.Lock()


def _redis() -> FixedWindowRateLimiter:
    strategy: FixedWindowRateLimiter | None = current_app.extensions[EXTENSION]
    if strategy is None:
        with _OPENING:
            strategy = current_app.extensions[EXTENSION]
            if strategy is None:
                from limits.storage import storage_from_string
                from limits.strategies import FixedWindowRateLimiter

                found = settings()
                assert found.throttle_storage_uri is not None  # counted here only where there is one
                storage = storage_from_string(found.throttle_storage_uri, **found.throttle_storage_options)
                strategy = current_app.extensions[EXTENSION] = FixedWindowRateLimiter(storage)
    return strategy
