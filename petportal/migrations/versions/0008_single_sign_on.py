"""Single sign-on: an account can be the company identity provider's (its issuer and `sub`), with no password; a
login records how it proved a second factor.

Downgrading removes the accounts made by single sign-on (they have no password to fall back on) with their
logins, then the columns.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25
"""

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

USERS = sa.table("users", sa.column("id", sa.Integer), sa.column("sso_subject", sa.String))
LOGINS = sa.table("login_sessions", sa.column("user_id", sa.Integer))
CODES = sa.table("recovery_codes", sa.column("user_id", sa.Integer))


def upgrade() -> None:
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.alter_column("password_hash", existing_type=sa.String(length=255), nullable=True)
        batch_op.add_column(sa.Column("sso_issuer", sa.String(length=255), nullable=True))
        batch_op.add_column(sa.Column("sso_subject", sa.String(length=255), nullable=True))
        batch_op.create_unique_constraint("uq_users_sso", ["sso_issuer", "sso_subject"])
    with op.batch_alter_table("login_sessions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("second_factor", sa.String(length=16), nullable=True))


def downgrade() -> None:
    bind = op.get_bind()
    single_sign_on = sa.select(USERS.c.id).where(USERS.c.sso_subject.is_not(None))
    bind.execute(LOGINS.delete().where(LOGINS.c.user_id.in_(single_sign_on)))
    bind.execute(CODES.delete().where(CODES.c.user_id.in_(single_sign_on)))
    bind.execute(USERS.delete().where(USERS.c.sso_subject.is_not(None)))
    with op.batch_alter_table("login_sessions", schema=None) as batch_op:
        batch_op.drop_column("second_factor")
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.drop_constraint("uq_users_sso", type_="unique")
        batch_op.drop_column("sso_subject")
        batch_op.drop_column("sso_issuer")
        batch_op.alter_column("password_hash", existing_type=sa.String(length=255), nullable=False)
