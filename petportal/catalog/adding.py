"""The one way an animal is added: claim a ticket, send createPet once, settle one typed outcome.

A ticket is what stands for one animal to add: an add form's submission token, or one row of a bulk
import. Whoever moves it from `issued` to `sending` in one conditional UPDATE is the only caller of
createPet for it. The store's answer, classified by the client (petstore.errors.classify), becomes one
`AddOutcome`, and the ticket is settled to match in the same commit as the animal's records:

| outcome | means | the ticket becomes | sent again? |
|---|---|---|---|
| `Created` | 201 with the new animal | created, with its id | never |
| `Refused` | 400: the store refused the values | refused | only once corrected (form) or retried (import) |
| `Unknown` | any other answer, or none after sending | unknown | never: the store may have added it |
| `NotSent` | never reached the store, or the key was refused | issued | yes |
| `Kept` | the form's animal was kept for the store's return (`keep_from_form`) | kept | by its one-row import |

An animal the form could not send because the store was not answering may be kept (`when_back=1`): its token becomes
`kept` and a one-row import (`BulkImport.kept`) holds it, sent once by the import runner when the store answers again.
The form and the import only present these outcomes. Only this module and the client call `create_pet`.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import time
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from sqlalchemy import delete, select, update
from sqlalchemy.exc import SQLAlchemyError

from petportal.catalog import additions
from petportal.clock import now
from petportal.data import audit
from petportal.data.models import (
    AuditAction,
    AuditDetail,
    BulkImport,
    ImportRow,
    ImportState,
    Promotion,
    RowReason,
    SubmissionToken,
    TicketState,
)
from petportal.data.payloads import AnimalDetails, RowReasonPayload, StoreRefusal, encode
from petportal.data.unit_of_work import after_commit, updated_one
from petportal.extensions import db
from petportal.petstore import (
    InvalidRequest,
    Outcome,
    OutcomeUnknown,
    PetStoreClient,
    StoreReason,
    Unauthorized,
    Unavailable,
)
from petportal.web import page_cache

log = logging.getLogger(__name__)
TOKEN_LIFETIME = timedelta(hours=12)
POLL_SECONDS = 0.1


@dataclass(frozen=True)
class NewAnimal:
    """The values of one animal to add, already checked by the add form's fields."""

    name: str
    category_id: int
    status: str | None


@dataclass(frozen=True)
class Created:
    """The store added the animal. `repeated`: an earlier submission of the same form did."""

    pet_id: int
    repeated: bool = False


@dataclass(frozen=True)
class Refused:
    """The store refused the values (400); nothing was added, for `said` (`message`, `status`: its values)."""

    said: StoreReason
    message: str
    status: int | None


@dataclass(frozen=True)
class Unknown:
    """The call may have reached the store, and no usable answer came back (`reason`): it is never sent again."""

    reason: RowReason = RowReason.NO_ANSWER


@dataclass(frozen=True)
class NotSent:
    """Nothing was added (`reason`: the key was rejected, or the call never reached the store): it may be resent."""

    reason: Outcome


@dataclass(frozen=True)
class Kept:
    """Not sent: the animal is kept as a one-row import, sent once the store answers again (`keep_from_form`)."""


AddOutcome = Created | Refused | Unknown | NotSent | Kept


def send(ticket: Ticket, client: PetStoreClient) -> AddOutcome:
    """Send createPet once for a claimed ticket, then settle it and any new animal's records in one commit."""
    animal, deadline = ticket.animal, time.monotonic() + client.timeout
    try:
        pet = client.create_pet(animal.name, animal.category_id, animal.status, deadline=deadline)
        outcome: AddOutcome = Created(pet.id)
    except InvalidRequest as refused:
        outcome = Refused(refused.reason, refused.message, refused.status)
    except (Unauthorized, Unavailable) as error:  # Busy is one of these
        outcome = NotSent(error.outcome)
    except OutcomeUnknown as error:
        log.warning("createPet on %s: the outcome is unknown: %s", ticket.environment, error)
        outcome = Unknown()
    except BaseException:
        # Whatever failed, the call may have gone out: never send it again.
        db.session.rollback()
        ticket.settle(TicketState.UNKNOWN, None, RowReasonPayload(code=RowReason.NO_ANSWER))
        db.session.commit()
        raise
    try:
        _settle(ticket, outcome)
        db.session.commit()  # the settle step: the ticket's state and the animal's records together
    except SQLAlchemyError as error:
        # The ticket stays `sending`, so nothing sends it again: a repeat waits, then calls it unknown.
        db.session.rollback()
        log.error("createPet on %s gave %s, which the portal could not record: %s", ticket.environment, outcome, error)
        raise NotRecorded(outcome) from error
    return outcome


class NotRecorded(Exception):
    """The store answered, but the portal's database could not record it (the ticket stays `sending`)."""

    def __init__(self, outcome: AddOutcome) -> None:
        super().__init__(outcome)
        self.outcome = outcome


