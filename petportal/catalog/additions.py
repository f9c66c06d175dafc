"""What each account added through the portal: its "Your additions" page reads these, not the audit log. Beside
them, the animals it kept for the store's return (catalog/adding.keep_from_form) until each is added."""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select

from petportal.data.models import Addition, BulkImport, ImportRow, Json, TicketState, User
from petportal.data.payloads import RowReasonPayload, StoreRefusal, decode
from petportal.extensions import db
from petportal.petstore import StoreReason
from petportal.petstore.words import store_words

RECENT = 50


def record(user_id: int, environment_name: str, pet_id: int, name: str) -> None:
    """Note one animal `user_id` added, in the caller's unit of work."""
    db.session.add(Addition(user_id=user_id, environment=environment_name, pet_id=pet_id, name=name))


def recent(user: User) -> dict[str, Sequence[Addition]]:
    """{environment name: this account's RECENT latest additions there, newest first}, for each it works on."""
    return {
        environment_name: db.session.scalars(
            select(Addition)
            .where(Addition.user_id == user.id, Addition.environment == environment_name)
            .order_by(Addition.added_at.desc(), Addition.id.desc())
            .limit(RECENT)
        ).all()
        for environment_name in sorted(user.environments)
    }


@dataclass(frozen=True)
class Waiting:
    """An animal kept for the store's return and not added (yet): waiting, refused by the store, or unknown."""

    name: str
    category_id: int | None
    status: str | None
    state: TicketState
    reason: Json | None
    kept_at: datetime

    @property
    def waits(self) -> bool:
        """Whether it is still to be sent (it may be being sent right now)."""
        return self.state in (TicketState.ISSUED, TicketState.SENDING)

    def refusal(self) -> str:
        """Why the store refused it, in the reader's language (its state is `refused`)."""
        reason = decode(RowReasonPayload, self.reason)
        if not isinstance(reason, StoreRefusal):
            return store_words(StoreReason.STATUS)
        return store_words(StoreReason(reason.said or StoreReason.STATUS), reason.message, reason.status)


def waiting(user: User) -> dict[str, list[Waiting]]:
    """{environment name: up to RECENT animals this account kept for the store's return and not added, newest first}."""
    kept = (
        select(
            ImportRow.name,
            ImportRow.category_id,
            ImportRow.status,
            ImportRow.state,
            ImportRow.reason,
            BulkImport.created_at,
        )
        .join(BulkImport, BulkImport.id == ImportRow.import_id)
        .where(BulkImport.kept, BulkImport.user_id == user.id, ImportRow.state != TicketState.CREATED)
        .order_by(BulkImport.created_at.desc())
        .limit(RECENT)
    )
    return {
        name: [Waiting(*row) for row in db.session.execute(kept.where(BulkImport.environment == name))]
        for name in sorted(user.environments)
    }
