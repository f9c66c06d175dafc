"""Writing the audit log, reading it back newest first, and naming its actions for people."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from flask import request
from flask.sansio.app import App
from flask_login import current_user
from sqlalchemy import Row, Select, select

from .extensions import db
from .lazy_text import lazy_gettext as _l
from .models import AuditEntry

# How many entries a download reads at a time.
BATCH = 500
# Each action as the audit page names it, in the visitor's language. The log keeps the code (data, in English);
# an action not listed here (one no longer written) is shown as its code reads.
ACTIONS = {
    "login": _l("login"),
    "login_failed": _l("login failed"),
    "login_limited": _l("login limited"),
    "login_refused": _l("login refused"),
    "logout": _l("logout"),
    "mfa_succeeded": _l("mfa succeeded"),
    "mfa_failed": _l("mfa failed"),
    "mfa_limited": _l("mfa limited"),
    "mfa_enrolled": _l("mfa enrolled"),
    "mfa_reset": _l("mfa reset"),
    "recovery_code_used": _l("recovery code used"),
    "passkey_added": _l("passkey added"),
    "passkey_used": _l("passkey used"),
    "passkey_refused": _l("passkey refused"),
    "passkey_removed": _l("passkey removed"),
    "password_changed": _l("password changed"),
    "password_change_failed": _l("password change failed"),
    "password_reset": _l("password reset"),
    "other_sessions_ended": _l("other sessions ended"),
    "sessions_ended": _l("sessions ended"),
    "user_created": _l("user created"),
    "user_disabled": _l("user disabled"),
    "user_enabled": _l("user enabled"),
    "role_changed": _l("role changed"),
    "environment_switched": _l("environment switched"),
    "preview_changed": _l("preview changed"),
    "category_labelled": _l("category labelled"),
    "category_unlabelled": _l("category unlabelled"),
    "animal_added": _l("animal added"),
    "animal_outcome_unknown": _l("animal outcome unknown"),
    "animals_imported": _l("animals imported"),
    "import_started": _l("import started"),
    "import_discarded": _l("import discarded"),
}


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


def newest_first() -> Select[tuple[AuditEntry]]:
    """Every entry, newest first: the order of the audit page and of its download."""
    return select(AuditEntry).order_by(AuditEntry.id.desc())


def read_newest_first() -> Iterator[Row[Any]]:
    """Every entry, newest first, as rows of the entries' columns read BATCH at a time, each batch from where the
    last one ended (by id, so entries added meanwhile are not read twice). Each batch is read on a connection of
    its own, given back before its rows are used: a slow download holds none. The first batch is read by this
    call, so a database that is down fails the request (with the portal's 503 page), not a download begun."""
    return _from(_batch(None))


def _from(batch: Sequence[Row[Any]]) -> Iterator[Row[Any]]:
    while batch:
        yield from batch
        if len(batch) < BATCH:
            return
        batch = _batch(batch[-1].id)


def _batch(before: int | None) -> Sequence[Row[Any]]:
    query = newest_first().with_only_columns(*AuditEntry.__table__.columns).limit(BATCH)
    if before is not None:
        query = query.where(AuditEntry.id < before)
    with db.engine.connect() as connection:
        return connection.execute(query).all()


def action_label(action: str) -> str:
    """An entry's action as the audit page names it, in the request's language."""
    label = ACTIONS.get(action)
    return str(label) if label is not None else action.replace("_", " ")


def register(app: App) -> None:
    """Let the templates name an entry's action: `{{ audit_action(entry.action) }}`."""
    app.jinja_env.globals["audit_action"] = action_label
