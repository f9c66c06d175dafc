"""Foreign keys from the rows that name an account: its logins, submission tokens, additions and imports.

Accounts are never deleted by the portal, but a database can still hold rows of accounts that are gone: the
downgrade of 0008 deletes the accounts made by single sign-on and only their logins and recovery codes, and SQLite
enforces no foreign keys. Such rows belong to nobody who can sign in, so they are deleted first, explicitly, and
the constraints can then be added on any database an earlier release made. The audit log and the promotions ledger
keep no foreign key: they are history that outlives what they name (see models.py).

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

# Each table whose `user_id` names an account, and its constraint's name (PostgreSQL's own for an unnamed one).
NAMING_AN_ACCOUNT = {
    "login_sessions": "login_sessions_user_id_fkey",
    "submission_tokens": "submission_tokens_user_id_fkey",
    "additions": "additions_user_id_fkey",
    "imports": "imports_user_id_fkey",
}


def upgrade() -> None:
    # Plain statements through op.execute, so `flask db upgrade --sql` writes them out too.
    users = sa.table("users", sa.column("id", sa.Integer))
    accounts = sa.select(users.c.id)
    # The rows of an import go before it: SQLite does not cascade them. A promotion's ledger entries stay.
    imports = sa.table("imports", sa.column("id", sa.String), sa.column("user_id", sa.Integer))
    rows = sa.table("import_rows", sa.column("import_id", sa.String))
    orphaned = sa.select(imports.c.id).where(imports.c.user_id.not_in(accounts))
    op.execute(rows.delete().where(rows.c.import_id.in_(orphaned)))
    for name in NAMING_AN_ACCOUNT:
        table = sa.table(name, sa.column("user_id", sa.Integer))
        op.execute(table.delete().where(table.c.user_id.not_in(accounts)))
    for name, constraint in NAMING_AN_ACCOUNT.items():
        with op.batch_alter_table(name, schema=None) as batch_op:
            batch_op.create_foreign_key(constraint, "users", ["user_id"], ["id"])


def downgrade() -> None:
    for name, constraint in NAMING_AN_ACCOUNT.items():
        with op.batch_alter_table(name, schema=None) as batch_op:
            batch_op.drop_constraint(constraint, type_="foreignkey")