def _settle(ticket: Ticket, outcome: AddOutcome) -> None:
    match outcome:
        case Created(pet_id=pet_id):
            ticket.settle(TicketState.CREATED, pet_id, None)
            additions.record(ticket.user_id, ticket.environment, pet_id, ticket.animal.name)
            _audit(ticket, AuditAction.ANIMAL_ADDED, ADDED_DETAILS, pet_id)
            after_commit(lambda: page_cache.invalidate(ticket.environment))
        case Refused(said=said, message=message, status=status):
            reason = StoreRefusal(code=RowReason.REFUSED, said=said, message=message, status=status)
            ticket.settle(TicketState.REFUSED, None, reason)
        case Unknown(reason=reason):
            ticket.settle(TicketState.UNKNOWN, None, RowReasonPayload(code=reason))
            _audit(ticket, AuditAction.ANIMAL_OUTCOME_UNKNOWN, UNKNOWN_DETAILS)
        case NotSent():
            ticket.settle(TicketState.ISSUED, None, None)


# What an audit entry's details say of an animal, by where it came from: the add form, an import's row, a promotion.
ADDED_DETAILS = (AuditDetail.ANIMAL_ADDED, AuditDetail.ANIMAL_ADDED_BY_IMPORT, AuditDetail.ANIMAL_PROMOTED)
UNKNOWN_DETAILS = (
    AuditDetail.OUTCOME_UNKNOWN,
    AuditDetail.OUTCOME_UNKNOWN_IN_IMPORT,
    AuditDetail.OUTCOME_UNKNOWN_IN_PROMOTION,
)


def _audit(ticket: Ticket, action: AuditAction, codes: tuple[AuditDetail, ...], pet_id: int | None = None) -> None:
    """Audit the ticket's outcome, with the detail code for where it came from (`codes`: form, import, promotion)."""
    form, row, promotion = codes
    detail = AnimalDetails(code=form, name=ticket.animal.name, pet_id=pet_id)
    if isinstance(ticket, RowTicket) and not ticket.kept and ticket.staging_id is not None:
        detail = replace(detail, code=promotion, import_id=ticket.import_id, staging_id=ticket.staging_id)
    elif isinstance(ticket, RowTicket) and not ticket.kept:
        detail = replace(detail, code=row, import_id=ticket.import_id, line=ticket.line)
    audit.record(action, actor=ticket.username, target=None, environment=ticket.environment, detail=detail)


class FormExpired(Exception):
    """The token is unknown, too old, or belongs to someone else."""


class EnvironmentChanged(Exception):
    """The form was opened for another environment than the one now being served."""

    def __init__(self, opened_for: str) -> None:
        super().__init__(opened_for)
        self.opened_for = opened_for


def issue_form_token(user_id: int, environment: str) -> str:
    """A fresh token for one add form shown to `user_id` for `environment` (stored with the request)."""
    db.session.execute(
        delete(SubmissionToken).where(SubmissionToken.created_at < _oldest_valid()),
        execution_options={"synchronize_session": False},
    )
    token = secrets.token_urlsafe(32)
    db.session.add(SubmissionToken(token=token, user_id=user_id, environment=environment))
    return token


@dataclass(frozen=True)
class FormTicket:
    """One submission of an add form: its one-time token, who sends it and to which environment."""

    token: str
    user_id: int
    username: str
    environment: str
    animal: NewAnimal

    def settle(self, state: TicketState, pet_id: int | None, reason: RowReasonPayload | None) -> None:
        """The token's outcome (a form has no reason to keep: the page shows it)."""
        db.session.execute(
            update(SubmissionToken)
            .where(SubmissionToken.token == self.token)
            .values(state=state, pet_id=pet_id, updated_at=now()),
            execution_options={"synchronize_session": False},
        )


def form_sent_before(token: str, user_id: int) -> bool:
    """Whether this form was sent before and not given back (being sent, added, or unknown): a repeat of it is
    answered with that outcome, and is no new animal to check for copies."""
    query = select(SubmissionToken.state).where(SubmissionToken.token == token, SubmissionToken.user_id == user_id)
    state = db.session.scalar(query)
    return state is not None and state not in (TicketState.ISSUED, TicketState.REFUSED)


def add_from_form(ticket: FormTicket, client: PetStoreClient) -> AddOutcome:
    """Add the form's animal at most once for its token; raises `FormExpired` or `EnvironmentChanged`."""
    earlier = _claim_form(ticket, client.timeout)
    return earlier if earlier is not None else send(ticket, client)


def keep_from_form(ticket: FormTicket, timeout: float) -> AddOutcome:
    """Keep the form's animal, at most once for its token, as a one-row import the import runner sends once the store
    answers again (`timeout`: the client's, for how long a repeat of the form waits for the outcome)."""
    earlier = _claim_form(ticket, timeout)
    if earlier is not None:
        return earlier
    animal, kept_at = ticket.animal, now()
    import_id = secrets.token_urlsafe(16)
    try:
        db.session.add(
            BulkImport(
                id=import_id,
                user_id=ticket.user_id,
                username=ticket.username,
                environment=ticket.environment,
                filename="",
                digest=hashlib.sha256(ticket.token.encode()).hexdigest(),
                total=1,
                state=ImportState.QUEUED,
                kept=True,
                started_at=kept_at,
            )
        )
        db.session.flush()
        db.session.add(
            ImportRow(
                import_id=import_id,
                position=1,
                line=1,
                name=animal.name,
                category=str(animal.category_id),
                category_id=animal.category_id,
                status=animal.status,
                state=TicketState.ISSUED,
                updated_at=kept_at,
            )
        )
        ticket.settle(TicketState.KEPT, None, None)
        db.session.commit()  # the keep step: the token and the import that now holds its animal, together
    except SQLAlchemyError:
        db.session.rollback()
        ticket.settle(TicketState.ISSUED, None, None)  # nothing was kept: the form may be sent again
        db.session.commit()
        raise
    return Kept()


