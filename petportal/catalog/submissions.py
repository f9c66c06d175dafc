"""At most one animal per rendered add form, across double clicks, refreshes and processes.

Each form carries a one-time token stored in the database. Whoever moves the token from `issued`
to `sending` in one atomic UPDATE is the only request that calls createPet; any repeat waits for
that outcome and lands on the same animal. A call that may have reached the store is never resent.
"""

from __future__ import annotations

import secrets
import time
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import CursorResult, delete, select, update

from ..extensions import db
from ..models import SubmissionToken, utcnow
from ..petstore import InvalidRequest, OutcomeUnknown, Unauthorized, Unavailable

if TYPE_CHECKING:
    from ..serving import Serving

TOKEN_LIFETIME = timedelta(hours=12)
POLL_SECONDS = 0.1


class FormExpired(Exception):
    """The token is unknown, too old, or belongs to someone else."""


class EnvironmentChanged(Exception):
    """The form was opened for another environment than the one now being served."""

    def __init__(self, opened_for: str) -> None:
        super().__init__(opened_for)
        self.opened_for = opened_for


def issue(user_id: int, serving: Serving) -> str:
    """A fresh token for one add form shown to `user_id` for the environment being served."""
    db.session.execute(
        delete(SubmissionToken).where(SubmissionToken.created_at < _oldest_valid()),
        execution_options={"synchronize_session": False},
    )
    token = secrets.token_urlsafe(32)
    db.session.add(SubmissionToken(token=token, user_id=user_id, environment=serving.environment.name))
    db.session.commit()
    return token


def create_once(token: str, user_id: int, serving: Serving, new_pet: dict[str, Any]) -> tuple[int, bool]:
    """Send createPet with `new_pet` at most once for `token`, to the environment being served; return
    (the new animal's id, whether this was a repeat).

    The call gets the client's timeout as its deadline; a repeat waits as long as that call can take
    (connect, read and body) and a margin. Raises what createPet raised, `OutcomeUnknown` when an
    earlier attempt got no answer, `FormExpired` or `EnvironmentChanged`.
    """
    environment = serving.environment.name
    timeout = serving.client.timeout
    wait_until = time.monotonic() + timeout * 3 + 2
    while not _claim(token, user_id, environment):
        pet_id = _wait_for_outcome(token, user_id, environment, wait_until)
        if pet_id is not None:
            return pet_id, True
    try:
        pet = serving.client.create_pet(**new_pet, deadline=time.monotonic() + timeout)
    except OutcomeUnknown:
        _settle(token, "unknown")
        raise
    except (InvalidRequest, Unauthorized, Unavailable):
        # Refused, or never reached the store: nothing was created, so the same form may be sent again.
        _settle(token, "issued")
        raise
    except BaseException:
        _settle(token, "unknown")
        raise
    _settle(token, "created", pet.id)
    return pet.id, False


def _wait_for_outcome(token: str, user_id: int, environment: str, deadline: float) -> int | None:
    """Poll, reading only, until the request holding `token` settles; the animal's id once created.

    Returns None when the token was released (the store refused or was unreachable), so the caller
    may claim it again. Only reads here: a write per poll would starve the holder's own update.
    """
    while True:
        # Plain columns, not an ORM object: an object would reload itself after the commit below and
        # hold a pooled connection through the sleep, and enough waiters could then starve the one
        # request that needs a connection to settle the token.
        row = db.session.execute(
            select(
                SubmissionToken.user_id, SubmissionToken.environment, SubmissionToken.state, SubmissionToken.pet_id
            ).where(SubmissionToken.token == token, SubmissionToken.created_at >= _oldest_valid())
        ).one_or_none()
        db.session.commit()  # end the read at once, and give the connection back to the pool
        if row is None or row.user_id != user_id:
            raise FormExpired()
        if row.environment != environment:
            raise EnvironmentChanged(row.environment)
        if row.state == "created":
            return row.pet_id
        if row.state == "issued":
            return None
        if row.state == "unknown" or time.monotonic() > deadline:
            raise OutcomeUnknown("An earlier submission of this form got no answer from the pet store.")
        time.sleep(POLL_SECONDS)


def _oldest_valid() -> datetime:
    return utcnow() - TOKEN_LIFETIME


def _claim(token: str, user_id: int, environment: str) -> bool:
    result: CursorResult[Any] = db.session.execute(  # type: ignore[assignment]  # an UPDATE's result has a rowcount
        update(SubmissionToken)
        .where(
            SubmissionToken.token == token,
            SubmissionToken.user_id == user_id,
            SubmissionToken.environment == environment,
            SubmissionToken.state == "issued",
            SubmissionToken.created_at >= _oldest_valid(),
        )
        .values(state="sending", updated_at=utcnow()),
        execution_options={"synchronize_session": False},
    )
    db.session.commit()
    return result.rowcount == 1


def _settle(token: str, state: str, pet_id: int | None = None) -> None:
    db.session.rollback()
    db.session.execute(
        update(SubmissionToken)
        .where(SubmissionToken.token == token)
        .values(state=state, pet_id=pet_id, updated_at=utcnow()),
        execution_options={"synchronize_session": False},
    )
    db.session.commit()
