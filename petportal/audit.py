"""Writing the audit log."""

from flask import request
from flask_login import current_user

from .extensions import db
from .models import AuditEntry


def record(
    action: str,
    *,
    actor: str | None = None,
    target: str | None = None,
    environment: str | None = None,
    detail: str = "",
) -> None:
    """Add one audit entry to the current unit of work (see unit_of_work); `target` is the account changed."""
    if actor is None:
        actor = current_user.username if current_user.is_authenticated else "anonymous"
    db.session.add(
        AuditEntry(
            actor=actor[:80],
            action=action,
            target=target,
            environment=environment,
            detail=detail,
            remote_addr=request.remote_addr if request else None,
        )
    )
