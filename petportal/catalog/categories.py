"""Category labels: the names admins give category ids, per environment, since the pet store shows none.

Pages read the labels from the database as they are drawn, so a change reaches every portal process at
once; it also bumps the environment's page-cache generation, so no cached page shows the old label.
"""

from sqlalchemy import select

from .. import audit, page_cache
from ..extensions import db
from ..models import CategoryLabel

LABEL_MAX_LENGTH = 60


def labels(environment_name):
    """{category id: label} for one environment."""
    rows = db.session.execute(
        select(CategoryLabel.category_id, CategoryLabel.label).where(CategoryLabel.environment == environment_name)
    )
    return {category_id: label for category_id, label in rows}


def all_labels(environment_name):
    """One environment's labels, ordered by label then id, for the admin page and the add form."""
    query = select(CategoryLabel).where(CategoryLabel.environment == environment_name)
    return db.session.scalars(query.order_by(CategoryLabel.label, CategoryLabel.category_id)).all()


def name(environment_name, category_id, label):
    """Give `category_id` the label `label` in one environment (adding or renaming it), audited."""
    row = db.session.get(CategoryLabel, (environment_name, category_id))
    if row is None:
        db.session.add(CategoryLabel(environment=environment_name, category_id=category_id, label=label))
        detail = f"category {category_id} labelled {label!r}"
    elif row.label == label:
        return
    else:
        detail = f"category {category_id} renamed from {row.label!r} to {label!r}"
        row.label = label
    db.session.flush()
    _changed(environment_name, "category_labelled", detail)


def remove(environment_name, category_id):
    """Take the label off `category_id`, audited; False when it had none."""
    row = db.session.get(CategoryLabel, (environment_name, category_id))
    if row is None:
        return False
    db.session.delete(row)
    db.session.flush()
    _changed(environment_name, "category_unlabelled", f"category {category_id} was {row.label!r}")
    return True


def _changed(environment_name, action, detail):
    audit.record(action, environment=environment_name, detail=detail)  # commits the change with its entry
    page_cache.invalidate(environment_name)
