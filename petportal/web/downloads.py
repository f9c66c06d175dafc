"""The portal's CSV downloads (the animal list, the audit log, an import's results), written a row at a time as
they are sent, every text made safe to open in a spreadsheet.

Flask sends a streamed body after the request has ended: its unit of work has committed and its database session
has been removed (`stream_with_context` only pushes the request's contexts again around the generator). So the
rows a view hands over must not be objects of that session (they are expired by the commit, then detached), and
whatever they still read while the body is sent, they read themselves and never write (see unit_of_work). What
can fail before anything is sent (the pet store's answer, the first rows of the audit log) is read by the view,
so that it is answered with the portal's error page rather than with a download cut short.
"""

from __future__ import annotations

import csv
import re
import unicodedata
from collections.abc import Iterable, Iterator, Sequence

from flask import Response, stream_with_context

from petportal.petstore.errors import unread

# A spreadsheet runs a cell that starts with one of these as a formula (OWASP, "CSV Injection").
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
# Where a spreadsheet may start a cell inside a text: German and Spanish spreadsheets split a CSV line on `;` (and
# some on tabs), ignoring the quotes, and a name may hold a line break.
CELL_BREAKS = re.compile(r"([;,\t\r\n])")
# Excel reads a CSV file as UTF-8 only when it starts with a byte order mark.
BOM = "\ufeff"
# The language of the words in the downloads (an import's reasons, the audit log's actions and details): files are
# read by scripts and shared between people, so they read the same whoever asked for them.
FILE_LANGUAGE = "en"
# A cell as a view hands it over: a text, a number, or nothing (an empty cell).
Cell = str | int | None


def spreadsheet_safe(cell: Cell) -> Cell:
    """`cell` as a download writes it: a text that a spreadsheet would run as a formula starts with `'`, so it shows
    as the text it is; a number stays a number (a negative id is no formula). So does each part of a text that a
    spreadsheet could read as a cell of its own (after a `CELL_BREAKS` character)."""
    if not isinstance(cell, str):
        return cell
    parts = CELL_BREAKS.split(cell)  # the texts between breaks at even places, each break at the odd place between
    for place in range(2, len(parts), 2):
        if _runs(parts[place]):
            parts[place] = "'" + parts[place]
    text = "".join(parts)
    return "'" + text if cell.startswith(("\t", "\r")) or _runs(parts[0]) else text


def _runs(part: str) -> bool:
    """Whether a spreadsheet runs `part` as a formula: its first character that is not a space (of any width) or one
    nobody reads (a zero-width or other format character, a byte order mark, a control character, a combining mark, a
    blank filler: `unread`), read in its NFKC form (so the full-width equals
    sign U+FF1D is `=`), is one of `FORMULA_STARTS`."""
    for char in part:
        folded = unicodedata.normalize("NFKC", char)
        if folded.startswith(FORMULA_STARTS):
            return True
        if not (folded.isspace() or unread(char)):
            return False
    return False


def csv_download(filename: str, header: Sequence[str], rows: Iterable[Sequence[Cell]]) -> Response:
    """The attachment `filename`: `header`, then each of `rows`, written and sent one at a time (UTF-8 after a byte
    order mark, lines ending in CRLF as RFC 4180 has them). `rows` is read while the body is sent (see above)."""
    return Response(
        stream_with_context(_lines(header, rows)),
        mimetype="text/csv",
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )


class _Line:
    """What csv.writer writes to: each write hands the line back instead of keeping it."""

    def write(self, line: str) -> str:
        return line


def _lines(header: Sequence[str], rows: Iterable[Sequence[Cell]]) -> Iterator[str]:
    writer = csv.writer(_Line())
    yield BOM + writer.writerow(header)
    for row in rows:
        yield writer.writerow([spreadsheet_safe(cell) for cell in row])
