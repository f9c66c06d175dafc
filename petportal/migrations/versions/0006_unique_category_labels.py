"""Category labels are unique per environment as people compare them (folded), in the database itself.

Two admins naming two categories alike at the same moment could both pass the portal's own check; the
unique key now refuses the second. Labels that already read the same (left by such a race) are kept, the
later ones renamed with their category id.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25
"""

import sqlalchemy as sa
from alembic import op

from petportal.catalog.browse import folded

# revision identifiers, used by Alembic.
revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

LABELS = sa.table(
    "category_labels",
    sa.column("environment", sa.String),
    sa.column("category_id", sa.BigInteger),
    sa.column("label", sa.String),
    sa.column("label_key", sa.String),
)


def upgrade() -> None:
    with op.batch_alter_table("category_labels", schema=None) as batch_op:
        batch_op.add_column(sa.Column("label_key", sa.String(length=240), nullable=True))
    bind = op.get_bind()
    rows = bind.execute(
        sa.select(LABELS.c.environment, LABELS.c.category_id, LABELS.c.label).order_by(
            LABELS.c.environment, LABELS.c.category_id
        )
    ).all()
    taken: set[tuple[str, str]] = set()
    for environment, category_id, found in rows:
        label = found if (environment, folded(found)) not in taken else f"{found[:40]} ({category_id})"
        taken.add((environment, folded(label)))
        bind.execute(
            LABELS.update()
            .where(LABELS.c.environment == environment, LABELS.c.category_id == category_id)
            .values(label=label, label_key=folded(label))
        )
    with op.batch_alter_table("category_labels", schema=None) as batch_op:
        batch_op.alter_column("label_key", existing_type=sa.String(length=240), nullable=False)
        batch_op.create_unique_constraint("uq_category_labels_environment_label_key", ["environment", "label_key"])


def downgrade() -> None:
    with op.batch_alter_table("category_labels", schema=None) as batch_op:
        batch_op.drop_constraint("uq_category_labels_environment_label_key", type_="unique")
        batch_op.drop_column("label_key")
