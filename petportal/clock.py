"""The portal's one clock: every timestamp it stores or compares comes from `now()`."""

from __future__ import annotations

from datetime import UTC, datetime

from flask import has_app_context


def real_time() -> datetime:
    """The current time, timezone-aware, in UTC: the `CLOCK` setting's default."""
    return datetime.now(UTC)


def now() -> datetime:
    """The current time in UTC, as the app's `CLOCK` setting tells it (a test may set its own clock); the
    real time outside an app."""
    if has_app_context():
        from .config import settings  # config imports this module

        return settings().clock()
    return real_time()
