"""Endpoints for operators and load balancers: /healthz, /readyz and /metrics."""

from __future__ import annotations

import hmac
import ipaddress

from flask import Blueprint, abort, request

from petportal.config import settings
from petportal.data.database import DatabaseState, database_state
from petportal.petstore import PetStoreError
from petportal.petstore.environments import environments
from petportal.telemetry import metrics

bp = Blueprint("ops", __name__)


@bp.get("/healthz")
def healthz() -> dict[str, str]:
    """200 while the process serves."""
    return {"status": "ok"}


@bp.get("/readyz")
def readyz() -> tuple[dict[str, str | dict[str, str]], int]:
    """200 when the database and the active environment's API answer; else 503 naming what does not (not why)."""
    checks = {"database": str(database_state()), "petstore": "ok"}
    active = environments().active()  # the last known, or the default, while the database is down
    try:
        environments().client(active.name).list_pets(limit=1)
    except PetStoreError:
        # The store's own words are no business of an anonymous caller; /admin/status says more.
        checks["petstore"] = "unavailable"
    checks["environment"] = active.name
    ready = checks["database"] == DatabaseState.OK and checks["petstore"] == "ok"
    return {"status": "ready" if ready else "not ready", "checks": checks}, 200 if ready else 503


@bp.get("/metrics")
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
    return metrics.exposition()
