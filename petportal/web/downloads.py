"""The portal's CSV downloads, written a row at a time as they are sent, every text made safe for spreadsheets.

A streamed body is sent after the request's unit of work has committed and its session was removed, so the rows
handed over must not be that session's objects, and read (never write) for themselves. What can fail before anything
is sent is read by the view, so it gets the error page rather than a download cut short.
"""

from __future__ import annotations

import csv
import re
import unicodedata
from collections.abc import Iterable, Iterator, Sequence

from flask import Response, stream_with_context

from petportal.secret_guard import unread

# A spreadsheet runs a cell that starts with one of these as a formula (OWASP, "CSV Injection").
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
# Where a spreadsheet may start a cell inside a text: some split on `;` or tabs ignoring quotes; names may hold breaks.
CELL_BREAKS = re.compile(r"([;,\t\r\n])")
# Excel reads a CSV file as UTF-8 only when it starts with a byte order mark.
BOM = "\ufeff"
# The language of the words in downloads: files are read by scripts and shared, so the same whoever asked.
FILE_LANGUAGE = "en"
Cell = str | int | None


def spreadsheet_safe(cell: Cell) -> Cell:
    """`cell` with `'` before a text, or a part after a `CELL_BREAKS` character, that a spreadsheet would run as a
    formula; a number stays a number."""
    if not isinstance(cell, str):
        return cell
    parts = CELL_BREAKS.split(cell)  # the texts between breaks at even places, each break at the odd place between
    for place in range(2, len(parts), 2):
        if _runs(parts[place]):
            parts[place] = "'" + parts[place]
    text = "".join(parts)
    return "'" + text if cell.startswith(("\t", "\r")) or _runs(parts[0]) else text


def _runs(part: str) -> bool:
    """Whether `part`'s first character that is neither a space nor `unread`, in NFKC form (U+FF1D is `=`), is one of
    `FORMULA_STARTS`."""
    for char in part:
        folded = unicodedata.normalize("NFKC", char)
        if folded.startswith(FORMULA_STARTS):
            return True
        if not (folded.isspace() or unread(char)):
            return False
    return False


def csv_download(filename: str, header: Sequence[str], rows: Iterable[Sequence[Cell]]) -> Response:
    """The attachment `filename`: `header`, then `rows` (read while the body is sent), UTF-8 with a BOM, CRLF lines."""
    return Response(
        stream_with_context(_lines(header, rows)),
        mimetype="text/csv",
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )


class _Line:
    def write(self, line: str) -> str:
        return line


def _lines(header: Sequence[str], rows: Iterable[Sequence[Cell]]) -> Iterator[str]:
    writer = csv.writer(_Line())
    yield BOM + writer.writerow(header)
    for row in rows:
        yield writer.writerow([spreadsheet_safe(cell) for cell in row])
