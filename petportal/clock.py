"""The portal's one clock: every timestamp it stores or compares comes from `now()`."""

from __future__ import annotations

from datetime import UTC, datetime

from flask import current_app, has_app_context


def real_time() -> datetime:
    """The current time, timezone-aware, in UTC: the `CLOCK` setting's default."""
    return datetime.now(UTC)


def now() -> datetime:
    """The current time in UTC, as the app's `CLOCK` setting tells it (a test may set its own clock); the
    real time outside an app."""
    if has_app_context():
        clock = current_app.config["CLOCK"]
        current: datetime = clock()
        return current
    return real_time()
