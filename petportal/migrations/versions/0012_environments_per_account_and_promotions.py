"""Each account's environments, and promotions from staging to production with their ledger.

`users.environments` names the environments an account may work on; every account that exists keeps both.
A promotion is an import whose animals come from another environment (`imports.source`, `import_rows.source_id`),
and `promotions` is the ledger that lets each staging animal reach production at most once, ever.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-05
"""

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("environments", sa.String(length=64), nullable=False, server_default="production staging")
        )
    with op.batch_alter_table("imports", schema=None) as batch_op:
        batch_op.add_column(sa.Column("source", sa.String(length=32), nullable=True))
    with op.batch_alter_table("import_rows", schema=None) as batch_op:
        batch_op.add_column(sa.Column("source_id", sa.BigInteger(), nullable=True))
    op.create_table(
        "promotions",
        sa.Column("staging_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("import_id", sa.String(length=32), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("production_id", sa.BigInteger(), nullable=True),
        sa.Column("username", sa.String(length=80), nullable=False),
        sa.Column("promoted_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("staging_id"),
    )


def downgrade() -> None:
    op.drop_table("promotions")
    # Promotions are imports too: without their source they would read as files, so they go with the ledger.
    imports = sa.table("imports", sa.column("id", sa.String), sa.column("source", sa.String))
    rows = sa.table("import_rows", sa.column("import_id", sa.String))
    promoted = sa.select(imports.c.id).where(imports.c.source.is_not(None))
    op.get_bind().execute(rows.delete().where(rows.c.import_id.in_(promoted)))
    op.get_bind().execute(imports.delete().where(imports.c.source.is_not(None)))
    with op.batch_alter_table("import_rows", schema=None) as batch_op:
        batch_op.drop_column("source_id")
    with op.batch_alter_table("imports", schema=None) as batch_op:
        batch_op.drop_column("source")
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.drop_column("environments")
