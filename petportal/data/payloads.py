"""What is stored beside a row as JSON, as typed values: why an import row or an import stands where it does
(`ImportRow.reason`, `BulkImport.reason`) and what more an audit entry says (`AuditEntry.details`).

Each is one frozen dataclass of its family (`RowReasonPayload`, `StopReasonPayload`, `AuditDetails`): the family's
own class for a code with no values, a subclass for each shape of values. `encode` and `decode` are the one codec
between them and the JSON kept, `{"code": ..., values}`: a set of environments as `User.environments` keeps it, a
value of None left out. Readers match on the classes; none reads the JSON."""

from collections.abc import Callable
from dataclasses import dataclass, fields
from enum import StrEnum
from typing import TypeVar, cast, get_args, get_type_hints

from petportal.config import Environment
from petportal.data.models import AuditDetail, EnvironmentSet, Json, JsonValue, Role, RowReason, StopReason

D = AuditDetail


@dataclass(frozen=True, kw_only=True)
class RowReasonPayload:
    """Why an import row stands where it does; this class alone for a code without values (`RowReason`)."""

    code: RowReason


@dataclass(frozen=True, kw_only=True)
class InvalidRow(RowReasonPayload):
    """The portal's checks refused the row: how many values its line held, of how many columns (None: the header's)."""

    code: RowReason = RowReason.INVALID
    values: int | None = None
    columns: int | None = None


@dataclass(frozen=True, kw_only=True)
class StoreRefusal(RowReasonPayload):
    """The store refused the row (refused) or staging lost it (gone): `said` (a `StoreReason`), `message`, `status`."""

    said: str | None = None
    message: str = ""
    status: int | None = None


@dataclass(frozen=True, kw_only=True)
class PromotedBefore(RowReasonPayload):
    """Promoted already (promoted_before), or listed already (duplicate): `pet_id`, the target's id when known."""

    code: RowReason = RowReason.PROMOTED_BEFORE
    pet_id: int | None = None


@dataclass(frozen=True, kw_only=True)
class StopReasonPayload:
    """Why an import stopped sending; this class alone for a code without values (`StopReason`)."""

    code: StopReason


@dataclass(frozen=True, kw_only=True)
class Switched(StopReasonPayload):
    """The active environment changed while the import ran: from `previous` to `active`."""

    code: StopReason = StopReason.SWITCHED
    previous: Environment | None = None
    active: Environment | None = None


@dataclass(frozen=True, kw_only=True)
class AuditDetails:
    """What more an audit entry says; this class alone for a code without values (`AuditDetail`)."""

    code: AuditDetail


@dataclass(frozen=True, kw_only=True)
class LabelChange(AuditDetails):
    """A category's label given (`previous`: the one it replaced, when renamed) or taken away."""

    category: int
    label: str
    previous: str | None = None


@dataclass(frozen=True, kw_only=True)
class AnimalDetails(AuditDetails):
    """An animal added (`pet_id`) or of unknown outcome, from the form, an import's line or a promotion."""

    name: str
    pet_id: int | None = None
    import_id: str | None = None
    line: int | None = None
    staging_id: int | None = None


@dataclass(frozen=True, kw_only=True)
class ImportDetails(AuditDetails):
    """An import started, retried or discarded."""

    import_id: str
    filename: str
    owner: str


@dataclass(frozen=True, kw_only=True)
class ImportTally(AuditDetails):
    """An import's or a promotion's rows, counted when it ended."""

    import_id: str
    created: int
    refused: int
    unknown: int
    total: int
    filename: str | None = None


@dataclass(frozen=True, kw_only=True)
class RoleDetails(AuditDetails):
    """An account's role when it was created, or when it changed (from `previous`)."""

    role: Role
    previous: Role | None = None


@dataclass(frozen=True, kw_only=True)
class Count(AuditDetails):
    """How many: sessions ended, or recovery codes left."""

    count: int


@dataclass(frozen=True, kw_only=True)
class PasskeyDetails(AuditDetails):
    """The passkey added, used or removed, by its name."""

    code: AuditDetail = D.PASSKEY
    name: str


@dataclass(frozen=True, kw_only=True)
class SwitchedFrom(AuditDetails):
    """The environment switched from (the entry's own is the one switched to)."""

    code: AuditDetail = D.SWITCHED_FROM
    previous: Environment


@dataclass(frozen=True, kw_only=True)
class EnvironmentsChange(AuditDetails):
    """The environments an account works on, and those before."""

    environments: frozenset[Environment]
    previous: frozenset[Environment]


