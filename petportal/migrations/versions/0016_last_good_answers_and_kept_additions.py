"""The store's last good answers (they stand in while it is not answering), and additions kept for its return.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "last_good_answers",
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("environment", sa.String(length=32), nullable=False),
        sa.Column("answered_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("records", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("key"),
    )
    with op.batch_alter_table("last_good_answers", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_last_good_answers_answered_at"), ["answered_at"], unique=False)
    with op.batch_alter_table("imports", schema=None) as batch_op:
        batch_op.add_column(sa.Column("kept", sa.Boolean(), server_default=sa.false(), nullable=False))


def downgrade() -> None:
    with op.batch_alter_table("imports", schema=None) as batch_op:
        batch_op.drop_column("kept")
    with op.batch_alter_table("last_good_answers", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_last_good_answers_answered_at"))
    op.drop_table("last_good_answers")
