"""Staging as a rehearsal (issue 43), against two real reference stores (production and staging) on real ports.

Who may work where: an account limited to one environment sees and changes that one alone, whatever is active,
and a form or an import made for the other is refused with nothing sent. Promotions: each staging animal reaches
production at most once, ever, through a ledger claimed before sending; an unknown outcome is never resent.
"""

import csv
import io
import json
import time

import pytest

from petportal.auth import accounts
from petportal.data.models import AuditEntry, Promotion, User
from petportal.extensions import db

from support.helpers import (
    NEW_PASSWORDS,
    AuthActions,
    SlowStore,
    creates,
    finished,
    post_form,
    press,
    submission_token,
    upload,
)
from support.portal import csrf_token
from support.servers import FaultServer, serve

BOM = "\ufeff"


def limit(app, username, *environments):
    """An admin sets the account's environments on its page; the answer."""
    admin = app.test_client()
    AuthActions(admin).login("admin")
    path = f"/admin/users/{username}"
    return post_form(admin, path, f"{path}/environments", environments=list(environments))


def entries(app, action):
    with app.app_context():
        return [entry for entry in db.session.scalars(db.select(AuditEntry)) if entry.action == action]


def staging_names(store):
    return sorted(animal["name"] for animal in store.animals())


def add_through_the_form(client, name, token=None):
    page = client.get("/animals/new").text
    fields = {
        "csrf_token": csrf_token(page),
        "submission_token": token or submission_token(page),
        "name": name,
        "category_id": "3",
        "status": "available",
    }
    return client.post("/animals/new", data=fields)


def test_a_staging_only_staff_member_lists_adds_and_imports_on_staging_while_production_is_active(
    portal_app, auth_for, production_store, staging_store
):
    assert limit(portal_app, "staff", "staging").status_code == 303
    staff = auth_for(portal_app, "staff")
    page = staff.get("/animals").text
    assert "You work on" in page and "Staging Sam" in page
    assert "Rex" not in page  # production's sample
    assert add_through_the_form(staff, "Rehearsed Rita").status_code == 303
    path = upload(staff, "name,categoryId,status\nImported Ivy,2,\n").headers["Location"]
    assert press(staff, path, "start").status_code == 303
    assert finished(staff, path)["created"] == 1
    assert {"Rehearsed Rita", "Imported Ivy"} <= set(staging_names(staging_store))
    additions = staff.get("/animals/mine").text
    assert "Rehearsed Rita" in additions and "Imported Ivy" in additions
    assert creates(production_store) == []
    # Every page says so, the add form and the import included.
    for each in ("/animals/new", "/animals/import", path):
        assert "You work on" in staff.get(each).text


def test_a_form_or_an_import_opened_for_production_before_the_limit_sends_nothing(
    portal_app, auth_for, production_store, staging_store
):
    staff = auth_for(portal_app, "staff")
    token = submission_token(staff.get("/animals/new").text)  # opened while staff worked on both
    path = upload(staff, "name,categoryId,status\nEarly Eve,2,\n").headers["Location"]
    assert limit(portal_app, "staff", "staging").status_code == 303
    crafted = add_through_the_form(staff, "Crafted Carl", token=token)
    assert crafted.status_code == 409
    assert "Nothing was added" in crafted.text
    refused = press(staff, path, "start")  # production's import is no longer this account's to open
    assert refused.status_code == 403  # and says why (test_an_import_its_owner_may_no_longer_open_says_why)
    assert creates(production_store) == [] and creates(staging_store) == []


def test_the_change_is_audited_and_the_last_admin_with_both_keeps_them(portal_app, auth_for):
    assert limit(portal_app, "staff", "production").status_code == 303
    [entry] = entries(portal_app, "environments_changed")
    assert entry.target == "staff" and entry.details["environments"] == "production"
    admin = auth_for(portal_app, "admin")
    refused = post_form(admin, "/admin/users/admin", "/admin/users/admin/environments", environments="staging")
    assert refused.status_code == 303
    assert "last enabled admin who works on both" in admin.get("/admin/users/admin").text
    with portal_app.app_context():
        assert db.session.scalar(db.select(User.environments).filter_by(username="admin")) == {"production", "staging"}