def _claim_form(ticket: FormTicket, timeout: float) -> AddOutcome | None:
    """Claim the form's token: None once claimed, else the outcome of the submission holding it. A repeat of a form
    being sent waits as long as that call can take (`timeout` for connect, read and body) and a margin."""
    wait_until = time.monotonic() + timeout * 3 + 2
    while True:
        claimed = updated_one(
            update(SubmissionToken)
            .where(
                SubmissionToken.token == ticket.token,
                SubmissionToken.user_id == ticket.user_id,
                SubmissionToken.environment == ticket.environment,
                # A refused form may be corrected and sent again: the store added nothing.
                SubmissionToken.state.in_((TicketState.ISSUED, TicketState.REFUSED)),
                SubmissionToken.created_at >= _oldest_valid(),
            )
            .values(state=TicketState.SENDING, updated_at=now())
        )
        db.session.commit()  # the claim step: every other request must see the token taken before the call goes out
        if claimed:
            return None
        earlier = _wait_for_outcome(ticket, wait_until)
        if earlier is not None:
            return earlier


def _wait_for_outcome(ticket: FormTicket, deadline: float) -> AddOutcome | None:
    """Poll, reading only, until the request holding the token settles it; None when it was released (nothing
    was added), so the caller may claim it again. A write per poll would starve the holder's own update."""
    while True:
        # Plain columns, not an ORM object: an object would reload itself after the commit below and hold a
        # pooled connection through the sleep, and enough waiters could starve the one request that settles.
        row = db.session.execute(
            select(
                SubmissionToken.user_id, SubmissionToken.environment, SubmissionToken.state, SubmissionToken.pet_id
            ).where(SubmissionToken.token == ticket.token, SubmissionToken.created_at >= _oldest_valid())
        ).one_or_none()
        db.session.commit()  # end the read at once, and give the connection back to the pool
        if row is None or row.user_id != ticket.user_id:
            raise FormExpired()
        if row.environment != ticket.environment:
            raise EnvironmentChanged(row.environment)
        if row.state == TicketState.CREATED:
            return Created(row.pet_id, repeated=True)
        if row.state == TicketState.KEPT:
            return Kept()
        if row.state in (TicketState.ISSUED, TicketState.REFUSED):
            return None
        if row.state == TicketState.UNKNOWN or time.monotonic() > deadline:
            return Unknown()  # an earlier submission of this form got no usable answer
        time.sleep(POLL_SECONDS)


def _oldest_valid() -> datetime:
    return now() - TOKEN_LIFETIME


@dataclass(frozen=True)
class RowTicket:
    """One row of a bulk import, claimed by the runner holding the import's lease (imports/claims.py)."""

    import_id: str
    position: int
    line: int
    user_id: int
    username: str
    environment: str
    animal: NewAnimal
    # A promotion's row: the animal's id on staging, claimed in the ledger (`Promotion`) with the row.
    staging_id: int | None = None
    # The add form's animal, kept for the store's return: audited as the form's own addition.
    kept: bool = False

    def settle(self, state: TicketState, pet_id: int | None, reason: RowReasonPayload | None) -> None:
        """The row's outcome, and its promotion's in the ledger (a row a takeover marked unknown may yet be created)."""
        settled_from = (
            (TicketState.SENDING, TicketState.UNKNOWN) if state == TicketState.CREATED else (TicketState.SENDING,)
        )
        db.session.execute(
            update(ImportRow)
            .where(
                ImportRow.import_id == self.import_id,
                ImportRow.position == self.position,
                ImportRow.state.in_(settled_from),
            )
            .values(state=state, pet_id=pet_id, reason=reason and encode(reason), updated_at=now()),
            execution_options={"synchronize_session": False},
        )
        if self.staging_id is None:
            return
        claim = (
            (Promotion.staging_id == self.staging_id)
            & (Promotion.import_id == self.import_id)
            & Promotion.state.in_(settled_from)
        )
        if state in (TicketState.CREATED, TicketState.UNKNOWN):
            db.session.execute(
                update(Promotion).where(claim).values(state=state, production_id=pet_id),
                execution_options={"synchronize_session": False},
            )
        else:  # refused, or never sent: production has nothing of it, so its claim is given back
            db.session.execute(delete(Promotion).where(claim), execution_options={"synchronize_session": False})


# One animal to add, already claimed (in `sending`) by its caller.
Ticket = FormTicket | RowTicket
