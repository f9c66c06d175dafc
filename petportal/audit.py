"""Writing the audit log, and reading it back newest first, filtered.

An entry keeps codes, never words: its action (`AuditAction`), and its details as a code and the values their
words need (`AuditDetail`); admin/audit_log.py puts them into words when they are shown.

The log keeps its meaning under attack: failed and refused attempts are counted on one entry per action, name
and address in a window (`COUNTED`), not written an entry each; a name that comes from outside is bounded; and
the names the log uses for itself (`RESERVED_NAMES`) can never be an account's (`is_reserved`).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any, cast

from flask import request
from flask_login import current_user
from sqlalchemy import CursorResult, Row, Select, func, select, update

from .clock import now
from .extensions import db
from .models import AuditAction, AuditDetail, AuditEntry

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
COUNTED = frozenset(
    {AuditAction.LOGIN_FAILED, AuditAction.LOGIN_LIMITED, AuditAction.MFA_FAILED, AuditAction.MFA_LIMITED}
)
COUNT_WINDOW = timedelta(minutes=15)
# A value of an entry's details: a name, a number, an id (never words, which are chosen when it is shown).
Value = str | int


@dataclass(frozen=True)
class Filter:
    """Which entries the audit page and its download show: each given condition holds (`since` and `until` are
    UTC days, both included)."""

    actor: str | None = None
    action: AuditAction | None = None
    environment: str | None = None
    since: date | None = None
    until: date | None = None


def record(
    action: AuditAction,
    *,
    actor: str | None = None,
    target: str | None = None,
    environment: str | None = None,
    detail: AuditDetail | None = None,
    **values: Value,
) -> None:
    """Add one audit entry to the current unit of work (see unit_of_work); `target` is the account changed, and
    `detail` with its `values` what more it says (see AuditDetail). An attempt of a `COUNTED` action adds one to
    its window's entry instead, when there is one."""
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
            details={"code": detail.value, **values} if detail is not None else None,
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


def _counted(action: AuditAction, actor: str, remote_addr: str | None) -> bool:
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


def matching(chosen: Filter) -> Select[AuditEntry]:
    """The entries `chosen` lets through, newest first: the one query of the audit page and of its download."""
    query = select(AuditEntry).order_by(AuditEntry.id.desc())
    if chosen.actor is not None:
        query = query.where(AuditEntry.actor == chosen.actor)
    if chosen.action is not None:
        query = query.where(AuditEntry.action == chosen.action)
    if chosen.environment is not None:
        query = query.where(AuditEntry.environment == chosen.environment)
    if chosen.since is not None:
        query = query.where(AuditEntry.at >= _midnight(chosen.since))
    if chosen.until is not None and chosen.until < date.max:
        query = query.where(AuditEntry.at < _midnight(chosen.until + timedelta(days=1)))
    return query


def _midnight(day: date) -> datetime:
    return datetime.combine(day, time(), tzinfo=UTC)


def read_newest_first(chosen: Filter) -> Iterator[Row[Any]]:
    """The entries `chosen` lets through, newest first, as rows of the entries' columns read BATCH at a time, each
    batch from where the last one ended (by id, so entries added meanwhile are not read twice). Each batch is read
    on a connection of its own, given back before its rows are used: a slow download holds none. The first batch
    is read by this call, so a database that is down fails the request (with the portal's 503 page), not a
    download begun."""
    return _from(chosen, _batch(chosen, None))


def _from(chosen: Filter, batch: Sequence[Row[Any]]) -> Iterator[Row[Any]]:
    while batch:
        yield from batch
        if len(batch) < BATCH:
            return
        batch = _batch(chosen, batch[-1].id)


def _batch(chosen: Filter, before: int | None) -> Sequence[Row[Any]]:
    query = matching(chosen).with_only_columns(*AuditEntry.__table__.columns).limit(BATCH)
    if before is not None:
        query = query.where(AuditEntry.id < before)
    with db.engine.connect() as connection:
        return connection.execute(query).all()
