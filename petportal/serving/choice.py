"""Which environment everyone is served from: the shared active choice, kept in the database, and the switch that
changes it for every user and every process."""

from __future__ import annotations

import logging
import time
from contextlib import nullcontext
from typing import cast

from flask import Flask, current_app, has_app_context

from petportal.config import Environment, settings
from petportal.data.database import cause
from petportal.data.models import Setting
from petportal.data.unit_of_work import after_commit
from petportal.extensions import DATABASE_OUTAGES, db
from petportal.petstore.environments import Environments, Store
from petportal.telemetry import metrics

log = logging.getLogger(__name__)
ACTIVE_SETTING = "active_environment"
# Every process re-reads the shared choice at least this often, so a switch reaches all within 2 s.
ACTIVE_REFRESH_SECONDS = 1.0


class ActiveChoice:
    """One app's active environment, as last chosen by an admin, re-read from the database now and then."""

    def __init__(self, app: Flask, registry: Environments) -> None:
        self._app = app
        self._registry = registry
        self._default: str = settings(app).default_environment
        self._active: tuple[str | None, float] = (None, 0.0)

    def active(self) -> Store:
        """The environment every user is served from, as last chosen by an admin."""
        name, fetched_at = self._active
        if name is None or time.monotonic() - fetched_at > ACTIVE_REFRESH_SECONDS:
            with nullcontext() if has_app_context() else self._app.app_context():  # the page cache asks outside one
                try:
                    row = db.session.get(Setting, ACTIVE_SETTING)
                    name = row.value if row is not None else self._default
                except DATABASE_OUTAGES as error:
                    # Customers keep browsing the last known (or default) environment while the database is down.
                    db.session.rollback()
                    log.error("the portal's database is unavailable: %s", cause(error))
                    name = name or self._default
                self._now_active(name)
        environment = self._registry.get(name)
        if environment is None or not environment.configured:
            return cast(Store, self._registry.get(self._default))
        return environment

    def set_active(self, name: str) -> None:
        """Make `name` the active environment for every user and every process, once the caller's unit of work
        commits."""
        db.session.merge(Setting(key=ACTIVE_SETTING, value=name))
        after_commit(lambda: self._now_active(name))

    def _now_active(self, name: str) -> None:
        self._active = (name, time.monotonic())
        metrics.show_active(Environment, name)


def active_choice() -> ActiveChoice:
    """The current app's active choice."""
    return cast(ActiveChoice, current_app.extensions["petportal.serving.choice"])


def register(app: Flask) -> None:
    """Give `app` its active choice, over the environments `petstore.environments.register` gave it."""
    app.extensions["petportal.serving.choice"] = ActiveChoice(app, app.extensions["petportal.petstore.environments"])
