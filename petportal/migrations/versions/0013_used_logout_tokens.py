"""The `jti` of each back-channel logout token taken, kept while the token could be replayed.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "used_logout_tokens",
        sa.Column("jti", sa.String(length=255), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("jti"),
    )
    with op.batch_alter_table("used_logout_tokens", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_used_logout_tokens_expires_at"), ["expires_at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("used_logout_tokens", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_used_logout_tokens_expires_at"))
    op.drop_table("used_logout_tokens")
