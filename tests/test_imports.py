"""Bulk imports from CSV files, against the real reference stores: preview, start, progress, results.

Each valid row becomes exactly one createPet, even when the import is started twice at once; bad files
are refused whole with the reason and nothing stored; a switch, a refused key or a silent store stops
the sending with a message, and it resumes where it stopped.
"""

import csv
import html
import io
import json
import re
import time
from datetime import timedelta

import pytest

from petportal.catalog import categories
from petportal.data.models import AuditEntry, BulkImport, ImportRow
from petportal.extensions import db
from petportal.running import demo

from support.helpers import PASSWORDS, REDIS_URL, AuthActions, SlowStore, at_once, creates, finished, press, upload
from support.portal import csrf_token
from support.servers import FaultServer, answer, delay, serve

BOM = "\ufeff"
MIXED = (
    BOM
    + "name,categoryId,status\r\n"
    + "Rex Junior,1,available\r\n"
    + "\r\n"
    + '"Tom, the tabby",2,\r\n'
    + "Bad Id,abc,available\r\n"
    + "Bad Status,3,lost\r\n"
    + "  \r\n"
    + "<script>alert('x')</script>,4,Pending\r\n"
    + "Labelled,Dogs,sold\r\n"
    + ",5,\r\n"
    + "Too,many,cells,here\r\n"
)
VALID = [
    ("Rex Junior", 1, "available"),
    ("Tom, the tabby", 2, None),
    ("<script>alert('x')</script>", 4, "pending"),
    ("Labelled", 7, "sold"),
]


def label_dogs(app):
    """An admin labels category 7 "Dogs" in production, through the labels page."""
    admin = app.test_client()
    AuthActions(admin).login("admin")
    page = admin.get("/admin/categories").text
    fields = {"csrf_token": csrf_token(page), "environment": "production", "category_id": "7", "label": "Dogs"}
    assert admin.post("/admin/categories", data=fields).status_code == 303


def imports_stored(app):
    with app.app_context():
        return db.session.query(BulkImport).count(), db.session.query(ImportRow).count()


def audit_entries(app, action):
    with app.app_context():
        return [entry for entry in db.session.scalars(db.select(AuditEntry)) if entry.action == action]


def test_the_preview_lists_every_row_with_the_reason_a_bad_one_is_refused_and_sends_nothing(
    portal_app, auth_for, production_store
):
    label_dogs(portal_app)
    staff = auth_for(portal_app, "staff")
    response = upload(staff, MIXED)
    assert response.status_code == 303
    path = response.headers["Location"]
    assert re.fullmatch(r"/animals/import/[A-Za-z0-9_-]{22}", path)
    page = staff.get(path).text
    assert "rows for <strong>production</strong>" in page
    assert "Nothing has been sent yet. 4 animals will be added to production" in page
    assert "4 rows will be refused" in page
    assert "“abc” is neither a category id nor the label of a category." in page
    assert "The status must be empty or one of available, pending, sold, not “lost”." in page
    assert "Enter the animal&#39;s name." in page
    assert "This line has 4 values; each animal needs 3" in page
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in page and "<script>alert(" not in page
    assert "Dogs · 7" in page
    assert "Add 4 animals to production" in page
    assert creates(production_store) == []
    assert staff.get(f"{path}.json").get_json() == {
        "state": "preview",
        "total": 8,
        "created": 0,
        "failed": 4,
        "unknown": 0,
    }


@pytest.mark.parametrize("category", ["\u0661", "\uff19", "1_000"])  # Arabic-Indic 1, full-width 9, 1_000
def test_digits_python_reads_but_people_do_not_type_are_refused_as_the_add_form_refuses_them(
    portal_app, auth_for, production_store, category
):
    staff = auth_for(portal_app, "staff")
    page = staff.get(upload(staff, f"name,categoryId,status\nRex,{category},\n").headers["Location"]).text
    assert f"“{category}” is neither a category id nor the label of a category." in page
    assert "1 row will be refused" in page


