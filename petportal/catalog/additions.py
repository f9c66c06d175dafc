"""What each account added through the portal: its "Your additions" page reads these, not the audit log."""

from collections.abc import Sequence

from sqlalchemy import select

from petportal.data.models import Addition, User
from petportal.extensions import db

RECENT = 50


def record(user_id: int, environment_name: str, pet_id: int, name: str) -> None:
    """Note one animal `user_id` added, in the caller's unit of work."""
    db.session.add(Addition(user_id=user_id, environment=environment_name, pet_id=pet_id, name=name))


def recent(user: User) -> dict[str, Sequence[Addition]]:
    """{environment name: this account's RECENT latest additions there, newest first}, for each environment it
    works on."""
    found: dict[str, Sequence[Addition]] = {}
    for environment_name in sorted(user.environments):
        query = (
            select(Addition)
            .where(Addition.user_id == user.id, Addition.environment == environment_name)
            .order_by(Addition.added_at.desc(), Addition.id.desc())
            .limit(RECENT)
        )
        found[environment_name] = db.session.scalars(query).all()
    return found
