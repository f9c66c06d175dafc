"""The pet store environments (production, staging): their clients and their health. Which one serves whom is
petportal/serving's."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import cast

from flask import Flask, current_app, g, has_request_context

from petportal.config import Environment, settings
from petportal.petstore import Operation, Outcome, PetStoreClient
from petportal.petstore.bulkhead import Bulkhead
from petportal.telemetry import metrics, tracing


@dataclass(frozen=True)
class Store:
    """What may be shown about an environment's pet store: never its key."""

    name: Environment
    base_url: str | None
    key_configured: bool

    @property
    def configured(self) -> bool:
        return bool(self.base_url)

    @property
    def is_production(self) -> bool:
        return self.name is Environment.PRODUCTION


@dataclass(frozen=True, slots=True)
class DeprecationNotice:
    """The `Deprecation` and `Sunset` headers one operation last answered with."""

    deprecation: str | None
    sunset: str | None


@dataclass
class Health:
    """The portal's view of one environment, kept from its client's answers: is its key accepted, and
    which operations are being retired. The client only reports answers; this record draws conclusions."""

    key_rejected: bool = False
    notices: dict[str, DeprecationNotice] = field(default_factory=dict)

    def record(self, operation: Operation, outcome: Outcome, headers: Mapping[str, str]) -> None:
        """Called by the client with every answer it receives, as `classify` reads it."""
        if "Deprecation" in headers or "Sunset" in headers:
            self.notices[operation] = DeprecationNotice(headers.get("Deprecation"), headers.get("Sunset"))
        if outcome in (Outcome.OK, Outcome.KEY_REJECTED):
            self.key_rejected = outcome is Outcome.KEY_REJECTED


class Environments:
    """One app's configured environments, and a pooled client and a health record for each."""

    def __init__(self, app: Flask) -> None:
        config = settings(app)
        self._settings = config.stores
        # Seconds a page may wait on the pet store, all its calls together.
        self.timeout: float = config.upstream_timeout
        self._pool_size: int = config.upstream_pool_size
        self._tracing = config.logging.tracing
        # The bulkheads: at most this many threads of this process wait on each environment at once. One
        # each, so an admin previewing a hanging staging store never leaves production's customers a 503.
        self._gates: dict[str, Bulkhead] = {name: Bulkhead(config.upstream_concurrency) for name in self._settings}
        # Bulk imports send through clients of their own, so a slow store slows an import, never the pages.
        self._background_gates: dict[str, Bulkhead] = {
            name: Bulkhead(config.import_concurrency) for name in self._settings
        }
        self._clients: dict[tuple[str, bool], PetStoreClient] = {}
        self._health: dict[str, Health] = {name: Health() for name in self._settings}
        self._lock = threading.Lock()

    def all(self) -> list[Store]:
        """Every known environment, configured or not, production first."""
        return [self._environment(name) for name in Environment]

    def get(self, name: object) -> Store | None:
        """The environment called `name`, or None for anything that is not one."""
        return self._environment(name) if isinstance(name, str) and name in self._settings else None

    def _environment(self, name: str) -> Store:
        store = self._settings[Environment(name)]
        return Store(Environment(name), store.url, bool(store.key))

    def health(self, name: str) -> Health:
        """What this process has learnt of environment `name` from its answers."""
        return self._health[name]

    def client(self, name: str, *, background: bool = False) -> PetStoreClient:
        """The pooled client of environment `name`; its key goes to its own URL and nowhere else. `background`: for
        work outside any page (bulk imports), with connections and a bulkhead of its own, never the pages' places."""
        with self._lock:
            if (name, background) not in self._clients:
                store = self._settings[Environment(name)]
                gates = self._background_gates if background else self._gates
                self._clients[(name, background)] = PetStoreClient(
                    store.url or "",
                    store.key or "",
                    timeout=self.timeout,
                    pool_size=gates[name].size if background else self._pool_size,
                    extra_headers=_request_id_header,
                    deadline=self._page_deadline,
                    gate=gates[name],
                    observe=partial(observe_upstream, name),
                    on_answer=self._health[name].record,
                    trace=partial(tracing.pet_store_call, name) if self._tracing else None,
                )
            return self._clients[(name, background)]

    def _page_deadline(self) -> float | None:
        """One deadline per page, shared by all of its pet store calls and their retries."""
        if not has_request_context():
            return None
        if "upstream_deadline" not in g:
            g.upstream_deadline = time.monotonic() + self.timeout
        return cast(float, g.upstream_deadline)

    def close(self) -> None:
        """Close every client's connections."""
        with self._lock:
            for client in self._clients.values():
                client.close()
            self._clients.clear()


def environments() -> Environments:
    """The current app's environments."""
    return cast(Environments, current_app.extensions["petportal.petstore.environments"])


def register(app: Flask) -> None:
    """Give `app` its environments, their clients and their health records."""
    app.extensions["petportal.petstore.environments"] = Environments(app)


def _request_id_header() -> dict[str, str]:
    return {"X-Request-ID": g.request_id} if has_request_context() and "request_id" in g else {}


def observe_upstream(environment: str, operation: Operation, outcome: Outcome, seconds: float, retries: int) -> None:
    """A client's observer (with `environment` bound): each call's time, retries and outcome, in the metrics."""
    metrics.UPSTREAM_SECONDS.labels(environment, operation, outcome).observe(seconds)
    if retries:
        metrics.UPSTREAM_RETRIES.labels(environment, operation).inc(retries)
    if outcome is Outcome.BUSY:
        metrics.UPSTREAM_REFUSED.labels(environment).inc()
