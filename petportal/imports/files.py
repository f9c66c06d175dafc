"""Reading an uploaded CSV file of animals into rows, each checked as the add form checks one animal.

A file is refused whole (`FileRefused`, nothing stored) when it cannot be read as the CSV the page asks
for: too large, too many rows, binary, not UTF-8, or without the header. A row that can be read but
would not pass the add form is kept, with the reasons, and never sent.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass

from werkzeug.datastructures import MultiDict

from ..catalog.browse import folded
from ..catalog.forms import AnimalForm
from ..petstore import PET_STATUSES
from ..reading import ASCII_SPACE, WHOLE_NUMBER

FILE_MAX_BYTES = 1024 * 1024
ROWS_MAX = 1000
HEADER = ("name", "categoryId", "status")


class FileRefused(ValueError):
    """The file as a whole cannot be imported; the message says why, in words for the person who sent it."""


class RowForm(AnimalForm):
    """The add form's fields and checks, filled from one row of a file."""

    class Meta:
        csrf = False


@dataclass(frozen=True)
class Row:
    """One animal read from the file: what it said, what the add form made of it, and why it is refused."""

    line: int
    name: str
    category: str
    category_id: int | None
    status: str | None
    problems: tuple[str, ...]


def read(raw: bytes, labels: dict[str, int]) -> list[Row]:
    """The rows of an uploaded file, in order; `labels` maps each category label, folded, to its id."""
    text = _text(raw)
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    rows: list[Row] = []
    header_seen = False
    try:
        for cells in reader:
            if not any(cell.strip() for cell in cells):
                continue  # a blank line
            if not header_seen:
                _check_header(cells)
                header_seen = True
                continue
            if len(rows) == ROWS_MAX:
                raise FileRefused(
                    f"The file has more than {ROWS_MAX:,} animals. Split it into files of {ROWS_MAX:,} or fewer."
                )
            rows.append(_row(reader.line_num, cells, labels))
    except csv.Error as error:
        raise FileRefused(f"Line {reader.line_num} cannot be read as CSV ({error}).") from None
    if not header_seen:
        raise FileRefused("The file is empty. Its first line must be the header name,categoryId,status.")
    if not rows:
        raise FileRefused("The file has a header but no animals.")
    return rows


def _text(raw: bytes) -> str:
    if len(raw) > FILE_MAX_BYTES:
        raise FileRefused(f"The file is larger than {FILE_MAX_BYTES // 1024 // 1024} MB. Split it into smaller files.")
    if not raw.strip():
        raise FileRefused("The file is empty. Its first line must be the header name,categoryId,status.")
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise FileRefused("This file is UTF-16 (Excel's “Unicode Text”). Save it as “CSV UTF-8” instead.")
    if b"\x00" in raw:
        raise FileRefused("This is not a CSV text file (it holds binary data). Export the sheet as CSV, UTF-8.")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = raw[: error.start].count(b"\n") + 1
        raise FileRefused(
            f"The file is not UTF-8 text (line {line} holds a byte UTF-8 does not allow). Save it as CSV, UTF-8."
        ) from None


def _check_header(cells: list[str]) -> None:
    found = tuple(cell.strip().lstrip("\ufeff") for cell in cells)  # a second BOM, left by a bad export
    if found != HEADER:
        shown = ",".join(found)[:80]
        raise FileRefused(f"The first line must be the header name,categoryId,status, not “{shown}”.")


def _row(line: int, cells: list[str], labels: dict[str, int]) -> Row:
    if len(cells) != len(HEADER):
        name = cells[0].strip() if cells else ""
        problem = f"This line has {len(cells)} values; each animal needs 3: name, categoryId, status."
        return Row(line, name, ",".join(cells[1:]).strip(), None, None, (problem,))
    # ASCII padding only, as the number reader takes it: "\u00a05" is no category id here either.
    name, category, status = (cell.strip(ASCII_SPACE) for cell in cells)
    status = status.lower()
    category_id_text = category if WHOLE_NUMBER.fullmatch(category) else str(labels.get(folded(category), ""))
    form = RowForm(formdata=MultiDict({"name": name, "category_id": category_id_text, "status": status}))
    form.validate()
    problems = list(form.name.errors)
    if form.category_id.errors:
        problems.append(_category_problem(category, form.category_id.errors))
    if form.status.errors:
        problems.append(f"The status must be empty or one of {', '.join(PET_STATUSES)}, not “{status[:20]}”.")
    category_id = form.category_id.data if not form.category_id.errors else None
    return Row(line, name, category, category_id, status or None, tuple(problems))


def _category_problem(category: str, errors: list[str]) -> str:
    if not category:
        return "Enter the category id, a whole number, or a category label."
    if not WHOLE_NUMBER.fullmatch(category):
        return f"“{category[:40]}” is neither a category id nor the label of a category."
    return errors[0]
