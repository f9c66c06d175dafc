"""The audit log an admin can search: filters for who, what, environment and a UTC day range, kept in the URL; the
CSV of a filtered view is the page's rows; details in the reader's language (PRODUCT.md's /admin/audit rows)."""

import csv
import html
import io
import re
from datetime import UTC, datetime

import pytest

from petportal.data.models import AuditAction, AuditEntry
from petportal.extensions import db

BOM = "\ufeff"
# The log the tests read: (when, who, action, account, environment, details, count), oldest first.
SEEDED = [
    (
        datetime(2026, 2, 20, 9, 0, 0, tzinfo=UTC),
        "sam",
        "import_discarded",
        None,
        "production",
        {"code": "import_discarded", "import_id": "a" * 22, "filename": "cats.csv", "owner": "Rita_Moreno"},
        1,
    ),
    (datetime(2026, 3, 1, 23, 59, 59, tzinfo=UTC), "mallory", "login_failed", None, None, None, 4),
    (
        datetime(2026, 3, 2, 0, 0, 0, tzinfo=UTC),
        "admin",
        "environment_switched",
        None,
        "staging",
        {"code": "switched_from", "previous": "production"},
        1,
    ),
    (
        datetime(2026, 3, 2, 12, 0, 0, tzinfo=UTC),
        "admin",
        "role_changed",
        "robin",
        None,
        {"code": "role_changed", "previous": "staff", "role": "admin"},
        1,
    ),
    (
        datetime(2026, 3, 3, 23, 59, 59, tzinfo=UTC),
        "admin",
        "category_labelled",
        None,
        "production",
        {"code": "category_labelled", "category": 3, "label": "Fish"},
        1,
    ),
    (datetime(2026, 3, 4, 0, 0, 0, tzinfo=UTC), "robin", "login", None, None, None, 1),
]


@pytest.fixture
def seeded(make_portal, database_url):
    """The portal on each database, with the entries of SEEDED (and none other: the admin's login is added by
    `admin`)."""
    app = make_portal(SQLALCHEMY_DATABASE_URI=database_url)
    with app.app_context():
        for at, actor, action, target, environment, details, count in SEEDED:
            db.session.add(
                AuditEntry(
                    at=at,
                    actor=actor,
                    action=AuditAction(action),
                    target=target,
                    environment=environment,
                    details=details,
                    remote_addr="127.0.0.1",
                    count=count,
                )
            )
        db.session.commit()
    return app


@pytest.fixture
def admin(seeded, auth_for):
    return auth_for(seeded, "admin")


def page_rows(page):
    """The audit page's rows: each cell's text, the time as its machine-readable value."""
    body = page.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    rows = []
    for row in re.findall(r"<tr>(.*?)</tr>", body, re.DOTALL):
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.DOTALL)
        when = re.search(r'datetime="([^"]+)"', cells[0])[1]
        rows.append([when, *(html.unescape(re.sub(r"<[^>]+>", "", cell)) for cell in cells[1:])])
    return rows


def csv_rows(response):
    text = response.get_data(as_text=True)
    assert text.startswith(BOM)
    header, *rows = csv.reader(io.StringIO(text.removeprefix(BOM), newline=""))
    assert header == ["When (UTC)", "Who", "What", "Account", "Environment", "Details", "From"]  # in English too
    # The CSV's time, as the page's machine-readable one.
    return [[datetime.strptime(row[0], "%Y-%m-%d %H:%M:%S").strftime("%Y-%m-%dT%H:%M:%SZ"), *row[1:]] for row in rows]


def whose(rows):
    return [(row[1], row[2]) for row in rows]


# Each filter, and what the page shows for it (who, what), newest first.
FILTERS = [
    ({"actor": "mallory"}, [("mallory", "login failed")]),
    (
        {"actor": " admin "},
        [("admin", "category labelled"), ("admin", "role changed"), ("admin", "environment switched")],
    ),
    ({"action": "role_changed"}, [("admin", "role changed")]),
    ({"environment": "staging"}, [("admin", "environment switched")]),
    # Whole UTC days, both included: from 00:00:00 of the first to 23:59:59 of the last.
    (
        {"since": "2026-03-02", "until": "2026-03-03"},
        [("admin", "category labelled"), ("admin", "role changed"), ("admin", "environment switched")],
    ),
    ({"until": "2026-03-01"}, [("mallory", "login failed"), ("sam", "import discarded")]),
    ({"since": "2026-03-04", "action": "login", "actor": "robin"}, [("robin", "login")]),
    ({"since": "9999-12-31", "until": "9999-12-31"}, []),
    ({"actor": "nobody"}, []),
    # Part of a name, in any case: of who acted, of the account acted on, of the import's owner.
    ({"actor": "MALL"}, [("mallory", "login failed")]),
    ({"actor": "oBi"}, [("robin", "login"), ("admin", "role changed")]),
    ({"actor": "rita"}, [("sam", "import discarded")]),
    ({"actor": "_"}, [("sam", "import discarded")]),  # a wildcard of LIKE is a character like any other
]
# Filters the page refuses, and the field that says why.
REFUSED = [
    ({"actor": "x" * 81}, "actor"),
    ({"action": "nope"}, "action"),
    ({"environment": "testing"}, "environment"),
    ({"since": "2026-02-30"}, "since"),
    ({"since": "2026-3-1"}, "since"),
    ({"until": "\u0662\u0660\u0662\u0666-03-01"}, "until"),  # Arabic-Indic digits
    ({"since": "2026-03-04", "until": "2026-03-01"}, "until"),
]


