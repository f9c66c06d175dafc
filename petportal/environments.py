"""The pet store environments (production, staging) and which one serves the current request."""

import logging
import threading
import time
from dataclasses import dataclass

from flask import current_app, g, has_request_context, session
from flask_login import current_user
from sqlalchemy.exc import SQLAlchemyError

from . import metrics
from .config import ENVIRONMENT_NAMES
from .extensions import db
from .models import Setting
from .petstore import PetStoreClient
from .petstore.bulkhead import Bulkhead

log = logging.getLogger(__name__)
ACTIVE_SETTING = "active_environment"
PREVIEW_SESSION_KEY = "preview_environment"
# Every process re-reads the shared choice at least this often, so a switch reaches all within 2 s.
ACTIVE_REFRESH_SECONDS = 1.0


@dataclass(frozen=True)
class Environment:
    """What may be shown about an environment: never its key."""

    name: str
    base_url: str | None
    key_configured: bool

    @property
    def configured(self):
        return bool(self.base_url)

    @property
    def is_production(self):
        return self.name == "production"


class Environments:
    """One app's configured environments, a pooled client for each, and the shared active choice."""

    def __init__(self, app):
        self._settings = app.config["PETSTORE_ENVIRONMENTS"]
        self._default = app.config["DEFAULT_ENVIRONMENT"]
        self._timeout = app.config["UPSTREAM_TIMEOUT"]
        self._pool_size = app.config["UPSTREAM_POOL_SIZE"]
        # The bulkhead: at most this many threads of this process wait on the pet stores at once.
        self._gate = Bulkhead(app.config["UPSTREAM_CONCURRENCY"])
        self._keys = tuple(settings["key"] for settings in self._settings.values() if settings["key"])
        self._clients = {}
        self._lock = threading.Lock()
        self._active = (None, 0.0)

    @property
    def timeout(self):
        """Seconds a page may wait on the pet store, all its calls together."""
        return self._timeout

    def all(self):
        """Every known environment, configured or not, production first."""
        return [self.get(name) for name in ENVIRONMENT_NAMES]

    def get(self, name):
        """The environment called `name`, or None for a name that is not one."""
        settings = self._settings.get(name)
        if settings is None:
            return None
        return Environment(name, settings["url"], bool(settings["key"]))

    def client(self, name):
        """The pooled client of environment `name`; its key goes to its own URL and nowhere else."""
        with self._lock:
            if name not in self._clients:
                settings = self._settings[name]
                self._clients[name] = PetStoreClient(
                    settings["url"],
                    settings["key"] or "",
                    timeout=self._timeout,
                    pool_size=self._pool_size,
                    extra_headers=_request_id_header,
                    deadline=self._page_deadline,
                    gate=self._gate,
                    secrets=self._keys,
                    observe=metrics.observe_upstream(name),
                )
            return self._clients[name]

    def _page_deadline(self):
        """One deadline per page, shared by all of its pet store calls and their retries."""
        if not has_request_context():
            return None
        if "upstream_deadline" not in g:
            g.upstream_deadline = time.monotonic() + self._timeout
        return g.upstream_deadline

    def active(self):
        """The environment every user is served from, as last chosen by an admin."""
        name, fetched_at = self._active
        if name is None or time.monotonic() - fetched_at > ACTIVE_REFRESH_SECONDS:
            try:
                row = db.session.get(Setting, ACTIVE_SETTING)
                name = row.value if row is not None else self._default
            except SQLAlchemyError as error:
                # Customers keep browsing the last known (or default) environment while the database is down.
                db.session.rollback()
                log.error("the portal's database is unavailable: %s", type(error).__name__)
                name = name or self._default
            self._active = (name, time.monotonic())
            metrics.show_active(ENVIRONMENT_NAMES, name)
        environment = self.get(name)
        if environment is None or not environment.configured:
            return self.get(self._default)
        return environment

    def set_active(self, name):
        """Make `name` the active environment for every user and every process."""
        row = db.session.get(Setting, ACTIVE_SETTING)
        if row is None:
            db.session.add(Setting(key=ACTIVE_SETTING, value=name))
        else:
            row.value = name
        db.session.commit()
        self._active = (name, time.monotonic())
        metrics.show_active(ENVIRONMENT_NAMES, name)

    def close(self):
        """Close every client's connections."""
        with self._lock:
            for client in self._clients.values():
                client.close()
            self._clients.clear()


def environments():
    """The current app's environments."""
    return current_app.extensions["petportal.environments"]


def current_environment():
    """The environment this request is served from: the admin's preview, else the active one."""
    if "environment" not in g:
        registry = environments()
        environment = registry.active()
        preview = registry.get(session.get(PREVIEW_SESSION_KEY))
        if preview is not None and preview.configured and current_user.is_authenticated and current_user.is_admin:
            environment = preview
        g.environment = environment
    return g.environment


def page_context():
    """What every page shows: the environment served, and (for admins) whether its key was rejected."""
    environment = current_environment()
    admin = current_user.is_authenticated and current_user.is_admin
    return {
        "environment": environment,
        "key_rejected": admin and environment.configured and environments().client(environment.name).key_rejected,
    }


def petstore():
    """The client of the environment this request is served from."""
    return environments().client(current_environment().name)


def _request_id_header():
    return {"X-Request-ID": g.request_id} if has_request_context() and "request_id" in g else {}
