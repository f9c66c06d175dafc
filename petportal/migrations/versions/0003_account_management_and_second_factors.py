"""Accounts that admins manage (enabled, a password to change) with a second factor, and the audit log's target.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22
"""

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "recovery_codes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("code_hash", sa.String(length=64), nullable=False),
        sa.Column("used_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("recovery_codes", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_recovery_codes_user_id"), ["user_id"], unique=False)

    with op.batch_alter_table("audit_log", schema=None) as batch_op:
        batch_op.add_column(sa.Column("target", sa.String(length=80), nullable=True))

    # Accounts made by earlier releases stay enabled, keep their passwords and have no second factor.
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.add_column(sa.Column("enabled", sa.Boolean(), server_default=sa.true(), nullable=False))
        batch_op.add_column(sa.Column("must_change_password", sa.Boolean(), server_default=sa.false(), nullable=False))
        batch_op.add_column(sa.Column("mfa_secret", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("mfa_enabled_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("mfa_last_step", sa.BigInteger(), nullable=True))
        batch_op.add_column(sa.Column("logins_ended_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.drop_column("logins_ended_at")
        batch_op.drop_column("mfa_last_step")
        batch_op.drop_column("mfa_enabled_at")
        batch_op.drop_column("mfa_secret")
        batch_op.drop_column("must_change_password")
        batch_op.drop_column("enabled")

    with op.batch_alter_table("audit_log", schema=None) as batch_op:
        batch_op.drop_column("target")

    with op.batch_alter_table("recovery_codes", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_recovery_codes_user_id"))

    op.drop_table("recovery_codes")
