"""Search and sort within the animals one listPets call returned: the API offers neither."""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from petportal.petstore import Pet

SORTS = ("id", "name", "category", "status")
# Each order the list offers: a column, or a column with a leading "-" for the reverse order.
REVERSED = "-"
SORT_ORDERS = (*SORTS, *(REVERSED + key for key in SORTS))
# A character that folds to more than this many keeps its own form: a ligature of a phrase (U+FDFA is 18 letters under
# NFKD) is no spelling variant, and unfolded it costs a page no more than a letter does (bench/guard.py).
LONGEST_FOLDING = 3
# The characters `folded` looks up: the BMP and the Supplementary Multilingual Plane (any other stays as it is).
_FOLDED_PLANES = 0x20000
_BEYOND_TABLE = chr(_FOLDED_PLANES)
_MAKING = threading.Lock()
_FOLDINGS: list[tuple[str | int, ...]] = []  # the table, once made
_IN_TABLE = re.compile("[\x00-\U0001ffff]+")


class NamesQuoteSecret(Exception):
    """The names of a list, read one after another, quote a credential: the list is withheld whole."""


def read_together(animals: Sequence[Pet], quotes: Callable[[str], bool]) -> None:
    """Raise `NamesQuoteSecret` when the names of `animals`, read one after another in their order, quote a secret
    (`quotes`, the client's guard): a key split into names each too short to be caught on its own."""
    if len(animals) > 1 and quotes("\n".join(animal.name for animal in animals)):
        raise NamesQuoteSecret


def matching(animals: Iterable[Pet], text: str | None) -> list[Pet]:
    """The animals whose name contains `text`, ignoring case and spelling variants ("zoë" finds any "Zoë")."""
    if not text:
        return list(animals)
    wanted = folded(text)
    return [animal for animal in animals if wanted in folded(animal.name)]


def sorted_by(animals: Iterable[Pet], order: str, labels: Mapping[int, str]) -> list[Pet]:
    """`animals` in `order` (SORT_ORDERS); ties keep id order either way, an animal without a status is last in both
    orders of status, and labelled categories come first in label order, then the others by id (reversed too)."""
    key, reverse = order.removeprefix(REVERSED), order.startswith(REVERSED)
    by_id = sorted(animals, key=lambda animal: animal.id, reverse=reverse and key == "id")
    if key == "name":
        return sorted(by_id, key=lambda animal: folded(animal.name), reverse=reverse)
    if key == "category":
        return sorted(by_id, key=lambda animal: _category_order(animal.category_id, labels), reverse=reverse)
    if key == "status":
        given = sorted(
            (animal for animal in by_id if animal.status), key=lambda animal: animal.status or "", reverse=reverse
        )
        return given + [animal for animal in by_id if not animal.status]
    return by_id


def folded(text: str) -> str:
    """`text` as search compares it, character by character: NFKD, combining marks dropped ("Zoë" is "zoe"), then
    case folding ("Straße" is "strasse"), each to at most LONGEST_FOLDING. static/js/search.js folds the same way."""
    if text.isascii():
        return text.lower()
    if max(text) < _BEYOND_TABLE:
        return text.translate(_foldings())
    # Each run of characters the table holds translated on its own: one beyond it would raise, each time.
    return _IN_TABLE.sub(lambda part: part[0].translate(_foldings()), text)


def _foldings() -> tuple[str | int, ...]:
    """Each character's folding, by code point (a tuple translates faster than a dict), made at the first use; a
    character that folds to itself is kept as its code point (docs/performance.md, "Tables made once"). Threads that
    ask at once wait for one table, instead of each making its own, all held at once at a worker's peak."""
    if not _FOLDINGS:
        with _MAKING:
            if not _FOLDINGS:
                _FOLDINGS.append(_made_foldings())
    return _FOLDINGS[0]


def _made_foldings() -> tuple[str | int, ...]:
    foldings: list[str | int] = []
    for char in map(chr, range(_FOLDED_PLANES)):
        if unicodedata.is_normalized("NFKD", char):  # most characters (docs/performance.md, "Tables made once")
            folding = "" if unicodedata.combining(char) else char.casefold()
        else:
            decomposed = unicodedata.normalize("NFKD", char)
            folding = "".join(part for part in decomposed if not unicodedata.combining(part)).casefold()
        foldings.append(folding if len(folding) <= LONGEST_FOLDING and folding != char else ord(char))
    return tuple(foldings)


def _category_order(category_id: int, labels: Mapping[int, str]) -> tuple[int, str, int]:
    label = labels.get(category_id)
    return (0, folded(label), category_id) if label is not None else (1, "", category_id)
