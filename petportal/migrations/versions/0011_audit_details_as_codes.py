"""An audit entry's details are kept as a code and its values, and put into words when shown, in the reader's language.

`audit_log.detail` held English sentences; `details` (JSON) now holds what the words need
(petportal.models.AuditDetail): `{"code": ..., values}`, or nothing when there is nothing more to say. The sentences
the portal wrote up to 0010 are read back into codes; any other text is kept as it was recorded (code "recorded"),
so nothing is lost. Downgrading writes the English sentences again.

Every action the log holds is one the portal still writes (each of them, since 0.1.0, is a member of AuditAction),
so the `action` column is unchanged.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-04
"""

import ast
import re
from typing import Any

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

AUDIT_LOG = sa.table(
    "audit_log",
    sa.column("id", sa.Integer),
    sa.column("action", sa.String),
    sa.column("environment", sa.String),
    sa.column("detail", sa.Text),
    sa.column("details", sa.JSON),
)
# A text as Python's repr() wrote it into a sentence ({label!r}): in single quotes, or in double quotes when it
# held a single quote, with backslash escapes.
QUOTED = r"(?:'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")"
ROLE = r"(?:staff|admin)"
MAY_OR_MAY_NOT = ": the pet store may or may not have added it"
# The sentences 0010 wrote, for each action: the code each is read back into, and the pattern whose groups are its
# values (a group named `q_...` was written with repr(), a group named `n_...` is a number).
SENTENCES: dict[str, list[tuple[str, str]]] = {
    "category_labelled": [
        ("category_labelled", rf"category (?P<n_category>-?[0-9]+) labelled (?P<q_label>{QUOTED})"),
        (
            "category_renamed",
            rf"category (?P<n_category>-?[0-9]+) renamed from (?P<q_previous>{QUOTED}) to (?P<q_label>{QUOTED})",
        ),
    ],
    "category_unlabelled": [
        ("category_unlabelled", rf"category (?P<n_category>-?[0-9]+) was (?P<q_label>{QUOTED})"),
    ],
    "animal_added": [
        (
            "animal_added_by_import",
            r"id (?P<n_pet_id>-?[0-9]+): (?P<name>.*) \(bulk import (?P<import_id>\S+), line (?P<n_line>[0-9]+)\)",
        ),
        ("animal_added", r"id (?P<n_pet_id>-?[0-9]+): (?P<name>.*)"),
    ],
    "animal_outcome_unknown": [
        (
            "outcome_unknown_in_import",
            rf"(?P<name>.*) \(bulk import (?P<import_id>\S+), line (?P<n_line>[0-9]+)\){MAY_OR_MAY_NOT}",
        ),
        ("outcome_unknown", rf"(?P<name>.*){MAY_OR_MAY_NOT}"),
    ],
    "animals_imported": [
        (
            "animals_imported",
            rf"import (?P<import_id>\S+) of (?P<q_filename>{QUOTED}): (?P<n_created>[0-9]+) created, "
            r"(?P<n_refused>[0-9]+) refused, (?P<n_unknown>[0-9]+) unknown, of (?P<n_total>[0-9]+) rows",
        ),
    ],
    "import_discarded": [
        (
            "import_discarded",
            rf"import (?P<import_id>\S+) of (?P<q_filename>{QUOTED}) \((?P<owner>.*)'s\): "
            "preview discarded, nothing sent",
        ),
    ],
    "import_started": [
        ("import_started", rf"import (?P<import_id>\S+) of (?P<q_filename>{QUOTED}) \((?P<owner>.*)'s\), start"),
        ("import_retried", rf"import (?P<import_id>\S+) of (?P<q_filename>{QUOTED}) \((?P<owner>.*)'s\), retry"),
    ],
    "user_created": [
        ("created_by_admin", rf"role (?P<role>{ROLE}); must change the password"),
        ("created_from_command_line", rf"role (?P<role>{ROLE}); from the command line"),
        ("created_by_sign_on", rf"single sign-on, (?P<role>{ROLE})"),
    ],
    "role_changed": [
        ("role_changed", rf"from (?P<previous>{ROLE}) to (?P<role>{ROLE})"),
        ("role_changed_by_sign_on", rf"single sign-on: (?P<previous>{ROLE}) to (?P<role>{ROLE})"),
    ],
    "user_disabled": [("every_session_ended", "every session ended")],
    "sessions_ended": [
        ("sessions_ended", r"(?P<n_count>[0-9]+) open"),
        ("sign_on_logout", r"single sign-on: the provider's back-channel logout, (?P<n_count>[0-9]+) open"),
    ],
    "password_reset": [("password_reset", "every session ended; must change it at next login")],
    "password_change_failed": [("wrong_password", "wrong current password")],
    "password_changed": [("other_sessions_ended", "other sessions ended")],
    "mfa_enrolled": [("new_device", "new device")],
    "mfa_reset": [("from_command_line", "from the command line")],
    "login_refused": [
        ("account_disabled", "the account is disabled"),
        ("no_role_claim", "single sign-on: no admin or staff value in the role claim"),
    ],
    "recovery_code_used": [("codes_left", r"(?P<n_count>[0-9]+) left")],
    "passkey_added": [("passkey", r"(?P<name>.+)")],
    "passkey_used": [("passkey", r"(?P<name>.+)")],
    "passkey_removed": [("passkey", r"(?P<name>.+)")],
    "environment_switched": [("switched_from", r"from (?P<previous>\S+) to (?P<environment>\S+)")],
    "preview_changed": [("preview_cleared", "cleared")],
}