@pytest.mark.parametrize("values", [[], ["moon"], ["production", "moon"], ["staging", "x" * 5000]])
def test_a_bad_choice_of_environments_is_a_translated_error_and_changes_nothing(portal_app, values):
    response = limit(portal_app, "staff", *values)
    assert response.status_code == 400
    assert "Choose production, staging or both." in response.text
    with portal_app.app_context():
        assert db.session.scalar(db.select(User.environments).filter_by(username="staff")) == {"production", "staging"}


def promote(client, *staging_ids, query=""):
    """Choose staging animals on the promote page and send them: the answer (a preview's 303)."""
    page = client.get(f"/animals/promote{query}").text
    return client.post(
        "/animals/promote", data={"csrf_token": csrf_token(page), "pet_id": [str(i) for i in staging_ids]}
    )


def ten_on_staging(store):
    return [store.add(f"Promoted {number}", 4, "available")["id"] for number in range(10)]


def test_promoting_ten_twice_from_two_sessions_adds_ten_to_production(
    portal_app, auth_for, production_store, staging_store
):
    ids = ten_on_staging(staging_store)
    admin = auth_for(portal_app, "admin")
    page = admin.get("/animals/promote?limit=100").text
    assert "Promoted 0" in page and "Staging Sam" in page
    first = promote(admin, *ids)
    assert first.status_code == 303
    path = first.headers["Location"]
    preview = admin.get(path).text
    assert "10 animals will be added to production" in preview
    second_session = auth_for(portal_app, "admin")
    second = promote(second_session, *ids).headers["Location"]  # previewed before the first is sent
    press(admin, path, "start")
    assert finished(admin, path)["created"] == 10
    press(second_session, second, "start")
    assert finished(second_session, second) == {"state": "done", "total": 10, "created": 0, "failed": 10, "unknown": 0}
    sent = [body["name"] for body in creates(production_store)]
    assert sorted(sent) == sorted(f"Promoted {number}" for number in range(10))
    results = list(csv.DictReader(io.StringIO(admin.get(f"{path}/results.csv").text.lstrip(BOM))))
    in_production = {animal["name"]: animal["id"] for animal in production_store.animals()}
    assert [int(row["stagingId"]) for row in results] == ids
    assert all(int(row["productionId"]) == in_production[row["name"]] for row in results)
    # A third choice of the same animals: the preview leaves them out, shown as done.
    third = admin.get(promote(admin, *ids).headers["Location"]).text
    assert "0 animals will be added to production" in third and "Promoted before: production has it as id" in third
    listed = admin.get("/animals/promote?limit=100").text
    assert f"/animals/{in_production['Promoted 3']}" in listed and "by admin" in listed
    audited = entries(portal_app, "animals_promoted")
    assert [entry.details["created"] for entry in audited] == [10, 0]
    promoted = [entry for entry in entries(portal_app, "animal_added") if entry.details["code"] == "animal_promoted"]
    assert sorted(entry.details["staging_id"] for entry in promoted) == sorted(ids)


class AnswersOnce503:
    """The production store, answering 503 to the `nth` createPet after acting on it."""

    def __init__(self, app, nth):
        self.app, self.nth, self.seen = app, nth, 0

    def __call__(self, environ, start_response):
        if environ["REQUEST_METHOD"] != "POST":
            return self.app(environ, start_response)
        self.seen += 1
        if self.seen != self.nth:
            return self.app(environ, start_response)
        list(self.app(environ, lambda *args, **kwargs: None))  # it acts, then the gateway says 503
        start_response("503 Service Unavailable", [("Content-Type", "application/json")])
        return [json.dumps({"code": "unavailable", "message": "try later"}).encode()]


