"""Typed records of the Pet Store v1 interface, checked as they are read."""

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from typing import Any

# The interface's own bounds, exported from this package so that nothing else writes them out.
PET_STATUSES = ("available", "pending", "sold")
LIMIT_MIN, LIMIT_MAX, LIMIT_DEFAULT = 1, 100, 20  # listPets' `limit`
# getPet is deprecated; the interface removes it on this day (replacement: listPets).
GET_PET_REMOVAL = date(2030, 12, 5)
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


# What a store's name that quoted a credential is shown as: the record keeps its row, without the text.
WITHHELD_NAME = "(name withheld: the pet store's text quoted a credential)"
# Whether a text from the store quotes its key (the client's `secret_guard.SecretGuard`).
Guard = Callable[[str], bool]


class ShapeError(ValueError):
    """A JSON value does not have the shape of the interface's record."""


@dataclass(frozen=True, slots=True)
class Pet:
    """An animal, as the store describes it; `status` is None when the store sent none."""

    id: int
    name: str
    category_id: int
    status: str | None = None


def _int64(record: dict[str, Any], field: str) -> int:
    value = record.get(field)
    # bool is an int in Python but not an integer in JSON.
    if type(value) is not int or not INT64_MIN <= value <= INT64_MAX:
        raise ShapeError(f"{field} is not a 64-bit integer")
    return value


def parse_pet(record: object, quotes: Guard) -> Pet:
    """A `Pet` from one decoded JSON record, or `ShapeError`; a name that `quotes` a secret is withheld."""
    if not isinstance(record, dict):
        raise ShapeError("a record is not a JSON object")
    name = record.get("name")
    if not isinstance(name, str):
        raise ShapeError("name is not a string")
    status = record.get("status")
    if status is not None and status not in PET_STATUSES:
        raise ShapeError("status is not one of the interface's values")
    # A lone surrogate escape (\ud800) is valid JSON but cannot be rendered; show a replacement.
    name = name.encode("utf-8", "replace").decode("utf-8")
    if quotes(name):
        name = WITHHELD_NAME
    return Pet(id=_int64(record, "id"), name=name, category_id=_int64(record, "categoryId"), status=status)


def parse_pets(value: object, quotes: Guard) -> list[Pet]:
    """A list of `Pet` from a decoded JSON array, or `ShapeError`; each name that `quotes` a secret is withheld on
    its own row."""
    if not isinstance(value, list):
        raise ShapeError("the answer is not a JSON array")
    # A name that quotes a secret quotes it in the names read together too: read them so once, and each name on its
    # own only when they do (a page of names chosen to be expensive then costs about what a plain one does:
    # docs/performance.md, "The key guard's cost").
    names = [record.get("name") for record in value if isinstance(record, dict)]
    if not quotes("\n".join(name for name in names if isinstance(name, str))):
        quotes = _quotes_nothing
    return [parse_pet(record, quotes) for record in value]


def _quotes_nothing(_text: str) -> bool:
    return False


@dataclass(frozen=True, slots=True)
class DescribedOperation:
    """What an API description says of one operation: its stability marker and deprecation."""

    operation_id: str
    stability: str | None
    deprecated: bool


_OPERATION_ID = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")


def parse_operations(document: object, quotes: Guard) -> dict[str, DescribedOperation]:
    """The operations of an OpenAPI description, by operationId, or `ShapeError`; a stability marker that
    `quotes` a secret is dropped."""
    paths = document.get("paths") if isinstance(document, dict) else None
    if not isinstance(paths, dict):
        raise ShapeError("the description has no paths")
    operations: dict[str, DescribedOperation] = {}
    for path_item in paths.values():
        for operation in path_item.values() if isinstance(path_item, dict) else ():
            # Only plain identifiers: the description is the store's text, shown to admins.
            if isinstance(operation, dict) and _OPERATION_ID.fullmatch(str(operation.get("operationId"))):
                stability = operation.get("x-stability")
                operations[operation["operationId"]] = DescribedOperation(
                    operation["operationId"],
                    stability if isinstance(stability, str) and not quotes(stability) else None,
                    operation.get("deprecated") is True,
                )
    return operations
