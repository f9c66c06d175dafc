"""A category label per language: German and Spanish labels beside the default one, each optional.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("category_labels", schema=None) as batch_op:
        batch_op.add_column(sa.Column("label_de", sa.String(length=60), nullable=True))
        batch_op.add_column(sa.Column("label_es", sa.String(length=60), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("category_labels", schema=None) as batch_op:
        batch_op.drop_column("label_es")
        batch_op.drop_column("label_de")
