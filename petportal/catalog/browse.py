"""Search and sort within the animals one listPets call returned: the API offers neither."""

from __future__ import annotations

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
# The characters whose folding is kept once made: the assigned ones of the BMP and the Supplementary Multilingual
# Plane (78,614 in Python 3.11's Unicode). Any other (unassigned, private use, surrogate, or beyond) is folded each time
# it comes: whatever characters names and searches bring, the foldings hold no more than those.
_FOLDED_PLANES = 0x20000
_NOT_KEPT = frozenset(("Cn", "Co", "Cs"))


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
    return text.lower() if text.isascii() else text.translate(_FOLDINGS)


class _Foldings(dict[int, str | int]):
    """Each character's folding, by code point, made the first time a name holds the character and kept (a character
    that folds to itself as its code point): a worker keeps only the characters its names use, not a table of all
    of them (docs/performance.md, "Tables made once"). Threads that fold a new character at once make the same."""

    def __missing__(self, code: int) -> str | int:
        char = chr(code)
        decomposed = unicodedata.normalize("NFKD", char)
        folding = "".join(part for part in decomposed if not unicodedata.combining(part)).casefold()
        reading = folding if len(folding) <= LONGEST_FOLDING and folding != char else code
        if code < _FOLDED_PLANES and unicodedata.category(char) not in _NOT_KEPT:
            self[code] = reading
        return reading


_FOLDINGS = _Foldings()


def _category_order(category_id: int, labels: Mapping[int, str]) -> tuple[int, str, int]:
    label = labels.get(category_id)
    return (0, folded(label), category_id) if label is not None else (1, "", category_id)
