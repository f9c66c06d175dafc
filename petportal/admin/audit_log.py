"""The audit log as admins read it. The log keeps codes (audit.py, `AuditAction`, `AuditDetail`); this is the one
place they become words: in the reader's language on the page, in downloads.FILE_LANGUAGE in the download."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import asdict

from flask_babel import force_locale, ngettext
from flask_babel import gettext as _

from petportal.data.audit import Entry
from petportal.data.models import AuditAction, Role
from petportal.data.models import AuditDetail as D
from petportal.data.payloads import (
    AnimalDetails,
    AuditDetails,
    Count,
    EnvironmentsChange,
    ImportDetails,
    ImportTally,
    LabelChange,
    PasskeyDetails,
    RecordedDetails,
    RoleDetails,
    SwitchedFrom,
    decode,
)
from petportal.i18n.languages import environment_label, environments_label, number, role_label
from petportal.i18n.lazy_text import lazy_gettext as _l
from petportal.web.downloads import FILE_LANGUAGE, Cell

# The audit page's columns (templates/admin/audit.html), in its order and words: the download's header.
COLUMNS = ("When (UTC)", "Who", "What", "Account", "Environment", "Details", "From")
# Each action as the audit page names it, in the reader's language: every member of AuditAction has its words.
ACTIONS = {
    AuditAction.LOGIN: _l("login"),
    AuditAction.LOGIN_FAILED: _l("login failed"),
    AuditAction.LOGIN_LIMITED: _l("login limited"),
    AuditAction.LOGIN_REFUSED: _l("login refused"),
    AuditAction.LOGOUT: _l("logout"),
    AuditAction.MFA_SUCCEEDED: _l("mfa succeeded"),
    AuditAction.MFA_FAILED: _l("mfa failed"),
    AuditAction.MFA_LIMITED: _l("mfa limited"),
    AuditAction.MFA_ENROLLED: _l("mfa enrolled"),
    AuditAction.MFA_RESET: _l("mfa reset"),
    AuditAction.RECOVERY_CODE_USED: _l("recovery code used"),
    AuditAction.PASSKEY_ADDED: _l("passkey added"),
    AuditAction.PASSKEY_USED: _l("passkey used"),
    AuditAction.PASSKEY_REFUSED: _l("passkey refused"),
    AuditAction.PASSKEY_REMOVED: _l("passkey removed"),
    AuditAction.PASSWORD_CHANGED: _l("password changed"),
    AuditAction.PASSWORD_CHANGE_FAILED: _l("password change failed"),
    AuditAction.PASSWORD_RESET: _l("password reset"),
    AuditAction.OTHER_SESSIONS_ENDED: _l("other sessions ended"),
    AuditAction.SESSIONS_ENDED: _l("sessions ended"),
    AuditAction.USER_CREATED: _l("user created"),
    AuditAction.USER_DISABLED: _l("user disabled"),
    AuditAction.USER_ENABLED: _l("user enabled"),
    AuditAction.ROLE_CHANGED: _l("role changed"),
    AuditAction.ENVIRONMENT_SWITCHED: _l("environment switched"),
    AuditAction.PREVIEW_CHANGED: _l("preview changed"),
    AuditAction.CATEGORY_LABELLED: _l("category labelled"),
    AuditAction.CATEGORY_UNLABELLED: _l("category unlabelled"),
    AuditAction.ANIMAL_ADDED: _l("animal added"),
    AuditAction.ANIMAL_OUTCOME_UNKNOWN: _l("animal outcome unknown"),
    AuditAction.ANIMALS_IMPORTED: _l("animals imported"),
    AuditAction.IMPORT_STARTED: _l("import started"),
    AuditAction.IMPORT_DISCARDED: _l("import discarded"),
    AuditAction.ENVIRONMENTS_CHANGED: _l("environments changed"),
    AuditAction.ANIMALS_PROMOTED: _l("animals promoted"),
}


def action_label(action: AuditAction) -> str:
    """An entry's action as the audit page names it, in the request's language."""
    return str(ACTIONS[action])


def details(entry: Entry) -> str:
    """An entry's details in the reader's language, with how many attempts it counts."""
    said = _described(entry)
    if entry.count <= 1:
        return said
    attempts = ngettext("%(num)d attempt", "%(num)d attempts", entry.count)
    return f"{said}; {attempts}" if said else attempts


def _described(entry: Entry) -> str:
    """What an entry's `details` say, in words: its code chooses them, its values fill them in."""
    found = decode(AuditDetails, entry.details)
    values = asdict(found) if found else {}
    match found:
        case LabelChange(code=D.CATEGORY_LABELLED):
            return _("category %(category)s labelled “%(label)s”", **values)
        case LabelChange(code=D.CATEGORY_RENAMED):
            return _("category %(category)s renamed from “%(previous)s” to “%(label)s”", **values)
        case LabelChange(code=D.CATEGORY_UNLABELLED):
            return _("category %(category)s was “%(label)s”", **values)
        case AnimalDetails(code=D.ANIMAL_ADDED, pet_id=pet_id):
            return _("id %(id)s: %(name)s", id=pet_id, **values)
        case AnimalDetails(code=D.ANIMAL_ADDED_BY_IMPORT, pet_id=pet_id):
            return _("id %(id)s: %(name)s (bulk import %(import_id)s, line %(line)s)", id=pet_id, **values)
        case AnimalDetails(code=D.OUTCOME_UNKNOWN):
            return _("%(name)s: the pet store may or may not have added it", **values)
        case AnimalDetails(code=D.OUTCOME_UNKNOWN_IN_IMPORT):
            return _(
                "%(name)s (bulk import %(import_id)s, line %(line)s): the pet store may or may not have added it",
                **values,
            )
        case ImportDetails(code=D.IMPORT_STARTED):
            return _("import %(import_id)s of “%(filename)s” (uploaded by %(owner)s): started", **values)
        case ImportDetails(code=D.IMPORT_RETRIED):
            return _(
                "import %(import_id)s of “%(filename)s” (uploaded by %(owner)s): its refused rows sent again", **values
            )
        case ImportDetails(code=D.IMPORT_DISCARDED):
            return _(
                "import %(import_id)s of “%(filename)s” (uploaded by %(owner)s): preview discarded, nothing sent",
                **values,
            )
        case ImportTally(code=D.ANIMALS_IMPORTED):
            return _(
                "import %(import_id)s of “%(filename)s”: %(created)s created, %(refused)s refused, %(unknown)s "
                "unknown, of %(total)s rows",
                **(values | _numbers(found)),
            )
        case RoleDetails(code=D.CREATED_BY_ADMIN, role=role):
            return _("role %(role)s; must change the password", role=role_label(role))
        case RoleDetails(code=D.CREATED_FROM_COMMAND_LINE, role=role):
            return _("role %(role)s; from the command line", role=role_label(role))
        case RoleDetails(code=D.CREATED_BY_SIGN_ON, role=role):
            return _("role %(role)s; by single sign-on", role=role_label(role))
        case RoleDetails(code=D.ROLE_CHANGED, role=role, previous=Role() as previous):
            return _("from %(previous)s to %(role)s", previous=role_label(previous), role=role_label(role))
        case RoleDetails(code=D.ROLE_CHANGED_BY_SIGN_ON, role=role, previous=Role() as previous):
            return _(
                "single sign-on: from %(previous)s to %(role)s", previous=role_label(previous), role=role_label(role)
            )
        case Count(code=D.SESSIONS_ENDED, count=count):
            return ngettext("%(num)d was open", "%(num)d were open", count)
        case Count(code=D.SIGN_ON_LOGOUT, count=count):
            return ngettext(
                "single sign-on: the provider's back-channel logout, %(num)d was open",
                "single sign-on: the provider's back-channel logout, %(num)d were open",
                count,
            )
        case Count(code=D.CODES_LEFT, count=count):
            return ngettext("%(num)d recovery code left", "%(num)d recovery codes left", count)
        case PasskeyDetails(name=name):
            return _("passkey “%(name)s”", name=name)
        case SwitchedFrom(previous=previous):
            return _(
                "from %(previous)s to %(environment)s",
                previous=environment_label(previous),
                environment=environment_label(entry.environment) if entry.environment else "",
            )
        case EnvironmentsChange(code=D.ENVIRONMENTS):
            return _("works on %(environments)s, before on %(previous)s", **_environments(found))
        case EnvironmentsChange(code=D.ENVIRONMENTS_BY_SIGN_ON):
            return _("single sign-on: works on %(environments)s, before on %(previous)s", **_environments(found))
        case AnimalDetails(code=D.ANIMAL_PROMOTED, pet_id=pet_id):
            return _("id %(id)s: %(name)s (staging id %(staging_id)s, promotion %(import_id)s)", id=pet_id, **values)
        case AnimalDetails(code=D.OUTCOME_UNKNOWN_IN_PROMOTION):
            return _(
                "%(name)s (staging id %(staging_id)s, promotion %(import_id)s): "
                "the pet store may or may not have added it",
                **values,
            )
        case ImportTally(code=D.ANIMALS_PROMOTED):
            return _(
                "promotion %(import_id)s from staging: %(created)s created, %(refused)s refused, %(unknown)s "
                "unknown, of %(total)s animals",
                **(values | _numbers(found)),
            )
        case RecordedDetails(text=text):
            return text
        case AuditDetails(code=code):
            return str(WORDS.get(code, ""))
    return ""