def test_each_filter_shows_only_its_entries_and_the_csv_is_the_same_rows(admin):
    for query, shown in FILTERS:
        page = admin.get("/admin/audit", query_string=query)
        assert page.status_code == 200, query
        # The admin's own login of today is after every seeded entry.
        rows = [row for row in page_rows(page.text) if row[0] < "2026-03-05"] if shown else []
        assert whose(rows) == shown, query
        if not shown:
            assert "No entry matches this filter." in page.text
        # The page links to the CSV of what it shows, which has exactly the page's rows.
        link = html.unescape(re.search(r'<a href="([^"]*/admin/audit\.csv[^"]*)" download>', page.text)[1])
        assert link.startswith("/admin/audit.csv?") and all(f"{name}=" in link for name in query)
        download = admin.get(link)
        assert download.status_code == 200
        assert [row for row in csv_rows(download) if row[0] < "2026-03-05"] == rows, query


def test_the_csv_of_a_filtered_view_is_the_pages_rows_cell_for_cell(admin):
    page = admin.get("/admin/audit?since=2026-03-01&until=2026-03-04").text
    rows = page_rows(page)
    assert len(rows) == 5
    assert csv_rows(admin.get("/admin/audit.csv?since=2026-03-01&until=2026-03-04")) == rows
    assert rows[-1][5] == "4 attempts"  # the counted entry still says how many it stands for
    assert rows[1][4:6] == ["production", "category 3 labelled “Fish”"]


def test_an_invalid_filter_is_refused_next_to_its_field(portal_app, auth_for):
    admin = auth_for(portal_app, "admin")
    for query, field in REFUSED:
        page = admin.get("/admin/audit", query_string=query)
        assert page.status_code == 400, query
        assert f'id="{field}-error-1"' in page.text and f'aria-describedby="{field}-error-1"' in page.text
        assert "<tbody>" not in page.text
        download = admin.get("/admin/audit.csv", query_string=query)
        assert download.status_code == 400 and download.mimetype == "text/html", query


def test_the_pages_keep_the_filter_and_their_links_have_no_leading_whitespace(seeded, auth_for):
    with seeded.app_context():
        for number in range(30):
            db.session.add(AuditEntry(actor=f"visitor{number}", action=AuditAction.LOGIN_FAILED, environment=None))
        db.session.commit()
    admin = auth_for(seeded, "admin")
    first = admin.get("/admin/audit?action=login_failed").text
    assert len(page_rows(first)) == 25
    assert 'href="/admin/audit?page=2&amp;action=login_failed"' in first
    second = admin.get("/admin/audit?page=2&action=login_failed").text
    assert [row[2] for row in page_rows(second)] == ["login failed"] * 6
    assert 'href="/admin/audit?page=1&amp;action=login_failed"' in second
    assert not re.search(r'href="\s', first + second)
    # The form shows the filter it applies, and the select names each action in words.
    assert '<option selected value="login_failed">login failed</option>' in first


def test_a_german_reader_reads_the_details_in_german_and_the_csv_in_english(admin):
    admin.set_cookie("language", "de")
    page = admin.get("/admin/audit").text
    rows = page_rows(page)
    said = {row[2]: row[4:6] for row in rows}
    assert said["Umgebung umgeschaltet"] == ["Staging", "von Produktion zu Staging"]
    assert said["Kategorie benannt"] == ["Produktion", "Kategorie 3 heißt „Fish“"]
    assert said["Rolle geändert"] == ["", "von Mitarbeiter zu Administrator"]
    assert said["Anmeldung fehlgeschlagen"][1] == "4 Versuche"
    assert "from production to staging" not in page
    # The filter's choices are in German too; the values stay the codes.
    assert '<option value="environment_switched">Umgebung umgeschaltet</option>' in page
    assert '<option value="production">Produktion</option>' in page
    # The download is in the language of the portal's files, whoever asks (as an import's results.csv).
    english = {row[2]: row[4:6] for row in csv_rows(admin.get("/admin/audit.csv"))}
    assert english["environment switched"] == ["staging", "from production to staging"]
    assert english["role changed"] == ["", "from staff to admin"]
