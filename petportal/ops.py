"""Endpoints for operators and load balancers: /healthz and /readyz."""

from flask import Blueprint
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

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
    """200 when the database and the active environment's API answer; 503 naming what does not, never why."""
    checks = {"database": "ok", "petstore": "ok"}
    try:
        db.session.execute(text("SELECT 1"))
    except SQLAlchemyError:
        db.session.rollback()
        checks["database"] = "unavailable"
    active = environments().active()  # the last known, or the default, while the database is down
    try:
        environments().client(active.name).list_pets(limit=1)
    except PetStoreError:
        # The store's own words are no business of an anonymous caller; /admin/status says more.
        checks["petstore"] = "unavailable"
    checks["environment"] = active.name
    ready = checks["database"] == "ok" and checks["petstore"] == "ok"
    return {"status": "ready" if ready else "not ready", "checks": checks}, 200 if ready else 503
