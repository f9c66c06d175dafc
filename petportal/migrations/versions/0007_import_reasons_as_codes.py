"""An import's reasons are kept as a code and its values, and put into words when shown, in the visitor's language.

`imports.message` and `import_rows.message` held English sentences; `reason` (JSON) now holds what the words need
(petportal.models.RowReason, StopReason). The sentences the portal wrote are read back into codes; any other text
is kept as it was recorded (code "recorded"). Downgrading writes the English sentences again.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25
"""

import re
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

IMPORTS = sa.table(
    "imports",
    sa.column("id", sa.String),
    sa.column("environment", sa.String),
    sa.column("message", sa.Text),
    sa.column("reason", sa.JSON),
)
ROWS = sa.table(
    "import_rows",
    sa.column("import_id", sa.String),
    sa.column("position", sa.Integer),
    sa.column("state", sa.String),
    sa.column("message", sa.Text),
    sa.column("reason", sa.JSON),
)
# The English the portal wrote up to 0006, as it wrote it: what the data migration reads back into codes.
NO_ANSWER = "The pet store gave no usable answer: it may or may not have added this animal."
PORTAL_STOPPED = "The portal stopped while this animal was being sent: the pet store may or may not have added it."
REFUSED = "The pet store refused it: "
VALUES = re.compile(r"This line has ([0-9]+) values; each animal needs 3: name, categoryId, status\.")
STOPS = {
    "key_rejected": re.compile(
        r"The pet store refused the portal's key for (?P<environment>\S+)\. Nothing more was sent\."
    ),
    "unavailable": re.compile(r"The pet store of (?P<environment>\S+) stopped answering\. Nothing more was sent\."),
    "row_unknown": re.compile(
        r"The pet store of (?P<environment>\S+) gave no usable answer for a row, so nothing more was sent\. Check the "
        r"rows listed under “Outcome unknown” first\."
    ),
    "switched": re.compile(
        r"The portal switched from (?P<previous>\S+) to (?P<active>\S+) while this import ran\. "
        r"Nothing more was sent to (?P<environment>\S+)\."
    ),
}


def row_reason(state: str, message: str) -> dict[str, object]:
    """The reason of a row, from the words 0006 kept for it."""
    if state == "invalid":
        # The same check gives the same reasons again; only the number of values of a malformed line is not kept.
        found = VALUES.fullmatch(message)
        return {"code": "invalid", "values": int(found[1]) if found else 3}
    if state == "refused" and message.startswith(REFUSED):
        return {"code": "refused", "message": message[len(REFUSED) :]}
    if state == "unknown" and message == NO_ANSWER:
        return {"code": "no_answer"}
    if state == "unknown" and message == PORTAL_STOPPED:
        return {"code": "portal_stopped"}
    return {"code": "recorded", "text": message}


def stop_reason(environment: str, message: str) -> dict[str, object]:
    """The reason of an import that paused or stopped, from the words 0006 kept for it."""
    for code, pattern in STOPS.items():
        found = pattern.fullmatch(message)
        if found and found["environment"] == environment:
            values = {name: value for name, value in found.groupdict().items() if name != "environment"}
            return {"code": code, **values}
    return {"code": "recorded", "text": message}


def upgrade() -> None:
    _rewrite("message", "reason", sa.JSON(), stop_reason, row_reason)


def row_message(reason: dict[str, object]) -> str | None:
    """The English words 0006 kept for a row with this reason (an invalid row's, only for a malformed line)."""
    match reason.get("code"):
        case "invalid" if reason.get("values", 3) != 3:
            return f"This line has {reason['values']} values; each animal needs 3: name, categoryId, status."
        case "invalid":
            return "Refused by the portal's checks."
        case "refused":
            return f"{REFUSED}{reason.get('message', '')}"
        case "no_answer":
            return NO_ANSWER
        case "portal_stopped":
            return PORTAL_STOPPED
    return str(reason.get("text", "")) or None


def stop_message(environment: str, reason: dict[str, object]) -> str | None:
    """The English words 0006 kept for an import that paused or stopped with this reason."""
    match reason.get("code"):
        case "key_rejected":
            return f"The pet store refused the portal's key for {environment}. Nothing more was sent."
        case "unavailable":
            return f"The pet store of {environment} stopped answering. Nothing more was sent."
        case "row_unknown":
            return (
                f"The pet store of {environment} gave no usable answer for a row, so nothing more was sent. Check the "
                "rows listed under “Outcome unknown” first."
            )
        case "switched":
            return (
                f"The portal switched from {reason.get('previous')} to {reason.get('active')} while this import ran. "
                f"Nothing more was sent to {environment}."
            )
    return str(reason.get("text", "")) or None


def downgrade() -> None:
    _rewrite("reason", "message", sa.Text(), stop_message, lambda state, reason: row_message(reason))


def _rewrite(
    source: str,
    target: str,
    target_type: sa.types.TypeEngine[Any],
    of_import: Callable[[str, Any], Any],
    of_row: Callable[[str, Any], Any],
) -> None:
    """Add column `target` to both tables, fill it from `source` (an import's from its environment and `source`,
    a row's from its state and `source`), then drop `source`."""
    for table in ("imports", "import_rows"):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(sa.Column(target, target_type, nullable=True))
    bind = op.get_bind()
    found = sa.select(IMPORTS.c.id, IMPORTS.c.environment, IMPORTS.c[source].label("value"))
    for batch in bind.execute(found).all():
        if batch.value:
            converted = of_import(batch.environment, batch.value)
            bind.execute(IMPORTS.update().where(IMPORTS.c.id == batch.id).values({target: converted}))
    found = sa.select(ROWS.c.import_id, ROWS.c.position, ROWS.c.state, ROWS.c[source].label("value"))
    for row in bind.execute(found).all():
        if row.value:
            where = (ROWS.c.import_id == row.import_id) & (ROWS.c.position == row.position)
            bind.execute(ROWS.update().where(where).values({target: of_row(row.state, row.value)}))
    for table in ("imports", "import_rows"):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_column(source)
