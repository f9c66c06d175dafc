"""Category labels: the names admins give category ids, per environment, since the pet store shows none.

A label may be given per language (German, Spanish); a language without its own shows the default label
(`in_language`). Every page shows the labels in the visitor's language (`labels`).

Each process reads an environment's labels at most once a second (the busiest page would otherwise pay a query for
every render). So a change shows at once in the process that made it and within a second in every other; it also
bumps the environment's page-cache generation, so no cached page shows the old label for longer.
"""

import logging
import time
from collections.abc import Mapping

from flask import current_app
from sqlalchemy import select

from petportal.catalog.browse import folded
from petportal.data import audit
from petportal.data.database import cause
from petportal.data.models import AuditAction, AuditDetail, CategoryLabel
from petportal.data.payloads import AuditDetails, LabelChange
from petportal.data.unit_of_work import after_commit
from petportal.extensions import DATABASE_OUTAGES, db
from petportal.i18n.languages import DEFAULT_LANGUAGE, LANGUAGES, visitor_language
from petportal.web import page_cache

log = logging.getLogger(__name__)
LABEL_MAX_LENGTH = 60
REFRESH_SECONDS = 1.0
_READ = "petportal.category_labels"
# What this process last read, in app.extensions[_READ]: {environment name: (when, {language: {category id: label}})}.
LabelsRead = dict[str, tuple[float, dict[str, dict[int, str]]]]
# The languages whose label has a column of its own (CategoryLabel.label_de, ...); the default label serves the rest.
OWN_LABELS = tuple(code for code in LANGUAGES if code != DEFAULT_LANGUAGE)


def in_language(row: CategoryLabel, language: str) -> str:
    """What `row` reads in `language`: its own label there, else the default label."""
    own: str | None = getattr(row, f"label_{language}", None) if language in OWN_LABELS else None
    return own or row.label


def labels(environment_name: str, language: str | None = None) -> dict[int, str]:
    """{category id: label} for one environment, in `language` (the visitor's by default; shared: do not change
    it). While the database is down, the labels last read, or none: customers keep browsing."""
    known: LabelsRead = current_app.extensions.setdefault(_READ, {})
    read_at, found = known.get(environment_name, (0.0, {}))
    if time.monotonic() - read_at > REFRESH_SECONDS:
        try:
            rows = db.session.scalars(select(CategoryLabel).where(CategoryLabel.environment == environment_name)).all()
            found = {code: {row.category_id: in_language(row, code) for row in rows} for code in LANGUAGES}
        except DATABASE_OUTAGES as error:
            db.session.rollback()
            log.error("the portal's database is unavailable: %s", cause(error))
        known[environment_name] = (time.monotonic(), found)
    return found.get(language or visitor_language(), {})


def choices(environment_name: str) -> list[tuple[int, str]]:
    """(category id, label) in the visitor's language, by label ignoring case, then id: what the add form offers."""
    return sorted(labels(environment_name).items(), key=lambda choice: (folded(choice[1]), choice[0]))


def label_ids(environment_name: str) -> dict[str, int]:
    """{folded label: category id}, in the visitor's language first, then by the default labels (for any file)."""
    named = {folded(label): category_id for category_id, label in labels(environment_name, DEFAULT_LANGUAGE).items()}
    named.update({folded(label): category_id for category_id, label in labels(environment_name).items()})
    return named


def all_labels(environment_name: str) -> list[CategoryLabel]:
    """One environment's labels, in default label order ignoring case, then by id: for the admin page."""
    rows = db.session.scalars(select(CategoryLabel).where(CategoryLabel.environment == environment_name)).all()
    return sorted(rows, key=lambda row: (folded(row.label), row.category_id))


class LabelTaken(ValueError):
    """Another category, `category_id`, already reads `label` in `language` (None: wherever the default serves)."""

    def __init__(self, label: str, category_id: int, language: str | None = None) -> None:
        super().__init__(label, category_id, language)
        self.label, self.category_id, self.language = label, category_id, language


def name(
    environment_name: str,
    category_id: int,
    label: str,
    actor: str | None = None,
    own_labels: Mapping[str, str | None] | None = None,
) -> None:
    """Give `category_id` the label `label` in one environment, and its own label in each language of `own_labels`
    ({"de": ..., "es": ...}; None or "": the default label there), audited (as `actor`, else the request's user).
    Raises LabelTaken when another category there would read the same in some language: people could not tell."""
    own = {code: (own_labels or {}).get(code) or None for code in OWN_LABELS}
    others = [other for other in all_labels(environment_name) if other.category_id != category_id]
    # Against the others' labels in every language: a file is read in its uploader's language, then by the defaults.
    for code in LANGUAGES:
        reads = folded(own.get(code) or label)
        for other in others:
            for there in LANGUAGES:
                if folded(in_language(other, there)) == reads:
                    raise LabelTaken(in_language(other, there), other.category_id, code if own.get(code) else None)
    row = db.session.get(CategoryLabel, (environment_name, category_id))
    if row is None:
        row = CategoryLabel(environment=environment_name, category_id=category_id, label=label, label_key=folded(label))
        db.session.add(row)
    elif row.label == label and all(getattr(row, f"label_{code}") == own[code] for code in OWN_LABELS):
        return
    # The same label, with only a language's own label changed: the entry names it again, not a rename to itself.
    previous = None if row.label == label else row.label
    if previous is not None:
        row.label, row.label_key = label, folded(label)
    for code in OWN_LABELS:
        setattr(row, f"label_{code}", own[code])
    # A second admin giving another category the same label at this moment fails here, on the unique key: 409.
    db.session.flush()
    detail = AuditDetail.CATEGORY_LABELLED if previous is None else AuditDetail.CATEGORY_RENAMED
    labelled = LabelChange(code=detail, category=category_id, label=label, previous=previous)
    _changed(environment_name, AuditAction.CATEGORY_LABELLED, actor, labelled)


def remove(environment_name: str, category_id: int) -> bool:
    """Take the label off `category_id`, audited; False when it had none."""
    row = db.session.get(CategoryLabel, (environment_name, category_id))
    if row is None:
        return False
    db.session.delete(row)
    db.session.flush()
    unlabelled = LabelChange(code=AuditDetail.CATEGORY_UNLABELLED, category=category_id, label=row.label)
    _changed(environment_name, AuditAction.CATEGORY_UNLABELLED, detail=unlabelled)
    return True


def _changed(
    environment_name: str, action: AuditAction, actor: str | None = None, detail: AuditDetails | None = None
) -> None:
    """Audit a label change; once it is committed, forget this process's labels and the cached pages."""
    audit.record(action, actor=actor, target=None, environment=environment_name, detail=detail)
    known: LabelsRead = current_app.extensions.get(_READ, {})

    def forget() -> None:
        known.pop(environment_name, None)
        page_cache.invalidate(environment_name)

    after_commit(forget)