def test_a_category_written_in_the_readers_language_or_as_the_default_label_is_read(
    portal_app, auth_for, production_store
):
    """A German reader's file names categories as the German list shows them ("Hunde"), or by the default label."""
    with portal_app.app_context():
        categories.name("production", 7, "Dogs", actor="admin", own_labels={"de": "Hunde"})
        categories.name("production", 8, "Cats", actor="admin")
        db.session.commit()
    staff = auth_for(portal_app, "staff")
    staff.set_cookie("language", "de")
    path = upload(staff, "name,categoryId,status\nRex,hunde,\nMia,Cats,\nBo,Dogs,\n").headers["Location"]
    press(staff, path, "start")
    assert finished(staff, path)["created"] == 3
    assert sorted((sent["name"], sent["categoryId"]) for sent in creates(production_store)) == [
        ("Bo", 7),
        ("Mia", 8),
        ("Rex", 7),
    ]


def test_a_mixed_file_started_twice_at_once_gives_one_create_pet_per_valid_row(
    make_portal, database_url, auth_for, production_store
):
    portal_app = make_portal(SQLALCHEMY_DATABASE_URI=database_url)
    label_dogs(portal_app)
    first, second = auth_for(portal_app, "staff"), auth_for(portal_app, "staff")
    path = upload(first, MIXED).headers["Location"]
    tokens = [csrf_token(client.get(path).text) for client in (first, second)]

    def send(client, token, start):
        start.wait()
        return client.post(f"{path}/start", data={"csrf_token": token}).status_code

    assert at_once([(first, tokens[0]), (second, tokens[1])], send) == [303, 303]
    progress = finished(first, path)
    assert progress == {"state": "done", "total": 8, "created": 4, "failed": 4, "unknown": 0}
    sent = creates(production_store)
    assert sorted((s["name"], s["categoryId"], s.get("status")) for s in sent) == sorted(VALID)
    assert "Done." in first.get(path).text
    # Pressing start again, once done, sends nothing more.
    assert press(first, path, "start").status_code == 303
    assert len(creates(production_store)) == 4
    messages = html.unescape(first.get(path).text)
    assert "This import was already started." in messages