def test_a_503_after_acting_marks_that_one_unknown_and_it_is_never_resent(
    make_portal, auth_for, production_store, staging_store
):
    ids = ten_on_staging(staging_store)
    flaky = AnswersOnce503(production_store.recorder, nth=3)
    with serve(flaky) as origin:
        # One row at a time: with several under way, the rows after the 503 may all be sent before it comes back.
        app = make_portal.over(origin + "/v1", staging_store.url, IMPORT_CONCURRENCY=1)
        admin = auth_for(app, "admin")
        path = promote(admin, *ids).headers["Location"]
        press(admin, path, "start")
        paused = finished(admin, path)
        assert paused["unknown"] == 1 and paused["state"] == "paused"
        press(admin, path, "start")  # resume: the rest go on, the unknown one stays unknown
        final = finished(admin, path)
        assert final == {"state": "done", "total": 10, "created": 9, "failed": 0, "unknown": 1}
        page = admin.get(path).text
        assert "Outcome unknown: check these" in page
        again = admin.get(promote(admin, *ids).headers["Location"]).text
        assert "0 animals will be added to production" in again
        with app.app_context():
            states = sorted(entry.state for entry in db.session.scalars(db.select(Promotion)))
        assert states == ["created"] * 9 + ["unknown"]
        listed = admin.get("/animals/promote?limit=100").text
        assert "outcome unknown" in listed
        # The audit names the unknown one by its staging id and its promotion (its entry once gave the page a 500).
        audit_page = admin.get("/admin/audit")
        unknown_id = next(pet_id for pet_id in ids if f"staging id {pet_id}, promotion" in audit_page.text)
        assert audit_page.status_code == 200 and "may or may not have added it" in audit_page.text, unknown_id
    names = [body["name"] for body in creates(production_store)]
    assert len(names) == len(set(names)) == 10


def test_a_gone_staging_animal_and_a_refused_one_are_reported_on_their_rows_and_the_rest_go_on(
    portal_app, auth_for, production_store, staging_store
):
    kept = staging_store.add("Kept Kim", 4, "available")["id"]
    admin = auth_for(portal_app, "admin")
    path = promote(admin, kept, 987654321).headers["Location"]
    preview = admin.get(path).text
    assert "Staging no longer has this animal" in preview and "1 animal will be added to production" in preview
    press(admin, path, "start")
    assert finished(admin, path)["created"] == 1


@pytest.mark.parametrize(
    "values, error",
    [
        ([], "Choose at least one animal to promote."),
        (["abc"], "An animal&#39;s id is a whole number"),
        (["-1"], "An animal&#39;s id is a whole number"),
        (["\u0661"], "An animal&#39;s id is a whole number"),
        (["9" * 30], "An animal&#39;s id is a whole number"),
        ([str(number) for number in range(101)], "Choose at most 100 animals at once."),
    ],
)
def test_a_bad_choice_to_promote_is_a_translated_error_and_nothing_is_stored(portal_app, auth_for, values, error):
    admin = auth_for(portal_app, "admin")
    page = admin.get("/animals/promote").text
    response = admin.post("/animals/promote", data={"csrf_token": csrf_token(page), "pet_id": values})
    assert response.status_code == 400
    assert error in response.text


def test_only_admins_and_staff_who_work_on_both_may_promote(portal_app, auth_for, client):
    assert client.get("/animals/promote").status_code == 302
    staff = auth_for(portal_app, "staff")
    assert staff.get("/animals/promote").status_code == 200
    limit(portal_app, "staff", "staging")
    assert staff.get("/animals/promote").status_code == 403
    assert staff.post("/animals/promote", data={"pet_id": "1"}).status_code in (400, 403)


def test_an_import_running_when_its_owner_is_limited_to_the_other_environment_stops(make_portal, auth_for, tmp_path):
    store = SlowStore(tmp_path, seconds=0.05)
    with serve(store) as origin, FaultServer() as staging:
        app = make_portal.over(origin + "/v1", staging.base_url, IMPORT_CONCURRENCY=1)
        staff = auth_for(app, "staff")
        rows = "".join(f"Pup {number},1,\n" for number in range(60))
        path = upload(staff, "name,categoryId,status\n" + rows).headers["Location"]
        press(staff, path, "start")
        while staff.get(f"{path}.json").get_json()["created"] < 3:
            time.sleep(0.02)
        assert limit(app, "staff", "staging").status_code == 303
        # The owner can no longer open production's import (and is told why); an admin who works on both sees it
        # stopped.
        assert staff.get(path).status_code == 403 and staff.post(f"{path}/start").status_code in (400, 403)
        admin = auth_for(app, "admin")
        stopped = finished(admin, path)
        assert stopped["state"] == "stopped" and stopped["created"] < 60
        assert (
            "staff may no longer add to production (limited or disabled), so nothing more was sent."
            in admin.get(path).text
        )
        assert len(store.names) == stopped["created"]


