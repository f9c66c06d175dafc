"""Reading an uploaded CSV file of animals into rows, each checked as the add form checks one animal.

A file is refused whole (`FileRefused`, nothing stored) when it cannot be read as the CSV the page asks for: too
large, too many rows, binary, not UTF-8, or without the header. A row that can be read but would not pass the add
form is kept, and never sent; its reasons are not kept (they are words): the import's page asks `refusals` again.
"""

import csv
import io
from collections.abc import Mapping
from dataclasses import dataclass, replace

from flask_babel import format_number, ngettext
from flask_babel import gettext as _
from werkzeug.datastructures import MultiDict

from petportal.catalog import duplicates
from petportal.catalog.adding import NewAnimal
from petportal.catalog.browse import folded
from petportal.catalog.forms import AnimalForm
from petportal.data.models import RowReason
from petportal.data.payloads import PromotedBefore, RowReasonPayload
from petportal.petstore import PET_STATUSES
from petportal.web.readers import ASCII_SPACE, WHOLE_NUMBER

FILE_MAX_BYTES = 1024 * 1024
ROWS_MAX = 1000
HEADER = ("name", "categoryId", "status")
# The list's own export (`/animals.csv`), taken as it is: its `id` and `category` (the label) are not read.
EXPORT_HEADER = ("id", "name", "categoryId", "category", "status")
# Where each layout keeps the name, the category id and the status.
LAYOUTS = {HEADER: (0, 1, 2), EXPORT_HEADER: (1, 2, 4)}


class FileRefused(ValueError):
    """The file as a whole cannot be imported; the message says why, for the person who sent it, in their language."""


@dataclass(frozen=True)
class Row:
    """One animal read from the file: what it said, what the add form made of it, how many values its line
    held and how many its header named (`columns`), and why it is refused."""

    line: int
    name: str
    category: str
    category_id: int | None
    status: str | None
    values: int
    columns: int
    problems: tuple[str, ...]
    # A promotion's row: the animal's id on staging, and why it is left out before any check (`RowReason`).
    source_id: int | None = None
    left_out: RowReasonPayload | None = None


def read(raw: bytes, labels: dict[str, int]) -> list[Row]:
    """The rows of an uploaded file, in order; `labels` maps each category label, folded, to its id."""
    reader = csv.reader(io.StringIO(_text(raw), newline=""), strict=True)
    rows: list[Row] = []
    header: tuple[str, ...] | None = None
    try:
        for cells in reader:
            if not any(cell.strip() for cell in cells):
                continue  # a blank line
            if header is None:
                header = _header(cells)
                continue
            if len(rows) == ROWS_MAX:
                raise FileRefused(
                    _(
                        "The file has more than %(count)s animals. Split it into files of %(count)s or fewer.",
                        count=format_number(ROWS_MAX),
                    )
                )
            rows.append(_row(reader.line_num, cells, labels, header))
    except csv.Error as error:
        # Python's own words for what is wrong with the line: kept as they are.
        message = _("Line %(line)s cannot be read as CSV (%(error)s).", line=reader.line_num, error=str(error))
        raise FileRefused(message) from None
    if header is None:
        raise FileRefused(_("The file is empty. Its first line must be the header name,categoryId,status."))
    if not rows:
        raise FileRefused(_("The file has a header but no animals."))
    return rows


def _text(raw: bytes) -> str:
    if len(raw) > FILE_MAX_BYTES:
        message = _(
            "The file is larger than %(megabytes)s MB. Split it into smaller files.",
            megabytes=FILE_MAX_BYTES // 1024 // 1024,
        )
        raise FileRefused(message)
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise FileRefused(_("This file is UTF-16 (Excel's “Unicode Text”). Save it as “CSV UTF-8” instead."))
    if b"\x00" in raw:
        raise FileRefused(_("This is not a CSV text file (it holds binary data). Export the sheet as CSV, UTF-8."))
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        message = _(
            "The file is not UTF-8 text (line %(line)s holds a byte UTF-8 does not allow). Save it as CSV, UTF-8.",
            line=raw[: error.start].count(b"\n") + 1,
        )
        raise FileRefused(message) from None


