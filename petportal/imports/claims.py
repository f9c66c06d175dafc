"""Claiming an import's rows, each once: a row moves from `issued` to `sending` (and a promotion's staging id into
the `promotions` ledger) only while its runner holds the lease and its owner still works on its environments."""

from sqlalchemy import ColumnElement, exists, select, update
from sqlalchemy.exc import IntegrityError

from petportal.catalog import adding
from petportal.clock import now
from petportal.data.models import BulkImport, ImportRow, Promotion, TicketState, User
from petportal.data.payloads import PromotedBefore, encode
from petportal.data.unit_of_work import updated_one
from petportal.extensions import db


class OwnerLimited(Exception):
    """The import's owner is disabled, or no longer works on its environment (or a promotion's source)."""


def claim_next_row(batch: BulkImport, runner: str) -> adding.RowTicket | None:
    """Claim the import's first unsent row for `runner` while its lease holds and its owner is enabled and works on its
    environments (none once an admin's limit commits); None when none is left or the lease is lost, or OwnerLimited."""
    lease_holds = exists().where(BulkImport.id == batch.id, held_by(runner))
    owner_works_on = exists().where(
        User.id == batch.user_id,
        User.enabled,
        User.works_on(batch.environment),
        User.works_on(batch.source or batch.environment),
    )
    while True:
        row = db.session.execute(
            select(
                ImportRow.position,
                ImportRow.line,
                ImportRow.name,
                ImportRow.category_id,
                ImportRow.status,
                ImportRow.source_id,
            )
            .where(ImportRow.import_id == batch.id, ImportRow.state == TicketState.ISSUED)
            .order_by(ImportRow.position)
            .limit(1)
        ).one_or_none()
        if row is None:
            db.session.commit()
            return None
        claimed = updated_one(
            update(ImportRow)
            .where(
                ImportRow.import_id == batch.id,
                ImportRow.position == row.position,
                ImportRow.state == TicketState.ISSUED,
                lease_holds,
                owner_works_on,
            )
            .values(state=TicketState.SENDING, updated_at=now())
        )
        promoted_before = (
            claimed and row.source_id is not None and not _claim_promotion(batch, row.position, row.source_id)
        )
        try:
            db.session.commit()  # the claim step: the row, and a promotion's staging id in the ledger
        except IntegrityError:
            db.session.rollback()  # another promotion claimed the same staging id meanwhile: read the row again
            continue
        if claimed and not promoted_before:
            return adding.RowTicket(
                batch.id,
                row.position,
                row.line,
                batch.user_id,
                batch.username,
                batch.environment,
                adding.NewAnimal(row.name, row.category_id, row.status),
                row.source_id,
                batch.kept,
            )
        if promoted_before:
            continue
        held, works_on = db.session.execute(select(lease_holds, owner_works_on)).one()
        if not held:
            return None
        if not works_on:
            raise OwnerLimited


def _claim_promotion(batch: BulkImport, position: int, staging_id: int) -> bool:
    """Claim `staging_id` in the ledger for this row, in the claim's commit; False when it was promoted before
    (the row is then settled as such, never sent). Two claims at once: the second's commit fails on the key."""
    earlier = db.session.get(Promotion, staging_id)
    if earlier is None:
        db.session.add(
            Promotion(
                staging_id=staging_id,
                import_id=batch.id,
                position=position,
                state=TicketState.SENDING,
                username=batch.username,
            )
        )
        return True
    reason = encode(PromotedBefore(pet_id=earlier.production_id))
    db.session.execute(
        update(ImportRow)
        .where(ImportRow.import_id == batch.id, ImportRow.position == position)
        .values(state=TicketState.INVALID, reason=reason, updated_at=now()),
        execution_options={"synchronize_session": False},
    )
    return False


def held_by(runner: str) -> ColumnElement[bool]:
    """The condition that `runner` still holds the import's lease."""
    return (BulkImport.runner == runner) & (BulkImport.lease_until > now())
