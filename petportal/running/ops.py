"""Endpoints for operators and load balancers: /healthz, /readyz and /metrics."""

from __future__ import annotations

from flask import Blueprint

from petportal.data.database import DatabaseState, probe
from petportal.petstore import PetStoreError
from petportal.petstore.environments import environments
from petportal.serving.choice import active_choice
from petportal.telemetry import metrics

bp = Blueprint("ops", __name__)


@bp.get("/healthz")
def healthz() -> dict[str, str]:
    """200 while the process serves."""
    return {"status": "ok"}


@bp.get("/readyz")
def readyz() -> tuple[dict[str, str | dict[str, str]], int]:
    """200 when the database and the active environment's API answer; else 503 naming what does not (not why)."""
    checks = {"database": str(probe().state), "petstore": "ok"}
    active = active_choice().active()  # the last known, or the default, while the database is down
    try:
        environments().client(active.name).list_pets(limit=1)
    except PetStoreError:
        # The store's own words are no business of an anonymous caller; /admin/status says more.
        checks["petstore"] = "unavailable"
    checks["environment"] = active.name
    ready = checks["database"] == DatabaseState.OK and checks["petstore"] == "ok"
    return {"status": "ready" if ready else "not ready", "checks": checks}, 200 if ready else 503


# The Prometheus page is telemetry's; its route stays here, with the other endpoints for operators.
bp.add_url_rule("/metrics", view_func=metrics.metrics_page, methods=["GET"])