def _header(cells: list[str]) -> tuple[str, ...]:
    """The file's layout: the import's own header, or the list's export."""
    found = tuple(cell.strip().lstrip("\ufeff") for cell in cells)  # a second BOM, left by a bad export
    if found not in LAYOUTS:
        shown = ",".join(found)[:80]
        raise FileRefused(_("The first line must be the header name,categoryId,status, not “%(found)s”.", found=shown))
    return found


def left_out_copies(rows: list[Row], listed: Mapping[duplicates.Likeness, int]) -> list[Row]:
    """`rows`, each that would copy an animal the target store lists (`duplicates.listed`) left out unless chosen."""
    marked = []
    for row in rows:
        copy = None
        if not row.problems and row.left_out is None and row.category_id is not None:
            copy = duplicates.copy_of(NewAnimal(row.name, row.category_id, row.status), listed)
        marked.append(
            row if copy is None else replace(row, left_out=PromotedBefore(code=RowReason.DUPLICATE, pet_id=copy))
        )
    return marked


def animal_row(line: int, name: str, category_id: int, status: str | None) -> Row:
    """One animal read from another environment (a promotion), through the same checks as a file's row."""
    return _row(line, [name, str(category_id), status or ""], {}, HEADER)


def _row(line: int, cells: list[str], labels: dict[str, int], header: tuple[str, ...]) -> Row:
    columns = len(header)
    if len(cells) != columns:
        name, category = cells[0].strip() if cells else "", ",".join(cells[1:]).strip()
        refused = tuple(refusals(name, category, None, None, len(cells), columns))
        return Row(line, name, category, None, None, len(cells), columns, refused)
    # ASCII padding only, as the number reader takes it: "\u00a05" is no category id here either.
    name, category, status = (cells[position].strip(ASCII_SPACE) for position in LAYOUTS[header])
    status = status.lower()
    form = _checked(name, category, labels.get(folded(category)), status)
    if not form.name.errors:  # a name that passes is kept as the form read it: what was checked is what is sent
        name = form.name.data
    category_id = form.category_id.data if not form.category_id.errors else None
    problems = tuple(_problems(form, category, status))
    return Row(line, name, category, category_id, status or None, columns, columns, problems)


def refusals(
    name: str, category: str, category_id: int | None, status: str | None, values: int, columns: int
) -> list[str]:
    """Why the portal refuses a row (nothing when it passes), in the request's language: the add form's checks, as
    `read` made them (`category_id`: as its category was read, `values` and `columns`: its line's and its header's)."""
    if values != columns == len(HEADER):
        return [
            ngettext(
                "This line has %(num)d value; each animal needs 3: name, categoryId, status.",
                "This line has %(num)d values; each animal needs 3: name, categoryId, status.",
                values,
            )
        ]
    if values != columns:
        return [
            ngettext(
                "This line has %(num)d value; each animal of the list's export needs 5: id, name, categoryId, "
                "category, status.",
                "This line has %(num)d values; each animal of the list's export needs 5: id, name, categoryId, "
                "category, status.",
                values,
            )
        ]
    return _problems(_checked(name, category, category_id, status or ""), category, status or "")


def _checked(name: str, category: str, labelled: int | None, status: str) -> AnimalForm:
    """The row's values through the add form's fields; `labelled`: the id of the label `category` names, if any."""
    category_id_text = category if WHOLE_NUMBER.fullmatch(category) else str(labelled if labelled is not None else "")
    values = MultiDict({"name": name, "category_id": category_id_text, "status": status})
    form = AnimalForm(formdata=values, meta={"csrf": False})
    form.validate()
    return form


def _problems(form: AnimalForm, category: str, status: str) -> list[str]:
    problems = [str(error) for error in form.name.errors]
    if form.category_id.errors and not category:
        problems.append(_("Enter the category id, a whole number, or a category label."))
    elif form.category_id.errors and not WHOLE_NUMBER.fullmatch(category):
        problems.append(
            _("“%(category)s” is neither a category id nor the label of a category.", category=category[:40])
        )
    elif form.category_id.errors:
        problems.append(str(form.category_id.errors[0]))
    if form.status.errors:
        problems.append(
            _(
                "The status must be empty or one of %(statuses)s, not “%(status)s”.",
                statuses=", ".join(PET_STATUSES),
                status=status[:20],
            )
        )
    return problems