# What a code without values says.
WORDS = {
    D.EVERY_SESSION_ENDED: _l("every session ended"),
    D.PASSWORD_RESET: _l("every session ended; must change it at next login"),
    D.WRONG_PASSWORD: _l("wrong current password"),
    D.OTHER_SESSIONS_ENDED: _l("other sessions ended"),
    D.NEW_DEVICE: _l("new device"),
    D.ACCOUNT_DISABLED: _l("the account is disabled"),
    D.NO_ROLE_CLAIM: _l("single sign-on: no admin or staff value in the role claim"),
    D.FROM_COMMAND_LINE: _l("from the command line"),
    D.NO_ENVIRONMENT_CLAIM: _l("single sign-on: no environment in the environments claim"),
    D.PREVIEW_CLEARED: _l("cleared"),
}


def _numbers(tally: ImportTally) -> dict[str, str]:
    """A tally's counts written as numbers are in the reader's language."""
    return {key: number(getattr(tally, key)) for key in ("created", "refused", "unknown", "total")}


def _environments(change: EnvironmentsChange) -> dict[str, str]:
    """A change's environments, after and before, in the reader's language."""
    return {"environments": environments_label(change.environments), "previous": environments_label(change.previous)}


def file_cells(entries: Iterable[Entry]) -> Iterator[tuple[Cell, ...]]:
    """Each of `entries` as the audit page's row (COLUMNS), in the downloads' language."""
    with force_locale(FILE_LANGUAGE):
        for entry in entries:
            yield (
                entry.at.strftime("%Y-%m-%d %H:%M:%S"),
                entry.actor,
                action_label(entry.action),
                entry.target,
                environment_label(entry.environment) if entry.environment else None,
                details(entry) or None,
                entry.remote_addr,
            )
