"""Endpoints for operators and load balancers: /healthz, /readyz and /metrics."""

from __future__ import annotations

import hmac
import ipaddress

from flask import Blueprint, abort, request

from . import metrics
from .commands import DatabaseState, database_state
from .config import settings
from .environments import environments
from .petstore import PetStoreError

bp = Blueprint("ops", __name__)


@bp.get("/healthz")
def healthz() -> dict[str, str]:
    """200 while the process serves."""
    return {"status": "ok"}


@bp.get("/readyz")
def readyz() -> tuple[dict[str, str | dict[str, str]], int]:
    """200 when the database and the active environment's API answer; 503 naming what does not, never why, but
    for a database that answers without the portal's tables ("no tables": `flask --app app init-db` was not run)."""
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
    elif not _from_loopback(request.remote_addr):
        abort(403)
    return metrics.exposition()


def _from_loopback(address: str | None) -> bool:
    """Whether the client's address (as a trusted proxy may have given it: any text) is a loopback address."""
    try:
        return ipaddress.ip_address(address or "").is_loopback
    except ValueError:
        return False
