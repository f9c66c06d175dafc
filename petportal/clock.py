"""The portal's one clock: every timestamp it stores or compares comes from `now()`."""

from datetime import UTC, datetime

from flask import has_app_context

from petportal.config import settings


def now() -> datetime:
    """The current time in UTC: the app's `CLOCK` setting when a test set one, else the real time."""
    chosen = settings().clock if has_app_context() else None
    return chosen() if chosen is not None else datetime.now(UTC)