def details(action: str, environment: str | None, detail: str) -> dict[str, Any] | None:
    """The details of an entry, from the sentence 0010 kept for it."""
    if not detail or (action == "preview_changed" and detail == environment):
        return None  # nothing more to say (a preview names its environment in its own column)
    for code, pattern in SENTENCES.get(action, []):
        found = re.fullmatch(pattern, detail, re.DOTALL)
        if found is None:
            continue
        values: dict[str, Any] = {}
        for name, value in found.groupdict().items():
            if name.startswith("q_"):
                values[name[2:]] = ast.literal_eval(value)
            elif name.startswith("n_"):
                values[name[2:]] = int(value)
            else:
                values[name] = value
        # The entry's own environment is the one switched to: only a sentence that agrees with it is read.
        if values.pop("environment", environment) != environment:
            continue
        return {"code": code, **values}
    return {"code": "recorded", "text": detail}


# The English sentence 0010 wrote for each code, for the downgrade ({name!r}: the value as repr() wrote it).
WRITTEN = {
    "category_labelled": "category {category} labelled {label!r}",
    "category_renamed": "category {category} renamed from {previous!r} to {label!r}",
    "category_unlabelled": "category {category} was {label!r}",
    "animal_added_by_import": "id {pet_id}: {name} (bulk import {import_id}, line {line})",
    "animal_added": "id {pet_id}: {name}",
    "outcome_unknown_in_import": "{name} (bulk import {import_id}, line {line})" + MAY_OR_MAY_NOT,
    "outcome_unknown": "{name}" + MAY_OR_MAY_NOT,
    "animals_imported": (
        "import {import_id} of {filename!r}: {created} created, {refused} refused, {unknown} unknown, of {total} rows"
    ),
    "import_discarded": "import {import_id} of {filename!r} ({owner}'s): preview discarded, nothing sent",
    "import_started": "import {import_id} of {filename!r} ({owner}'s), start",
    "import_retried": "import {import_id} of {filename!r} ({owner}'s), retry",
    "created_by_admin": "role {role}; must change the password",
    "created_from_command_line": "role {role}; from the command line",
    "created_by_sign_on": "single sign-on, {role}",
    "role_changed": "from {previous} to {role}",
    "role_changed_by_sign_on": "single sign-on: {previous} to {role}",
    "every_session_ended": "every session ended",
    "sessions_ended": "{count} open",
    "sign_on_logout": "single sign-on: the provider's back-channel logout, {count} open",
    "password_reset": "every session ended; must change it at next login",
    "wrong_password": "wrong current password",
    "other_sessions_ended": "other sessions ended",
    "new_device": "new device",
    "from_command_line": "from the command line",
    "account_disabled": "the account is disabled",
    "no_role_claim": "single sign-on: no admin or staff value in the role claim",
    "codes_left": "{count} left",
    "passkey": "{name}",
    "switched_from": "from {previous} to {environment}",
    "preview_cleared": "cleared",
}


def sentence(action: str, environment: str | None, found: dict[str, Any] | None) -> str:
    """The English sentence 0010 kept for an entry with these details."""
    if found is None:
        return (environment or "") if action == "preview_changed" else ""
    code = str(found.get("code"))
    if code in WRITTEN:
        return WRITTEN[code].format(**{"environment": environment, **found})
    return str(found.get("text", ""))


def upgrade() -> None:
    with op.batch_alter_table("audit_log", schema=None) as batch_op:
        batch_op.add_column(sa.Column("details", sa.JSON(), nullable=True))
    bind = op.get_bind()
    said = sa.select(AUDIT_LOG.c.id, AUDIT_LOG.c.action, AUDIT_LOG.c.environment, AUDIT_LOG.c.detail)
    for entry in bind.execute(said.where(AUDIT_LOG.c.detail != "")).all():
        converted = details(entry.action, entry.environment, entry.detail)
        if converted is not None:
            bind.execute(AUDIT_LOG.update().where(AUDIT_LOG.c.id == entry.id).values(details=converted))
    with op.batch_alter_table("audit_log", schema=None) as batch_op:
        batch_op.drop_column("detail")


def downgrade() -> None:
    with op.batch_alter_table("audit_log", schema=None) as batch_op:
        batch_op.add_column(sa.Column("detail", sa.Text(), nullable=False, server_default=""))
    bind = op.get_bind()
    said = sa.select(AUDIT_LOG.c.id, AUDIT_LOG.c.action, AUDIT_LOG.c.environment, AUDIT_LOG.c.details)
    for entry in bind.execute(said).all():
        written = sentence(entry.action, entry.environment, entry.details)
        if written:
            bind.execute(AUDIT_LOG.update().where(AUDIT_LOG.c.id == entry.id).values(detail=written))
    with op.batch_alter_table("audit_log", schema=None) as batch_op:
        batch_op.alter_column("detail", server_default=None)
        batch_op.drop_column("details")
