"""Category labels per environment, and each account's additions.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22
"""

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "category_labels",
        sa.Column("environment", sa.String(length=32), nullable=False),
        sa.Column("category_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("label", sa.String(length=60), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("environment", "category_id"),
    )
    op.create_table(
        "additions",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("environment", sa.String(length=32), nullable=False),
        sa.Column("pet_id", sa.BigInteger(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("added_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("additions", schema=None) as batch_op:
        batch_op.create_index(
            "ix_additions_user_environment_added", ["user_id", "environment", "added_at"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("additions", schema=None) as batch_op:
        batch_op.drop_index("ix_additions_user_environment_added")
    op.drop_table("additions")
    op.drop_table("category_labels")
