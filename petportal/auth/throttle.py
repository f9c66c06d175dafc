"""Login attempts, counted before the password (or the second factor's code) is checked, so a burst
cannot slip past the limit.

Three counters for passwords, kept by the `limits` library (Redis when configured, else this process's
memory):
- one account from one address: stops guessing from one place without locking the account for others;
- one address, whatever the account: stops one place trying many accounts;
- one account, from anywhere: a higher ceiling, against a flood from many addresses.
A successful login gives its attempt back, so only failures use up the limits; so does an attempt
refused by a limit, so a refused flood from one address cannot fill the account's ceiling.

Second-factor codes have one counter, per account from anywhere: whoever has the password is
guessing, from as many addresses as they like.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from flask import Flask, abort, current_app, request

from .sessions import LOGINS_UNAVAILABLE

if TYPE_CHECKING:
    from limits import RateLimitItem
    from limits.strategies import FixedWindowRateLimiter

EXTENSION = "petportal.throttle"

COUNTERS: dict[str, tuple[tuple[str, Callable[[str], str]], ...]] = {
    "login": (
        ("LOGIN_LIMIT_PER_ACCOUNT_ADDRESS", lambda account: f"{account}|{request.remote_addr}"),
        ("LOGIN_LIMIT_PER_ADDRESS", lambda account: request.remote_addr or "-"),
        ("LOGIN_LIMIT_PER_ACCOUNT", lambda account: account),
    ),
    "mfa": (("MFA_LIMIT_PER_ACCOUNT", lambda account: account),),
}


def register(app: Flask) -> None:
    """Only the login pages count anything, so no other request pays for the counters: their store is opened by a
    process's first attempt (`_strategy`), and `limits` (with the Redis client it loads, about 7 MB) is imported
    then, not by every worker at start-up."""
    app.extensions[EXTENSION] = None


def attempt(account: str, kind: str = "login") -> bool:
    """Count one attempt of `kind` (a password, or "mfa" for a code) for `account`; False when a limit is used up.

    The counters are taken in order and an attempt refused by one is given back to those before it,
    so attempts already refused from one address never use up the account's own ceiling.
    Without its store (Redis down) nothing can be counted, so nobody logs in: a 503, never a 500.
    """
    counted: list[tuple[RateLimitItem, tuple[str, str]]] = []
    try:
        for item, key in _counters(account, kind):
            if not _strategy().hit(item, *key):
                _strategy().hit(item, *key, cost=-1)
                for earlier, earlier_key in counted:
                    _strategy().hit(earlier, *earlier_key, cost=-1)
                return False
            counted.append((item, key))
    except Exception as error:  # noqa: BLE001 - any failure of the rate-limit store
        current_app.logger.error("the login rate-limit store is unavailable: %s", type(error).__name__)
        abort(503, str(LOGINS_UNAVAILABLE))
    return True


def succeeded(account: str, kind: str = "login") -> None:
    """Give back the attempt of a login (or a code) that succeeded."""
    for item, key in _counters(account, kind):
        _strategy().hit(item, *key, cost=-1)


def _counters(account: str, kind: str) -> Iterator[tuple[RateLimitItem, tuple[str, str]]]:
    """(limit, key) for each counter of `kind`; the key names its counter, so an account called like an
    address ("10.0.0.7") never counts against that address."""
    from limits import parse_many

    account = account.strip().lower()[:80]
    for setting, key in COUNTERS[kind]:
        for item in parse_many(current_app.config[setting]):
            yield item, (setting.lower(), key(account))


# One store per app and process, however many threads ask for it first at once.
_OPENING = threading.Lock()


def _strategy() -> FixedWindowRateLimiter:
    strategy: FixedWindowRateLimiter | None = current_app.extensions[EXTENSION]
    if strategy is None:
        with _OPENING:
            strategy = current_app.extensions[EXTENSION]
            if strategy is None:
                from limits.storage import storage_from_string
                from limits.strategies import FixedWindowRateLimiter

                config = current_app.config
                options = config.get("THROTTLE_STORAGE_OPTIONS", {})
                storage = storage_from_string(config["THROTTLE_STORAGE_URI"], **options)
                strategy = current_app.extensions[EXTENSION] = FixedWindowRateLimiter(storage)
    return strategy
