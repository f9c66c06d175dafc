"""What operators watch: Prometheus metrics, summed over every worker (multiprocess mode, PROMETHEUS_MULTIPROC_DIR).

Labels are few and bounded: endpoints, statuses, environments, operations and outcomes; never a name, id or URL.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from flask import Flask, Response, abort, g, request
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)

from petportal.config import settings

KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
REQUESTS = Counter(
    "petportal_requests", "Requests answered, by endpoint, method and status.", ["endpoint", "method", "status"]
)
REQUEST_SECONDS = Histogram(
    "petportal_request_duration_seconds", "Time to answer a request, by endpoint.", ["endpoint"]
)
UPSTREAM_SECONDS = Histogram(
    "petportal_upstream_request_duration_seconds",
    "Pet store calls, retries included, by environment, operation and outcome (petstore.errors.Outcome).",
    ["environment", "operation", "outcome"],
)
UPSTREAM_RETRIES = Counter(
    "petportal_upstream_retries", "Pet store calls sent again after a failure.", ["environment", "operation"]
)
UPSTREAM_REFUSED = Counter(
    "petportal_upstream_busy", "Pages not sent to the pet store because too many already wait on it.", ["environment"]
)
PAGE_CACHE = Counter("petportal_page_cache", "Anonymous pages looked up in the micro-cache, by result.", ["result"])
# Resolved once: looking a label up would be part of every cached page's own work, which is small.
PAGE_CACHE_HITS, PAGE_CACHE_MISSES = PAGE_CACHE.labels("hit"), PAGE_CACHE.labels("miss")
SUBMISSIONS = Counter(
    "petportal_submissions",
    "Add-animal submissions by outcome (created, repeated, refused, unknown, failed, kept).",
    ["outcome"],
)
LOGINS = Counter("petportal_logins", "Login attempts by outcome (success, failure, limited).", ["outcome"])
ACTIVE_ENVIRONMENT = Gauge(
    "petportal_active_environment",
    "1 for the environment every user is served from, 0 for the others.",
    ["environment"],
    multiprocess_mode="livemostrecent",
)


def show_active(names: Iterable[str], active: str) -> None:
    for name in names:
        ACTIVE_ENVIRONMENT.labels(name).set(1 if name == active else 0)


def metrics_page() -> tuple[bytes, dict[str, str]]:
    """Prometheus metrics: with `PETPORTAL_METRICS_TOKEN`, for its bearer only; without it, for loopback only."""
    token = settings().metrics_token
    if token:
        sent = request.headers.get("Authorization", "")
        if not hmac.compare_digest(sent.encode(), f"Bearer {token}".encode()):
            abort(401)
    else:
        try:
            loopback = ipaddress.ip_address(request.remote_addr or "").is_loopback
        except ValueError:  # a trusted proxy may have given any text
            loopback = False
        if not loopback:
            abort(403)
    registry = REGISTRY
    if folder := os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        forget_dead_workers(folder)
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
    return generate_latest(registry), {"Content-Type": CONTENT_TYPE_LATEST}


def forget_dead_workers(folder: str) -> None:
    """Drop the live gauges of workers that are gone (their counters stay); done at reading, under any server."""
    for path in Path(folder).glob("gauge_live*_*.db"):
        pid = path.stem.rpartition("_")[2]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            multiprocess.mark_process_dead(int(pid), folder)
        except PermissionError:
            pass  # it exists, under another user


def register(app: Flask) -> None:
    @app.before_request
    def start_timer() -> None:
        g.metrics_started = time.perf_counter()

    @app.after_request
    def count_request(response: Response) -> Response:
        count(request.endpoint, request.method, response.status_code, g.get("metrics_started"))
        return response


def count(endpoint: str | None, method: str, status: int, started: float | None) -> None:
    """One request answered (`started`: its perf_counter, or None); also called by the page cache."""
    labels = (endpoint or "none", method if method in KNOWN_METHODS else "other", status)
    series = _REQUEST_SERIES.get(labels)
    if series is None:  # the first request of its kind in this process: the label sets are few and bounded
        series = _REQUEST_SERIES[labels] = (
            REQUESTS.labels(labels[0], labels[1], str(status)),
            REQUEST_SECONDS.labels(labels[0]),
        )
    series[0].inc()
    if started is not None:
        series[1].observe(time.perf_counter() - started)


# (endpoint, method, status) -> its request counter and duration histogram, looked up once per process (kept by
# issue 41's bench with the page cache's memos: see page_cache.REMEMBERED_URLS).
_REQUEST_SERIES: dict[tuple[str, str, int], tuple[Any, Any]] = {}
