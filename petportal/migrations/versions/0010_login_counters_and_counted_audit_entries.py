"""Login counters shared by every worker without Redis, and audit entries that count attempts.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "login_counters",
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("hits", sa.Integer(), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("key"),
    )
    with op.batch_alter_table("login_counters", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_login_counters_expires_at"), ["expires_at"], unique=False)
    with op.batch_alter_table("audit_log", schema=None) as batch_op:
        batch_op.add_column(sa.Column("count", sa.Integer(), server_default="1", nullable=False))


def downgrade() -> None:
    with op.batch_alter_table("audit_log", schema=None) as batch_op:
        batch_op.drop_column("count")
    with op.batch_alter_table("login_counters", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_login_counters_expires_at"))
    op.drop_table("login_counters")