def test_the_results_csv_gives_every_row_its_outcome_and_each_new_animal_its_id(portal_app, auth_for, production_store):
    label_dogs(portal_app)
    staff = auth_for(portal_app, "staff")
    path = upload(staff, MIXED).headers["Location"]
    press(staff, path, "start")
    finished(staff, path)
    response = staff.get(f"{path}/results.csv")
    assert response.status_code == 200
    assert response.mimetype == "text/csv"
    assert "attachment" in response.headers["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(response.get_data(as_text=True).lstrip(BOM))))
    in_store = {animal["name"]: animal["id"] for animal in production_store.animals()}
    assert [row["line"] for row in rows] == ["2", "4", "5", "6", "8", "9", "10", "11"]
    created = {row["name"]: row for row in rows if row["outcome"] == "created"}
    assert set(created) == {name for name, _, _ in VALID}
    for name, row in created.items():
        assert int(row["id"]) == in_store[name]
    refused = [row for row in rows if row["outcome"] == "invalid"]
    assert len(refused) == 4 and all(row["message"] and not row["id"] for row in refused)


def test_an_import_is_audited_once_and_each_animal_once_and_listed_in_your_additions(
    portal_app, auth_for, production_store
):
    label_dogs(portal_app)
    staff = auth_for(portal_app, "staff")
    path = upload(staff, MIXED).headers["Location"]
    press(staff, path, "start")
    finished(staff, path)
    [started] = audit_entries(portal_app, "import_started")
    assert started.actor == "staff" and started.details["code"] == "import_started"
    assert started.details["owner"] == "staff"
    [entry] = audit_entries(portal_app, "animals_imported")
    assert entry.actor == "staff" and entry.environment == "production"
    assert {key: entry.details[key] for key in ("created", "refused", "unknown", "total")} == {
        "created": 4,
        "refused": 4,
        "unknown": 0,
        "total": 8,
    }
    added = audit_entries(portal_app, "animal_added")
    assert len(added) == 4 and all(entry.details["code"] == "animal_added_by_import" for entry in added)
    mine = staff.get("/animals/mine").text
    assert "Rex Junior" in mine and "Tom, the tabby" in mine


def spreadsheet_formula_is_text(value):
    return value.startswith("'=")


def test_a_name_a_spreadsheet_would_run_is_written_as_text_in_the_results(portal_app, auth_for, production_store):
    staff = auth_for(portal_app, "staff")
    path = upload(staff, 'name,categoryId,status\n=HYPERLINK("x"),3,\n').headers["Location"]
    press(staff, path, "start")
    finished(staff, path)
    [row] = list(csv.DictReader(io.StringIO(staff.get(f"{path}/results.csv").get_data(as_text=True).lstrip(BOM))))
    assert spreadsheet_formula_is_text(row["name"]) and row["categoryId"] == "3"
    assert creates(production_store)[0]["name"] == '=HYPERLINK("x")'


def test_an_import_sends_each_name_as_the_add_form_checked_it(portal_app, auth_for, production_store):
    # str.strip() (the add form's) removes more than ASCII padding: what the form checked is what is sent.
    staff = auth_for(portal_app, "staff")
    path = upload(staff, 'name,categoryId,status\n"\x1c=1",1,\n"\x0b+1",1,\n\u00a0Zoë\u3000,1,available\n')
    path = path.headers["Location"]
    press(staff, path, "start")
    finished(staff, path)
    assert sorted(pet["name"] for pet in creates(production_store)) == ["+1", "=1", "Zoë"]
    rows = list(csv.DictReader(io.StringIO(staff.get(f"{path}/results.csv").get_data(as_text=True).lstrip(BOM))))
    assert sorted(row["name"] for row in rows) == ["'+1", "'=1", "Zoë"]


@pytest.mark.parametrize(
    "content, reason",
    [
        (b"name,categoryId,status\n" + b"x" * (1024 * 1024), "larger than 1 MB"),
        ("name,categoryId,status\n" + "Rex,1,\n" * 1001, "more than 1,000 animals"),
        ("name,category,status\nRex,1,\n", "must be the header name,categoryId,status, not “name,category,status”"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "not a CSV text file"),
        ("name,categoryId,status\nRex,1,\n".encode("utf-16"), "This file is UTF-16"),
        ("name,categoryId,status\nZoë,1,\n".encode("latin-1"), "not UTF-8 text (line 2"),
        ("", "The file is empty"),
        ("name,categoryId,status\n\n", "a header but no animals"),
        ('name,categoryId,status\n"Rex,1,\n', "cannot be read as CSV"),
    ],
)
def test_a_file_that_cannot_be_imported_is_refused_whole_with_the_reason_and_nothing_is_stored(
    portal_app, auth_for, production_store, content, reason
):
    staff = auth_for(portal_app, "staff")
    response = upload(staff, content)
    assert response.status_code == 400
    assert reason in html.unescape(response.text)
    assert "Nothing was stored." in response.text
    assert imports_stored(portal_app) == (0, 0)
    assert creates(production_store) == []


def test_a_body_over_the_request_limit_is_a_clear_413_and_nothing_is_stored(portal_app, auth_for):
    staff = auth_for(portal_app, "staff")
    response = upload(staff, b"name,categoryId,status\n" + b"y" * (2 * 1024 * 1024))
    assert response.status_code == 413
    assert "larger than the portal accepts (1 MB at most)" in response.text
    assert imports_stored(portal_app) == (0, 0)


def test_no_file_is_asked_for_again(portal_app, auth_for):
    staff = auth_for(portal_app, "staff")
    token = csrf_token(staff.get("/animals/import").text)
    response = staff.post("/animals/import", data={"csrf_token": token}, content_type="multipart/form-data")
    assert response.status_code == 400 and "Choose a CSV file to upload." in response.text


def test_an_upload_without_the_csrf_token_is_refused(portal_app, auth_for):
    staff = auth_for(portal_app, "staff")
    response = staff.post(
        "/animals/import",
        data={"file": (io.BytesIO(b"name,categoryId,status\nRex,1,\n"), "a.csv")},
        content_type="multipart/form-data",
    )
    assert response.status_code == 400
    assert imports_stored(portal_app) == (0, 0)


def test_a_preview_can_be_discarded_and_then_is_gone(portal_app, auth_for, production_store):
    staff = auth_for(portal_app, "staff")
    path = upload(staff, "name,categoryId,status\nRex,1,\n").headers["Location"]
    response = press(staff, path, "discard")
    assert response.status_code == 303 and response.headers["Location"] == "/animals/import"
    assert "Nothing was sent." in staff.get("/animals/import").text
    assert staff.get(path).status_code == 404
    assert imports_stored(portal_app) == (0, 0)
    assert creates(production_store) == []
    admin = auth_for(portal_app, "admin")
    entry = (
        admin.get("/admin/audit").text.split('<td data-label="What">import discarded</td>', 1)[1].split("</tr>", 1)[0]
    )
    assert f"import {path.rsplit('/', 1)[1]} of “animals.csv” (uploaded by staff): preview discarded" in entry


def test_only_its_owner_and_admins_see_an_import_and_customers_none(portal_app, auth_for, client):
    staff = auth_for(portal_app, "staff")
    path = upload(staff, "name,categoryId,status\nRex,1,\n").headers["Location"]
    with portal_app.app_context():
        from petportal.data.models import User

        db.session.add(User(username="other", role="staff", password_hash=db.session.get(User, 1).password_hash))
        db.session.commit()
    other = portal_app.test_client()
    AuthActions(other).login("other", password=PASSWORDS["staff"])
    for suffix in ("", ".json", "/results.csv"):
        assert other.get(path + suffix).status_code == 404
        assert client.get(path + suffix).status_code == 302
    assert auth_for(portal_app, "admin").get(path).status_code == 200
    assert client.get("/animals/import").status_code == 302


def test_an_import_previewed_for_one_environment_is_not_started_in_another(portal_app, auth_for, production_store):
    staff = auth_for(portal_app, "staff")
    path = upload(staff, "name,categoryId,status\nRex,1,\n").headers["Location"]
    token = csrf_token(staff.get(path).text)
    with portal_app.app_context():
        from petportal.serving.choice import active_choice

        active_choice().set_active("staging")
        db.session.commit()
    response = staff.post(f"{path}/start", data={"csrf_token": token})
    assert response.status_code == 409
    assert "previewed for production, but the portal now serves staging. Nothing was sent." in response.text
    assert creates(production_store) == []


def test_a_switch_while_it_runs_stops_it_and_it_resumes_where_it_stopped(make_portal, auth_for, tmp_path):
    store = SlowStore(tmp_path, seconds=0.05)
    with serve(store) as origin, FaultServer() as staging:
        app = make_portal.over(origin + "/v1", staging.base_url, IMPORT_CONCURRENCY=1)
        staff = auth_for(app, "staff")
        rows = "".join(f"Pup {number},1,\n" for number in range(40))
        path = upload(staff, "name,categoryId,status\n" + rows).headers["Location"]
        press(staff, path, "start")
        while staff.get(f"{path}.json").get_json()["created"] < 3:
            time.sleep(0.02)
        with app.app_context():
            from petportal.serving.choice import active_choice

            active_choice().set_active("staging")
            db.session.commit()
        stopped = finished(staff, path)
        assert stopped["state"] == "stopped" and stopped["created"] < 40
        page = html.unescape(staff.get(path).text)
        assert "The portal switched from production to staging while this import ran." in page
        with app.app_context():
            active_choice().set_active("production")
            db.session.commit()
        time.sleep(1.1)  # every process reads the active environment at least once a second
        press(staff, path, "start")
        assert finished(staff, path) == {"state": "done", "total": 40, "created": 40, "failed": 0, "unknown": 0}
        assert sorted(store.names) == sorted(f"Pup {number}" for number in range(40))


@pytest.mark.parametrize(
    "fault, message, unknown",
    [
        (answer(401, {"code": "no", "message": "no"}), "The pet store refused the portal&#39;s key for production.", 0),
        # 429 and 503 may come from a gateway after the store got the call; a store that hangs may have got it too.
        (answer(429, {"code": "slow", "message": "down"}), "gave no usable answer for a row", 1),
        (answer(503, {"code": "no", "message": "no"}), "gave no usable answer for a row, so nothing more was sent", 1),
        (delay(1.5, answer(201, {"id": 40, "name": "Rex", "categoryId": 1})), "gave no usable answer for a row", 1),
    ],
    ids=["401", "429", "503", "hang"],
)
def test_a_refused_key_or_a_silent_store_pauses_the_import_until_it_is_resumed(
    make_portal, auth_for, fault_server, fault, message, unknown
):
    app = make_portal.over(fault_server.base_url, fault_server.base_url, IMPORT_CONCURRENCY=1, UPSTREAM_TIMEOUT=1.0)
    staff = auth_for(app, "staff")
    path = upload(staff, "name,categoryId,status\nRex,1,\nMia,2,\nZed,3,\n").headers["Location"]
    fault_server.script(fault)
    press(staff, path, "start")
    paused = finished(staff, path)
    assert paused == {"state": "paused", "total": 3, "created": 0, "failed": 0, "unknown": unknown}
    assert fault_server.methods().count("POST") == 1, "it went on sending after the first failure"
    page = staff.get(path).text
    remaining = 3 - unknown
    assert message in page and f"Resume: send the {remaining} remaining to production" in page
    fault_server.script(answer(201, {"id": 41, "name": "Mia", "categoryId": 2}))
    press(staff, path, "start")
    done = finished(staff, path)
    assert done == {"state": "done", "total": 3, "created": remaining, "failed": 0, "unknown": unknown}
    sent = [json.loads(request.body)["name"] for request in fault_server.received if request.method == "POST"]
    # Refused before any work (401), Rex is sent again on resume; with no usable answer, never.
    assert sent == (["Rex", "Mia", "Zed"] if unknown else ["Rex", "Rex", "Mia", "Zed"])


def test_a_store_that_refuses_connections_pauses_the_import_with_every_row_kept_to_send(make_portal, auth_for):
    with FaultServer() as gone:
        closed = gone.base_url
        app = make_portal.over(closed, closed)
        staff = auth_for(app, "staff")
        gone.script(answer(200, []))  # the listPets that looks for copies, before the store goes away
        path = upload(staff, "name,categoryId,status\nRex,1,\nMia,2,\n").headers["Location"]
    press(staff, path, "start")
    assert finished(staff, path) == {"state": "paused", "total": 2, "created": 0, "failed": 0, "unknown": 0}
    page = staff.get(path).text
    assert "The pet store of production stopped answering." in page
    assert "Resume: send the 2 remaining to production" in page


def test_two_imports_in_one_process_share_its_places_without_pausing_each_other(make_portal, auth_for, tmp_path):
    store = SlowStore(tmp_path, seconds=0.1)
    with serve(store) as origin, FaultServer() as staging:
        app = make_portal.over(origin + "/v1", staging.base_url, IMPORT_CONCURRENCY=2)
        staff = auth_for(app, "staff")
        paths = [
            upload(staff, "name,categoryId,status\n" + "".join(f"{prefix}{n},1,\n" for n in range(6))).headers[
                "Location"
            ]
            for prefix in ("Ant", "Bee")
        ]
        for path in paths:
            press(staff, path, "start")
        for path in paths:
            assert finished(staff, path) == {"state": "done", "total": 6, "created": 6, "failed": 0, "unknown": 0}
        assert sorted(store.names) == sorted(f"{prefix}{n}" for prefix in ("Ant", "Bee") for n in range(6))


def test_a_preview_left_for_a_day_is_deleted_with_its_rows_at_the_next_upload(portal_app, auth_for):
    staff = auth_for(portal_app, "staff")
    old = upload(staff, "name,categoryId,status\nRex,1,\nMia,2,\n").headers["Location"].rsplit("/", 1)[1]
    with portal_app.app_context():
        db.session.get(BulkImport, old).created_at -= timedelta(days=1, minutes=1)
        db.session.commit()
    upload(staff, "name,categoryId,status\nZed,3,\n")
    with portal_app.app_context():
        assert db.session.get(BulkImport, old) is None
        assert db.session.query(ImportRow).filter_by(import_id=old).count() == 0
    assert imports_stored(portal_app) == (1, 1)


def test_a_preview_left_for_a_day_is_gone_from_your_imports_and_a_younger_one_stays(make_portal, auth_for, clock):
    """Unstarted previews piled up under "Your imports" until the next upload: a day after it was made, nobody
    having started it, a preview is gone from the list and from the database, and its page is not found. (Each
    visit logs in afresh: a day idle ends a login.)"""
    app = make_portal(CLOCK=clock)
    old = upload(auth_for(app, "staff"), "name,categoryId,status\nRex,1,\n", filename="old-one.csv")
    clock.advance(hours=23)
    staff = auth_for(app, "staff")
    young = upload(staff, "name,categoryId,status\nMia,2,\n", filename="young-one.csv")
    listed = staff.get("/animals/import").text
    assert "old-one.csv" in listed and "young-one.csv" in listed
    clock.advance(hours=1, minutes=1)
    staff = auth_for(app, "staff")
    listed = staff.get("/animals/import").text
    assert "old-one.csv" not in listed
    assert "young-one.csv" in listed
    assert imports_stored(app) == (1, 1)
    assert staff.get(old.headers["Location"]).status_code == 404
    assert staff.get(young.headers["Location"]).status_code == 200


def test_a_preview_left_for_a_day_cannot_be_opened_or_started(make_portal, auth_for, clock, production_store):
    app = make_portal(CLOCK=clock)
    path = upload(auth_for(app, "staff"), "name,categoryId,status\nRex Once,1,\n").headers["Location"]
    clock.advance(days=1, minutes=1)
    staff = auth_for(app, "staff")
    assert staff.get(path).status_code == 404
    assert (
        staff.post(f"{path}/start", data={"csrf_token": csrf_token(staff.get("/animals/import").text)}).status_code
        == 404
    )
    assert "Rex Once" not in [animal["name"] for animal in production_store.animals()]
    assert imports_stored(app) == (0, 0)


def test_rows_the_store_refuses_are_kept_with_its_reason_and_can_be_sent_again(make_portal, auth_for, fault_server):
    app = make_portal.over(fault_server.base_url, fault_server.base_url)
    staff = auth_for(app, "staff")
    path = upload(staff, "name,categoryId,status\nRex,1,\n").headers["Location"]
    fault_server.script(answer(400, {"code": "invalid", "message": "Category 1 is closed <b>today</b>"}))
    press(staff, path, "start")
    assert finished(staff, path) == {"state": "done", "total": 1, "created": 0, "failed": 1, "unknown": 0}
    page = staff.get(path).text
    assert "The pet store refused it: Category 1 is closed &lt;b&gt;today&lt;/b&gt;" in page
    fault_server.script(answer(201, {"id": 9, "name": "Rex", "categoryId": 1}))
    assert press(staff, path, "retry").status_code == 303
    assert finished(staff, path) == {"state": "done", "total": 1, "created": 1, "failed": 0, "unknown": 0}


def test_a_row_without_a_usable_answer_is_unknown_listed_apart_and_never_resent(make_portal, auth_for, fault_server):
    app = make_portal.over(fault_server.base_url, fault_server.base_url)
    staff = auth_for(app, "staff")
    path = upload(staff, "name,categoryId,status\nRex,1,\n").headers["Location"]
    fault_server.script(answer(200, b"not json"))
    press(staff, path, "start")
    assert finished(staff, path) == {"state": "done", "total": 1, "created": 0, "failed": 0, "unknown": 1}
    page = staff.get(path).text
    assert "Outcome unknown: check these" in page and "/animals?q=Rex" in page
    press(staff, path, "start")
    press(staff, path, "retry")
    assert fault_server.methods().count("POST") == 1


def test_the_progress_page_has_a_bar_that_a_script_or_a_refresh_updates(make_portal, auth_for, tmp_path):
    store = SlowStore(tmp_path, seconds=0.2)
    with serve(store) as origin, FaultServer() as staging:
        app = make_portal.over(origin + "/v1", staging.base_url, IMPORT_CONCURRENCY=1)
        staff = auth_for(app, "staff")
        path = upload(staff, "name,categoryId,status\nA,1,\nB,1,\nC,1,\n").headers["Location"]
        press(staff, path, "start")
        page = staff.get(path).text
        assert re.search(r'<progress id="import-bar" [^>]*max="3"', page)
        assert 'src="/static/js/import.js"' in page
        assert '<noscript><meta http-equiv="refresh" content="5"></noscript>' in page
        finished(staff, path)
        done = staff.get(path).text
        assert 'value="3"' in done and "import.js" not in done
    assert "/animals/import" in staff.get("/animals/new").text


def test_with_redis_an_import_waits_for_a_worker_says_so_and_the_worker_sends_it(
    make_portal, auth_for, production_store
):
    if not REDIS_URL:
        pytest.skip("PETPORTAL_TEST_REDIS_URL is not set: no Redis to queue imports in")
    app = make_portal(REDIS_URL=REDIS_URL)
    staff = auth_for(app, "staff")
    path = upload(staff, "name,categoryId,status\nRex,1,\nMia,2,\n").headers["Location"]
    assert press(staff, path, "start").status_code == 303
    page = staff.get(path).text
    assert "Waiting to be sent" in page and "no import worker is running" in page
    assert staff.get(f"{path}.json").get_json()["state"] == "queued"
    assert creates(production_store) == []
    result = app.test_cli_runner().invoke(args=["imports", "worker", "--burst"])
    assert result.exit_code == 0, result.output
    assert staff.get(f"{path}.json").get_json() == {
        "state": "done",
        "total": 2,
        "created": 2,
        "failed": 0,
        "unknown": 0,
    }
    assert sorted(sent["name"] for sent in creates(production_store)) == ["Mia", "Rex"]


def test_without_redis_the_worker_command_says_none_is_needed(portal_app):
    result = portal_app.test_cli_runner().invoke(args=["imports", "worker", "--burst"])
    assert result.exit_code == 1
    assert "PETPORTAL_REDIS_URL is not set" in result.output


def test_start_racing_discard_gets_an_honest_answer_every_time(make_portal, database_url, auth_for, caplog):
    """Two tabs press Start and Discard on one preview at the same moment, 50 times: one wins, the other is told
    why (404: discarded; 409: already started), and nothing is reported as an outage."""
    app = make_portal(SQLALCHEMY_DATABASE_URI=database_url)
    starter, discarder = auth_for(app, "staff"), auth_for(app, "staff")

    def press_at_once(client, path, action, token, start):
        start.wait()
        return client.post(f"{path}/{action}", data={"csrf_token": token})

    seen = set()
    for number in range(50):
        # A name of its own each time: an animal added by an earlier round would be left out as a copy.
        path = upload(starter, f"name,categoryId,status\nRex {number},1,\n").headers["Location"]
        calls = [
            (client, path, action, csrf_token(client.get(path).text))
            for client, action in ((starter, "start"), (discarder, "discard"))
        ]
        started, discarded = at_once(calls, press_at_once)
        seen.add((started.status_code, discarded.status_code))
        if started.status_code == 404:  # discarded before the start read it, or while it did
            assert "There is nothing at this address" in started.text or "This import was discarded" in started.text
        if discarded.status_code == 409:
            assert "This import was already started, so it is kept with its results." in discarded.text
    assert seen <= {(303, 409), (404, 303)}, seen
    assert "database is unavailable" not in caplog.text
    assert "Traceback" not in caplog.text


def test_the_upload_pages_own_example_is_accepted_with_the_demos_labels(portal_app, auth_for, production_store):
    """The example printed on the upload page, as a newcomer copies it into a file, previews with no refused row
    in the demo (whose labels name the sample animals' categories, "Cats" among them)."""
    with portal_app.app_context():
        for category_id, label in demo.DEMO_LABELS.items():
            categories.name("production", category_id, label, actor="demo")
        db.session.commit()
    staff = auth_for(portal_app, "staff")
    example = re.search(r"<pre[^>]*><code>(.*?)</code></pre>", staff.get("/animals/import").text, re.DOTALL)
    response = upload(staff, html.unescape(example.group(1)) + "\n")
    assert response.status_code == 303
    summary = staff.get(f"{response.headers['Location']}.json").get_json()
    assert summary["total"] >= 2 and summary["failed"] == 0, summary


def test_the_lists_own_export_of_staging_imports_into_production_once_each(
    portal_app, auth_for, production_store, staging_store
):
    """The round trip an admin with two environments tries first: download staging's list as CSV, then upload
    that very file as an import for production."""
    for name, category_id, status in (("Nimbus", 3, "pending"), ('Ada "the, quick"', 2, None)):
        staging_store.add(name, category_id, status)
    admin = auth_for(portal_app, "admin")
    page = admin.get("/admin/environment")
    fields = {"csrf_token": csrf_token(page.text), "environment": "staging"}
    assert admin.post("/admin/environment/preview", data=fields).status_code in (302, 303)
    exported = admin.get("/animals.csv?limit=100")
    assert exported.status_code == 200 and exported.text.lstrip(BOM).startswith("id,name,categoryId,category,status")
    fields["environment"] = ""
    admin.post("/admin/environment/preview", data=fields)  # back to production, the active environment
    before = production_store.animals()

    path = upload(admin, exported.get_data()).headers["Location"]
    assert press(admin, path, "start").status_code == 303
    assert finished(admin, path)["created"] == 3

    def kept(animals):
        return sorted((pet["name"], pet["categoryId"], pet.get("status")) for pet in animals)

    added = production_store.animals()[len(before) :]
    assert kept(added) == kept(staging_store.animals())  # name, category and status, each once
    assert len(production_store.animals()) == len(before) + 3


def test_an_export_line_with_a_value_missing_is_refused_with_the_exports_columns(portal_app, auth_for):
    staff = auth_for(portal_app, "staff")
    path = upload(staff, "id,name,categoryId,category,status\n7,Rex,1,Dogs\n8,Mia,2,,available\n").headers["Location"]
    page = html.unescape(staff.get(path).text)
    assert "This line has 4 values; each animal of the list's export needs 5" in page
    assert "1 animal will be added to production" in page


def test_an_export_line_with_all_its_values_is_refused_for_what_is_wrong_in_them(portal_app, auth_for):
    staff = auth_for(portal_app, "staff")
    path = upload(staff, "id,name,categoryId,category,status\n7,Rex,abc,,flying\n8,Mia,2,,available\n").headers[
        "Location"
    ]
    page = html.unescape(staff.get(path).text)
    assert "“abc” is neither a category id nor the label of a category." in page
    assert "The status must be empty or one of available, pending, sold, not “flying”." in page
    assert "each animal of the list's export needs 5" not in page
    assert "1 animal will be added to production" in page


def test_the_import_page_offers_an_example_file_that_imports(portal_app, auth_for, production_store):
    staff = auth_for(portal_app, "staff")
    page = staff.get("/animals/import").text
    [href] = re.findall(r'href="([^"]*import-example\.csv[^"]*)" download', page)
    example = staff.get(href)
    assert example.status_code == 200
    path = upload(staff, example.get_data()).headers["Location"]
    press(staff, path, "start")
    assert finished(staff, path) | {"state": None} == {
        "state": None,
        "total": 3,
        "created": 3,
        "failed": 0,
        "unknown": 0,
    }
