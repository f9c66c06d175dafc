"""Writing the audit log, and reading it back newest first, filtered.

An entry keeps codes, never words (`AuditAction`, `AuditDetail`); admin/audit_log.py words them when shown. Floods
of failed attempts are counted on one entry per window (`COUNTED`), outside names are bounded, and the log's own
names can never be an account's (`is_reserved`)."""

import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Protocol, cast

from flask import request
from flask_login import current_user
from sqlalchemy import ColumnElement, Select, func, or_, select, update

from petportal.clock import now
from petportal.data.models import AuditAction, AuditDetail, AuditEntry, Json
from petportal.data.payloads import AuditDetails, encode
from petportal.data.unit_of_work import updated_one
from petportal.extensions import db

BATCH = 500
# The log's own names for who did something; no account may be called so (`is_reserved`).
ANONYMOUS = "anonymous"
COMMAND_LINE = "command line"
DEMO = "demo"
SYSTEM = "system"
RESERVED_NAMES = frozenset({ANONYMOUS, COMMAND_LINE, DEMO, SYSTEM})
# As long as a user name may be (auth.accounts.USERNAME_MAX_LENGTH).
ACTOR_MAX_LENGTH = 80
# Attempts anyone can make at will: counted on one entry per action, name and address and COUNT_WINDOW.
COUNTED = frozenset(
    {AuditAction.LOGIN_FAILED, AuditAction.LOGIN_LIMITED, AuditAction.MFA_FAILED, AuditAction.MFA_LIMITED}
)
COUNT_WINDOW = timedelta(minutes=15)


class Entry(Protocol):
    """An audit entry as it is read back: the model, or a row of `read_newest_first`."""

    id: int
    at: datetime
    actor: str
    action: AuditAction
    target: str | None
    environment: str | None
    details: Json | None
    remote_addr: str | None
    count: int


@dataclass(frozen=True)
class Filter:
    """Which entries the audit page and its download show (`since` and `until`: UTC days, both included)."""

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
    detail: AuditDetails | AuditDetail | None = None,
) -> None:
    """Add an audit entry (`target`: the account changed; `detail`: payload or bare code), or count a `COUNTED` one."""
    if isinstance(detail, AuditDetail):
        detail = AuditDetails(code=detail)
    if actor is None:
        actor = current_user.username if current_user.is_authenticated else ANONYMOUS
    actor = bounded(actor)
    remote_addr = request.remote_addr[:64] if request and request.remote_addr else None
    if action in COUNTED and _counted(action, actor, remote_addr):
        return
    details = encode(detail) if detail is not None else None
    db.session.add(
        AuditEntry(
            actor=actor, action=action, target=target, environment=environment, details=details, remote_addr=remote_addr
        )
    )


def is_reserved(name: str) -> bool:
    """Whether `name` is one the log uses for itself, whatever its case."""
    return name.strip().casefold() in RESERVED_NAMES


def bounded(name: str) -> str:
    """A name cut to ACTOR_MAX_LENGTH, control, format and line separator characters shown as U+FFFD."""
    return "".join(
        "\ufffd" if unicodedata.category(char) in ("Cc", "Cf", "Cs", "Zl", "Zp") else char
        for char in name[:ACTOR_MAX_LENGTH]
    )


def _counted(action: AuditAction, actor: str, remote_addr: str | None) -> bool:
    """Add one to this action, name and address's newest entry within COUNT_WINDOW; False when there is none."""
    same_address = AuditEntry.remote_addr == remote_addr if remote_addr else AuditEntry.remote_addr.is_(None)
    window = select(func.max(AuditEntry.id)).where(
        AuditEntry.action == action, AuditEntry.actor == actor, same_address, AuditEntry.at > now() - COUNT_WINDOW
    )
    newest = AuditEntry.id == window.scalar_subquery()
    return updated_one(update(AuditEntry).where(newest).values(count=AuditEntry.count + 1))


def matching(chosen: Filter) -> Select[AuditEntry]:
    """The entries `chosen` lets through, newest first: the one query of the audit page and of its download."""
    query = select(AuditEntry).order_by(AuditEntry.id.desc())
    if chosen.actor is not None:
        query = query.where(_names(chosen.actor))
    if chosen.action is not None:
        query = query.where(AuditEntry.action == chosen.action)
    if chosen.environment is not None:
        query = query.where(AuditEntry.environment == chosen.environment)
    if chosen.since is not None:
        query = query.where(AuditEntry.at >= _midnight(chosen.since))
    if chosen.until is not None and chosen.until < date.max:
        query = query.where(AuditEntry.at < _midnight(chosen.until + timedelta(days=1)))
    return query


def _names(part: str) -> ColumnElement[bool]:
    """Entries naming `part` (any case, anywhere): as actor, as target, or as an import's owner (in its details)."""
    return or_(
        AuditEntry.actor.icontains(part, autoescape=True),
        AuditEntry.target.icontains(part, autoescape=True),
        AuditEntry.details["owner"].as_string().icontains(part, autoescape=True),
    )


def _midnight(day: date) -> datetime:
    return datetime.combine(day, time(), tzinfo=UTC)


def read_newest_first(chosen: Filter) -> Iterator[Entry]:
    """The matching rows, BATCH at a time by id, each batch on a connection given back before use (a slow download
    holds none). The first batch is read now, so a database that is down gets the 503 page, not a cut download."""
    return _from(chosen, _batch(chosen, None))


def _from(chosen: Filter, batch: Sequence[Entry]) -> Iterator[Entry]:
    while batch:
        yield from batch
        if len(batch) < BATCH:
            return
        batch = _batch(chosen, batch[-1].id)


def _batch(chosen: Filter, before: int | None) -> Sequence[Entry]:
    query = matching(chosen).with_only_columns(*AuditEntry.__table__.columns).limit(BATCH)
    if before is not None:
        query = query.where(AuditEntry.id < before)
    with db.engine.connect() as connection:
        return cast("Sequence[Entry]", connection.execute(query).all())  # rows of the table's columns
