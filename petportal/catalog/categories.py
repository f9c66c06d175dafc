"""Category labels: the names admins give category ids, per environment, since the pet store shows none.

Each process reads an environment's labels from the database at most once a second (the busiest page
would otherwise pay a query for every render), as it does the active environment. So a change shows
at once in the process that made it and within a second in every other; it also bumps the environment's
page-cache generation, so no cached page shows the old label for longer.
"""

import logging
import time

from flask import current_app
from sqlalchemy import select

from petportal.catalog.browse import folded
from petportal.data import audit
from petportal.data.database import cause
from petportal.data.models import AuditAction, AuditDetail, CategoryLabel
from petportal.data.unit_of_work import after_commit
from petportal.extensions import DATABASE_OUTAGES, db
from petportal.web import page_cache

log = logging.getLogger(__name__)
LABEL_MAX_LENGTH = 60
REFRESH_SECONDS = 1.0
_READ = "petportal.category_labels"
# What this process last read, in app.extensions[_READ]: {environment name: (when, {category id: label})}.
LabelsRead = dict[str, tuple[float, dict[int, str]]]


def labels(environment_name: str) -> dict[int, str]:
    """{category id: label} for one environment (shared: do not change it). While the database is down,
    the labels last read, or none: customers keep browsing."""
    known: LabelsRead = current_app.extensions.setdefault(_READ, {})
    read_at, found = known.get(environment_name, (0.0, {}))
    if time.monotonic() - read_at > REFRESH_SECONDS:
        query = select(CategoryLabel.category_id, CategoryLabel.label)
        try:
            found = dict(db.session.execute(query.where(CategoryLabel.environment == environment_name)).all())
        except DATABASE_OUTAGES as error:
            db.session.rollback()
            log.error("the portal's database is unavailable: %s", cause(error))
        known[environment_name] = (time.monotonic(), found)
    return found


def all_labels(environment_name: str) -> list[CategoryLabel]:
    """One environment's labels, in label order ignoring case, then by id: for the admin page and the add form."""
    rows = db.session.scalars(select(CategoryLabel).where(CategoryLabel.environment == environment_name)).all()
    return sorted(rows, key=lambda row: (folded(row.label), row.category_id))


class LabelTaken(ValueError):
    """Another category of the environment already has this label (ignoring case): `label` names `category_id`."""

    def __init__(self, label: str, category_id: int) -> None:
        super().__init__(label, category_id)
        self.label, self.category_id = label, category_id


def name(environment_name: str, category_id: int, label: str, actor: str | None = None) -> None:
    """Give `category_id` the label `label` in one environment (adding or renaming it), audited (as `actor`, else
    the user of the request). Raises LabelTaken when another category there already reads the same, since people
    could not tell them apart."""
    for other in all_labels(environment_name):
        if other.category_id != category_id and folded(other.label) == folded(label):
            raise LabelTaken(other.label, other.category_id)
    row = db.session.get(CategoryLabel, (environment_name, category_id))
    key = folded(label)
    if row is None:
        db.session.add(CategoryLabel(environment=environment_name, category_id=category_id, label=label, label_key=key))
        detail, previous = AuditDetail.CATEGORY_LABELLED, {}
    elif row.label == label:
        return
    else:
        detail, previous = AuditDetail.CATEGORY_RENAMED, {"previous": row.label}
        row.label, row.label_key = label, key
    # A second admin giving another category the same label at this moment fails here, on the unique key: 409.
    db.session.flush()
    _changed(
        environment_name, AuditAction.CATEGORY_LABELLED, actor, detail, category=category_id, label=label, **previous
    )


def remove(environment_name: str, category_id: int) -> bool:
    """Take the label off `category_id`, audited; False when it had none."""
    row = db.session.get(CategoryLabel, (environment_name, category_id))
    if row is None:
        return False
    db.session.delete(row)
    db.session.flush()
    _changed(
        environment_name,
        AuditAction.CATEGORY_UNLABELLED,
        detail=AuditDetail.CATEGORY_UNLABELLED,
        category=category_id,
        label=row.label,
    )
    return True


def _changed(
    environment_name: str,
    action: AuditAction,
    actor: str | None = None,
    detail: AuditDetail | None = None,
    **values: audit.Value,
) -> None:
    """Audit a label change (see audit.record); once it is committed, forget this process's labels and the cached
    pages."""
    audit.record(action, actor=actor, target=None, environment=environment_name, detail=detail, **values)
    known: LabelsRead = current_app.extensions.get(_READ, {})

    def forget() -> None:
        known.pop(environment_name, None)
        page_cache.invalidate(environment_name)

    after_commit(forget)