@dataclass(frozen=True, kw_only=True)
class RecordedRow(RowReasonPayload):
    """Words kept before reasons were codes."""

    code: RowReason = RowReason.RECORDED
    text: str = ""


@dataclass(frozen=True, kw_only=True)
class RecordedStop(StopReasonPayload):
    """Words kept before reasons were codes."""

    code: StopReason = StopReason.RECORDED
    text: str = ""


@dataclass(frozen=True, kw_only=True)
class RecordedDetails(AuditDetails):
    """Words kept before details were codes."""

    code: AuditDetail = D.RECORDED
    text: str = ""


Payload = RowReasonPayload | StopReasonPayload | AuditDetails
P = TypeVar("P", RowReasonPayload, StopReasonPayload, AuditDetails)
# Which class keeps each code's values, in each family (a code not named: the family's own class).
SHAPES: dict[type[Payload], dict[StrEnum, type[Payload]]] = {
    RowReasonPayload: {
        RowReason.INVALID: InvalidRow,
        RowReason.REFUSED: StoreRefusal,
        RowReason.GONE: StoreRefusal,
        RowReason.PROMOTED_BEFORE: PromotedBefore,
        RowReason.DUPLICATE: PromotedBefore,
        RowReason.RECORDED: RecordedRow,
    },
    StopReasonPayload: {StopReason.SWITCHED: Switched, StopReason.RECORDED: RecordedStop},
    AuditDetails: {
        **dict.fromkeys((D.CATEGORY_LABELLED, D.CATEGORY_RENAMED, D.CATEGORY_UNLABELLED), LabelChange),
        **dict.fromkeys((D.ANIMAL_ADDED, D.ANIMAL_ADDED_BY_IMPORT, D.ANIMAL_PROMOTED), AnimalDetails),
        **dict.fromkeys(
            (D.OUTCOME_UNKNOWN, D.OUTCOME_UNKNOWN_IN_IMPORT, D.OUTCOME_UNKNOWN_IN_PROMOTION), AnimalDetails
        ),
        **dict.fromkeys((D.IMPORT_STARTED, D.IMPORT_RETRIED, D.IMPORT_DISCARDED), ImportDetails),
        **dict.fromkeys((D.ANIMALS_IMPORTED, D.ANIMALS_PROMOTED), ImportTally),
        **dict.fromkeys((D.CREATED_BY_ADMIN, D.CREATED_FROM_COMMAND_LINE, D.CREATED_BY_SIGN_ON), RoleDetails),
        **dict.fromkeys((D.ROLE_CHANGED, D.ROLE_CHANGED_BY_SIGN_ON), RoleDetails),
        **dict.fromkeys((D.SESSIONS_ENDED, D.SIGN_ON_LOGOUT, D.CODES_LEFT), Count),
        **dict.fromkeys((D.ENVIRONMENTS, D.ENVIRONMENTS_BY_SIGN_ON), EnvironmentsChange),
        D.PASSKEY: PasskeyDetails,
        D.SWITCHED_FROM: SwitchedFrom,
        D.RECORDED: RecordedDetails,
    },
}


def encode(payload: Payload) -> Json:
    """The JSON kept for `payload`: its code, then its values that are not None."""
    kept = ((field.name, getattr(payload, field.name)) for field in fields(payload))
    return {name: _plain(value) for name, value in kept if value is not None}


def decode(family: type[P], stored: Json | None) -> P | None:
    """The payload of `family` kept as `stored`; None for none, or for JSON that none of its codes keeps."""
    if not stored:
        return None
    codes: type[StrEnum] = get_type_hints(family)["code"]
    try:
        code = codes(str(stored.get("code")))
        kind = SHAPES[family].get(code, family)
        hints, build = get_type_hints(kind), cast(Callable[..., object], kind)
        named = [field.name for field in fields(kind) if field.name in stored and field.name != "code"]
        payload = build(code=code, **{name: _typed(hints[name], stored[name]) for name in named})
    except (ValueError, TypeError):
        return None
    return payload if isinstance(payload, family) else None


def _plain(value: object) -> JsonValue:
    if isinstance(value, frozenset):
        return EnvironmentSet.names(value)
    return value if isinstance(value, str | int | float | bool) else str(value)


def _typed(hint: object, value: JsonValue) -> object:
    """A stored value as the type its field says: an enum member, a set of environments, or as it is."""
    if hint == frozenset[Environment]:
        return EnvironmentSet.read(str(value))
    for kind in (hint, *get_args(hint)):
        if value is not None and isinstance(kind, type) and issubclass(kind, StrEnum):
            return kind(str(value))
    return value
