"""An import's reasons are kept as codes and put into words when shown, in the visitor's language; results.csv,
a file for scripts, keeps them in English. The audit page names its actions the same way."""

import csv
import io

from babel.messages.catalog import Catalog
from babel.messages.mofile import write_mo

from petportal.admin import audit_log
from petportal.data.models import AuditAction, ImportRow
from petportal.extensions import db
from petportal.imports import reasons

from support.helpers import upload
from support.portal import csrf_token

FILE = (
    "name,categoryId,status\r\n"
    "Rex Junior,1,available\r\n"  # not a copy of the sample Rex, which would be left out
    "Bad Id,abc,available\r\n"
    ",5,\r\n"
    "Too,many,cells,here\r\n"
    "Bad Status,3,lost\r\n"
)
# A few of the catalog's messages in German, as a translator would write them.
GERMAN = {
    "“%(category)s” is neither a category id nor the label of a category.": (
        "„%(category)s“ ist weder eine Kategorie-ID noch die Bezeichnung einer Kategorie."
    ),
    "Enter the animal's name.": "Gib den Namen des Tiers ein.",
    (
        "This line has %(num)d value; each animal needs 3: name, categoryId, status.",
        "This line has %(num)d values; each animal needs 3: name, categoryId, status.",
    ): (
        "Diese Zeile hat %(num)d Wert; jedes Tier braucht 3: name, categoryId, status.",
        "Diese Zeile hat %(num)d Werte; jedes Tier braucht 3: name, categoryId, status.",
    ),
    "login failed": "Anmeldung fehlgeschlagen",
}


def german_portal(make_portal, tmp_path):
    """The portal with a German catalog holding the messages above."""
    catalog = Catalog(locale="de")
    for message, translation in GERMAN.items():
        catalog.add(message, translation)
    folder = tmp_path / "translations" / "de" / "LC_MESSAGES"
    folder.mkdir(parents=True)
    with (folder / "messages.mo").open("wb") as file:
        write_mo(file, catalog)
    return make_portal(BABEL_TRANSLATION_DIRECTORIES=str(tmp_path / "translations"))


def stored_rows(app):
    with app.app_context():
        rows = list(db.session.scalars(db.select(ImportRow).order_by(ImportRow.position)))
        db.session.expunge_all()
        return rows


def reasons_in(app, rows, language):
    with app.test_request_context(headers={"Accept-Language": language}):
        return [reasons.row_reason(row) for row in rows]


def test_the_rows_keep_codes_and_each_visitor_reads_the_reasons_in_their_language(make_portal, tmp_path, auth_for):
    app = german_portal(make_portal, tmp_path)
    staff = auth_for(app, "staff")
    staff.set_cookie("language", "de")
    path = upload(staff, FILE).headers["Location"]
    rows = stored_rows(app)
    assert [row.reason for row in rows] == [
        None,
        {"code": "invalid", "values": 3, "columns": 3},
        {"code": "invalid", "values": 3, "columns": 3},
        {"code": "invalid", "values": 4, "columns": 3},
        {"code": "invalid", "values": 3, "columns": 3},
    ]
    assert reasons_in(app, rows, "en") == [
        None,
        "“abc” is neither a category id nor the label of a category.",
        "Enter the animal's name.",
        "This line has 4 values; each animal needs 3: name, categoryId, status.",
        "The status must be empty or one of available, pending, sold, not “lost”.",
    ]
    assert reasons_in(app, rows, "de")[:4] == [
        None,
        "„abc“ ist weder eine Kategorie-ID noch die Bezeichnung einer Kategorie.",
        "Gib den Namen des Tiers ein.",
        "Diese Zeile hat 4 Werte; jedes Tier braucht 3: name, categoryId, status.",
    ]
    # results.csv is for scripts: English, whatever the language of whoever downloads it.
    results = list(csv.DictReader(io.StringIO(staff.get(f"{path}/results.csv").text.lstrip("\ufeff"))))
    assert [row["message"] for row in results][1:4] == [
        "“abc” is neither a category id nor the label of a category.",
        "Enter the animal's name.",
        "This line has 4 values; each animal needs 3: name, categoryId, status.",
    ]


def test_a_refused_rows_reasons_stay_those_of_the_labels_it_was_read_with(portal_app, auth_for):
    staff = auth_for(portal_app, "staff")
    upload(staff, "name,categoryId,status\r\nBad Id,abc,available\r\n")
    admin = auth_for(portal_app, "admin")
    page = admin.get("/admin/categories").text
    fields = {"csrf_token": csrf_token(page), "environment": "production", "category_id": "9", "label": "abc"}
    assert admin.post("/admin/categories", data=fields).status_code == 303
    # Labelled since: the row was refused with the labels of its upload, and still says why.
    assert reasons_in(portal_app, stored_rows(portal_app), "en") == [
        "“abc” is neither a category id nor the label of a category."
    ]


def test_the_audit_page_names_actions_in_the_visitors_language(make_portal, tmp_path):
    app = german_portal(make_portal, tmp_path)
    with app.test_request_context(headers={"Accept-Language": "de"}):
        assert audit_log.action_label(AuditAction.LOGIN_FAILED) == "Anmeldung fehlgeschlagen"
    with app.test_request_context():
        assert audit_log.action_label(AuditAction.LOGIN_FAILED) == "login failed"
    assert app.jinja_env.globals["audit_action"] is audit_log.action_label
    # Every action the log can hold has its words: there is no fallback to the code.
    assert set(audit_log.ACTIONS) == set(AuditAction)


def test_a_row_the_store_refused_keeps_its_reason_as_a_code_and_is_read_in_the_visitors_language(portal_app):
    rows = [
        ImportRow(reason={"code": "refused", "said": "status", "message": "", "status": 400}),
        ImportRow(reason={"code": "refused", "said": "withheld", "message": "", "status": 400}),
        ImportRow(reason={"code": "refused", "said": "store_said", "message": "name is empty", "status": 400}),
        ImportRow(reason={"code": "refused", "message": "name is empty"}),  # kept before the store's reasons were codes
    ]
    assert reasons_in(portal_app, rows, "de") == [
        "Die Tierhandlung hat es abgelehnt: Die Tierhandlung antwortete mit Status 400.",
        "Die Tierhandlung hat es abgelehnt: Die Meldung der Tierhandlung wurde zurückgehalten: Sie enthielt "
        "Zugangsdaten.",
        "Die Tierhandlung hat es abgelehnt: name is empty",
        "Die Tierhandlung hat es abgelehnt: name is empty",
    ]


def test_a_row_left_out_as_a_copy_says_so_and_a_promoted_one_says_it_was_promoted(portal_app):
    """Both keep a production id in one shape: the copy must not read as "promoted before, never sent twice" beside
    the box that lets it be added anyway."""
    rows = [
        ImportRow(reason={"code": "duplicate", "pet_id": 2}),
        ImportRow(reason={"code": "promoted_before", "pet_id": 2}),
    ]
    assert reasons_in(portal_app, rows, "en") == [
        "The pet store already lists this animal (id 2): left out unless chosen.",
        "Promoted before: production has it as id 2. It is never sent twice.",
    ]
