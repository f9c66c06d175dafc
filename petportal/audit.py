"""Writing the audit log, reading it back newest first, and naming its actions for people.

The log keeps its meaning under attack: failed and refused attempts are counted on one entry per action, name
and address in a window (`COUNTED`), not written an entry each; a name that comes from outside is bounded; and
the names the log uses for itself (`RESERVED_NAMES`) can never be an account's (`is_reserved`).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator, Sequence
from datetime import timedelta
from typing import Any, cast

from flask import request
from flask.sansio.app import App
from flask_babel import ngettext
from flask_login import current_user
from sqlalchemy import CursorResult, Row, Select, func, select, update

from .clock import now
from .extensions import db
from .lazy_text import lazy_gettext as _l
from .models import AuditEntry

# How many entries a download reads at a time.
BATCH = 500
# The log's own names for who did something: a visitor who is not logged in, the `flask` commands, the demo's
# own set-up, and the portal itself. No account may be called so (`is_reserved`).
ANONYMOUS = "anonymous"
COMMAND_LINE = "command line"
DEMO = "demo"
SYSTEM = "system"
RESERVED_NAMES = frozenset({ANONYMOUS, COMMAND_LINE, DEMO, SYSTEM})
# The longest name an entry keeps: as long as a user name may be (auth.accounts.USERNAME_MAX_LENGTH).
ACTOR_MAX_LENGTH = 80
# Attempts that anyone can make as often as they like: each is counted on the one entry of its action, name and
# address opened within the last COUNT_WINDOW, so a flood of them adds an entry per window, not one per attempt.
COUNTED = frozenset({"login_failed", "login_limited", "mfa_failed", "mfa_limited"})
COUNT_WINDOW = timedelta(minutes=15)
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
    """Add one audit entry to the current unit of work (see unit_of_work); `target` is the account changed. An
    attempt of a `COUNTED` action adds one to its window's entry instead, when there is one."""
    if actor is None:
        actor = current_user.username if current_user.is_authenticated else ANONYMOUS
    actor = bounded(actor)
    remote_addr = request.remote_addr[:64] if request and request.remote_addr else None
    if action in COUNTED and _counted(action, actor, remote_addr):
        return
    db.session.add(
        AuditEntry(
            actor=actor,
            action=action,
            target=target,
            environment=environment,
            detail=detail,
            remote_addr=remote_addr,
        )
    )


def is_reserved(name: str) -> bool:
    """Whether `name` is one the log uses for itself, whatever its case: no account may be called so (the admins'
    form, `flask user create` and single sign-on all ask here)."""
    return name.strip().casefold() in RESERVED_NAMES


def bounded(name: str) -> str:
    """A name as an entry keeps it: at most ACTOR_MAX_LENGTH characters, with any control, format or line
    separator character (a newline, a right-to-left override) shown as U+FFFD, so it reads as it was sent."""
    return "".join(
        "\ufffd" if unicodedata.category(char) in ("Cc", "Cf", "Cs", "Zl", "Zp") else char
        for char in name[:ACTOR_MAX_LENGTH]
    )


def _counted(action: str, actor: str, remote_addr: str | None) -> bool:
    """Add one to the newest entry of this action, name and address opened within COUNT_WINDOW; False when
    there is none. Two workers opening a window at the same moment may open two: a few entries, never a flood."""
    same_address = AuditEntry.remote_addr == remote_addr if remote_addr else AuditEntry.remote_addr.is_(None)
    window = (
        select(func.max(AuditEntry.id))
        .where(
            AuditEntry.action == action, AuditEntry.actor == actor, same_address, AuditEntry.at > now() - COUNT_WINDOW
        )
        .scalar_subquery()
    )
    added = cast(
        "CursorResult[Any]",
        db.session.execute(
            update(AuditEntry).where(AuditEntry.id == window).values(count=AuditEntry.count + 1),
            execution_options={"synchronize_session": False},
        ),
    )
    return added.rowcount == 1


def details(entry: Any) -> str:
    """An entry's details as the audit page and its download show them: with how many attempts it counts."""
    if entry.count <= 1:
        return str(entry.detail)
    attempts = ngettext("%(num)d attempt", "%(num)d attempts", entry.count)
    return f"{entry.detail}; {attempts}" if entry.detail else attempts


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
    """Let the templates name an entry's action and say its details: `{{ audit_action(entry.action) }}`,
    `{{ audit_details(entry) }}`."""
    app.jinja_env.globals["audit_action"] = action_label
    app.jinja_env.globals["audit_details"] = details