def test_an_import_its_owner_may_no_longer_open_says_why(portal_app, auth_for):
    staff = auth_for(portal_app, "staff")
    path = upload(staff, "name,categoryId,status\nPup,1,\n").headers["Location"]
    assert limit(portal_app, "staff", "staging").status_code == 303
    for page in (staff.get(path), staff.get(f"{path}.json"), staff.get(f"{path}/results.csv")):
        assert page.status_code == 403
        assert "made for an environment your account no longer works on" in page.text
    stranger = staff.get("/animals/import/" + "x" * 22)  # no such import: still a plain 404
    assert stranger.status_code == 404 and "no longer works on" not in stranger.text


def staging_only_admin(app):
    """A second admin, limited to staging by the first, logged in."""
    with app.app_context():
        accounts.create("second", "admin", "a long second admin password", False)
        db.session.commit()
    assert limit(app, "second", "staging").status_code == 303
    second = app.test_client()
    AuthActions(second).login("second", "a long second admin password")
    return second


def test_an_admin_limited_to_one_environment_cannot_lift_the_limit_switch_or_preview(portal_app):
    second = staging_only_admin(portal_app)
    own = "/admin/users/second"
    lifted = post_form(second, own, f"{own}/environments", environments=["production", "staging"])
    granted = post_form(second, own, "/admin/users/staff/environments", environments=["production"])
    switched = post_form(second, "/admin/environment", "/admin/environment", environment="staging", confirm="staging")
    previewed = post_form(second, "/admin/environment", "/admin/environment/preview", environment="production")
    assert [answer.status_code for answer in (lifted, granted, switched, previewed)] == [403, 403, 403, 403]
    with portal_app.app_context():
        kept = dict(db.session.execute(db.select(User.username, User.environments)).all())
    assert kept["second"] == {"staging"} and kept["staff"] == {"production", "staging"}


def accounts_and_audit(app):
    with app.app_context():
        return db.session.execute(db.select(User.__table__)).all(), db.session.scalars(db.select(AuditEntry.id)).all()


@pytest.mark.parametrize(
    "change, fields",
    [
        ("role", {"role": "admin"}),
        ("environments", {"environments": "production"}),
        ("password", {"password": NEW_PASSWORDS[0]}),
        ("mfa/reset", {}),
        ("disable", {}),
        ("enable", {}),
        ("sessions/end", {}),
    ],
)
def test_an_admin_limited_to_one_environment_changes_no_account(portal_app, auth_for, change, fields):
    staff = auth_for(portal_app, "staff")
    second = staging_only_admin(portal_app)
    before = accounts_and_audit(portal_app)
    answer = post_form(second, "/admin/users/staff", f"/admin/users/staff/{change}", **fields)
    assert answer.status_code == 403
    assert accounts_and_audit(portal_app) == before
    assert staff.get("/animals/new").status_code == 200  # still logged in


def test_an_admin_limited_to_one_environment_adds_no_account(portal_app):
    second = staging_only_admin(portal_app)
    before = accounts_and_audit(portal_app)
    assert second.get("/admin/users/new").status_code == 403
    fields = {"username": "third", "role": "admin", "environments": "staging", "password": NEW_PASSWORDS[0]}
    assert post_form(second, "/admin/users", "/admin/users/new", **fields).status_code == 403
    assert accounts_and_audit(portal_app) == before


def test_a_limited_account_sees_none_of_its_imports_or_additions_on_the_other_environment(
    portal_app, auth_for, production_store, staging_store
):
    staff = auth_for(portal_app, "staff")
    assert add_through_the_form(staff, "Production Polly").status_code == 303  # production is active
    path = upload(staff, "name,categoryId,status\nPreviewed Pip,2,\n").headers["Location"]
    limit(portal_app, "staff", "staging")
    assert "Production Polly" not in staff.get("/animals/mine").text
    assert path not in staff.get("/animals/import").text
    assert staff.get(path).status_code == 403 and staff.get(f"{path}/results.csv").status_code == 403
