"""Endpoints for operators and load balancers: /healthz and /readyz."""

from flask import Blueprint
from sqlalchemy import text

from .environments import environments
from .extensions import db
from .petstore import PetStoreError

bp = Blueprint("ops", __name__)


@bp.get("/healthz")
def healthz():
    """200 while the process serves."""
    return {"status": "ok"}


@bp.get("/readyz")
def readyz():
    """200 when the database and the active environment's API answer; 503 naming what does not."""
    checks = {}
    try:
        db.session.execute(text("SELECT 1"))
        checks["database"] = "ok"
        active = environments().active()
    except Exception:  # noqa: BLE001 - any failure of the database means "not ready"
        db.session.rollback()
        checks["database"] = "unavailable"
        active = None
    if active is None:
        checks["petstore"] = "unknown: the database is unavailable"
    else:
        try:
            environments().client(active.name).list_pets(limit=1)
            checks["petstore"] = "ok"
        except PetStoreError:
            # Which part failed, never why: the store's own words are no business of an anonymous caller.
            checks["petstore"] = "unavailable"
        checks["environment"] = active.name
    ready = checks["database"] == "ok" and checks["petstore"] == "ok"
    return {"status": "ready" if ready else "not ready", "checks": checks}, 200 if ready else 503
