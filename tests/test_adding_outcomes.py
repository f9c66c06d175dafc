"""One way to add an animal: the add form and the bulk import read every createPet answer alike.

The upstream here is a real pet store on a real port that adds each animal it is sent and then answers
with a fault (or hangs up), as a gateway in front of a store can. Whatever the fault, both the form and
the import call the outcome unknown, show it, and never send that animal again.
"""

import socket
import time
from pathlib import Path

import pytest
from sqlalchemy import select

from petportal.data.models import AuditEntry, BulkImport, CategoryLabel, ImportRow, SubmissionToken, TicketState
from petportal.extensions import db
from petportal.imports import runner

from support.helpers import (
    PASSWORDS,
    PRODUCTION_KEY,
    AuthActions,
    dispose_store,
    finished,
    make_store,
    press,
    submission_token,
    upload,
)
from support.portal import csrf_token
from support.servers import FaultServer, answer, free_port, serve

PACKAGE = Path(__file__).resolve().parent.parent / "petportal"


def hang_up(conn):
    """Close the connection after reading the request, without a word."""
    conn.shutdown(socket.SHUT_RDWR)


FAULTS = {
    "500": answer(500, {"code": "boom", "message": "internal error", "status": 500}),
    "502": answer(502, b"<html>bad gateway</html>", content_type="text/html"),
    "503": answer(503, {"code": "busy", "message": "try later", "status": 503}, {"Retry-After": "1"}),
    "504": answer(504, b"gateway timeout", content_type="text/plain"),
    "429": answer(429, {"code": "slow down", "message": "too many requests", "status": 429}),
    "418": answer(418, b"I'm a teapot", content_type="text/plain"),
    "an unreadable 201": answer(201, b'{"id": 7, "name": "Re'),
    "the connection closed after the request": hang_up,
}


class AddsThenFails(FaultServer):
    """The reference store behind a socket that lets it add each animal, then answers the portal with `fault`."""

    def __init__(self, store_app, fault):
        super().__init__()
        self.store = store_app.test_client()
        self.script(self._adds_then(fault))

    def _adds_then(self, fault):
        def send(conn):
            request = self.received[-1]
            headers = {"Authorization": request.headers.get("authorization", ""), "Content-Type": "application/json"}
            stored = self.store.open(request.target, method=request.method, data=request.body, headers=headers)
            if request.method == "POST" and stored.status_code == 201:
                fault(conn)
            else:
                answer(stored.status_code, stored.data)(conn)

        return send

    def animals(self):
        """Every animal the store holds, read directly."""
        return self.store.get("/v1/pets?limit=100", headers={"Authorization": f"Bearer {PRODUCTION_KEY}"}).get_json()

    def posts(self):
        return self.methods().count("POST")


@pytest.fixture(params=list(FAULTS))
def adds_then_fails(request, tmp_path):
    store_app = make_store(tmp_path / "store.sqlite", [PRODUCTION_KEY])
    with AddsThenFails(store_app, FAULTS[request.param]) as server, FaultServer() as staging:
        server.staging_url = staging.base_url
        yield server
    dispose_store(store_app)


def add_form(client):
    """The add form's page and its fields, filled in for Rex, as a browser would send them."""
    page = client.get("/animals/new").text
    return {
        "csrf_token": csrf_token(page),
        "submission_token": submission_token(page),
        "name": "Rex",
        "category_id": "1",
    }


def token_states(app):
    with app.app_context():
        return list(db.session.scalars(select(SubmissionToken.state)))


def test_the_form_calls_it_unknown_and_never_sends_it_again(make_portal, adds_then_fails):
    app = make_portal.over(adds_then_fails.base_url, adds_then_fails.staging_url)
    staff = app.test_client()
    AuthActions(staff).login("staff")
    fields = add_form(staff)
    first = staff.post("/animals/new", data=fields)
    assert first.status_code == 502
    assert "We cannot tell whether Rex was added" in first.text
    assert token_states(app) == [TicketState.UNKNOWN]
    again = staff.post("/animals/new", data=fields)  # the same form, sent again
    assert again.status_code == 502
    assert "We cannot tell whether Rex was added" in again.text
    assert adds_then_fails.posts() == 1
    assert [animal["name"] for animal in adds_then_fails.animals()] == ["Rex"]


def test_the_import_calls_it_unknown_and_never_sends_it_again(make_portal, adds_then_fails):
    app = make_portal.over(adds_then_fails.base_url, adds_then_fails.staging_url)
    staff = app.test_client()
    AuthActions(staff).login("staff")
    path = upload(staff, "name,categoryId,status\nRex,1,\n").headers["Location"]
    press(staff, path, "start")
    assert finished(staff, path) == {"state": "done", "total": 1, "created": 0, "failed": 0, "unknown": 1}
    with app.app_context():
        assert list(db.session.scalars(select(ImportRow.state))) == [TicketState.UNKNOWN]
    press(staff, path, "start")
    assert "This import was already started." in staff.get(path).text
    press(staff, path, "retry")
    assert "There is nothing to send again." in staff.get(path).text
    time.sleep(0.2)  # a runner, had one been woken, would have sent by now
    assert adds_then_fails.posts() == 1
    assert [animal["name"] for animal in adds_then_fails.animals()] == ["Rex"]


def test_a_refused_connection_adds_nothing_and_the_same_form_may_be_sent_again(make_portal, store_app, tmp_path):
    port = free_port()
    with FaultServer() as staging:
        app = make_portal.over(f"http://127.0.0.1:{port}/v1", staging.base_url)
        staff = app.test_client()
        AuthActions(staff).login("staff")
        fields = add_form(staff)
        refused = staff.post("/animals/new", data=fields)
        assert refused.status_code == 503
        assert "nothing was added" in refused.text
        assert token_states(app) == [TicketState.ISSUED]
        store = make_store(tmp_path / "late.sqlite", [PRODUCTION_KEY])
        with serve(store, port=port):
            added = staff.post("/animals/new", data=fields)
            assert added.status_code == 303
            assert token_states(app) == [TicketState.CREATED]
            assert staff.post("/animals/new", data=fields).status_code == 303  # a repeat lands on the same animal
            listed = store.test_client().get("/v1/pets", headers={"Authorization": f"Bearer {PRODUCTION_KEY}"})
            assert [animal["name"] for animal in listed.get_json()] == ["Rex"]
        dispose_store(store)


def test_a_full_bulkhead_adds_nothing_and_the_same_form_may_be_sent_again(make_portal, production_store):
    app = make_portal(UPSTREAM_CONCURRENCY=1)
    staff = app.test_client()
    AuthActions(staff).login("staff")
    fields = add_form(staff)
    gate = app.extensions["petportal.petstore.environments"]._gates["production"]
    gate.enter(time.monotonic() + 5)  # one page has been waiting on a hanging store for a while
    time.sleep(0.6)
    try:
        busy = staff.post("/animals/new", data=fields)
    finally:
        gate.leave()
    assert busy.status_code == 503
    assert "nothing was added" in busy.text
    assert [request.method for request in production_store.received] == []
    assert staff.post("/animals/new", data=fields).status_code == 303
    assert [animal["name"] for animal in production_store.animals()].count("Rex") == 2  # the sample's and this one


def test_create_pet_has_one_caller_outside_the_client():
    callers = {
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if ".create_pet(" in path.read_text() and path.parent.name != "petstore"
    }
    assert callers == {"catalog/adding.py"}


def test_a_request_that_fails_after_its_change_leaves_neither_the_change_nor_its_audit_entry(make_portal):
    app = make_portal(PROPAGATE_EXCEPTIONS=False)  # the 500 page, as in production
    failing = {"now": False}

    @app.after_request
    def fail_before_the_end(response):
        if failing["now"]:
            raise RuntimeError("the request fails after the view's change")
        return response

    admin = app.test_client()
    AuthActions(admin).login("admin", password=PASSWORDS["admin"])
    page = admin.get("/admin/categories").text
    failing["now"] = True
    response = admin.post(
        "/admin/categories",
        data={"csrf_token": csrf_token(page), "environment": "production", "category_id": "7", "label": "Dogs"},
    )
    failing["now"] = False
    assert response.status_code == 500
    with app.app_context():
        assert db.session.scalars(select(CategoryLabel)).all() == []
        assert db.session.scalars(select(AuditEntry).where(AuditEntry.action == "category_labelled")).all() == []
    assert '<td class="text-free" data-label="Label">Dogs</td>' not in admin.get("/admin/categories").text


def kept_import_id(app):
    with app.app_context():
        return db.session.scalar(select(BulkImport.id).where(BulkImport.kept))


def test_a_kept_animal_waits_and_a_refusal_then_is_reported_in_your_additions(make_portal, fault_server):
    app = make_portal.over(fault_server.base_url, fault_server.base_url)
    staff = app.test_client()
    AuthActions(staff).login("staff")
    fields = {**add_form(staff), "when_back": "1"}
    kept = staff.post("/animals/new", data=fields)
    assert kept.status_code == 303 and kept.headers["Location"] == "/animals/mine"
    assert staff.post("/animals/new", data=fields).headers["Location"] == "/animals/mine"  # kept once
    waiting = staff.get("/animals/mine").text
    assert "Rex is kept: the portal adds it to production once the pet store answers again." in waiting
    assert "Waiting" in waiting and "It is added once the pet store answers again." in waiting
    assert token_states(app) == [TicketState.KEPT]
    assert "POST" not in fault_server.methods(), "nothing is sent while the form keeps it (listPets looks for copies)"
    assert kept_import_id(app) not in staff.get("/animals/import").text, "a kept animal is no import of a file"
    fault_server.script(answer(400, {"code": "invalid", "message": "Category 1 is closed <b>today</b>"}))
    with app.app_context():
        runner.run(kept_import_id(app))  # as the engines' watcher has it run
    refused = staff.get("/animals/mine").text
    assert "The pet store refused it: Category 1 is closed &lt;b&gt;today&lt;/b&gt;" in refused
    assert "It is added once the pet store answers again." not in refused
    assert fault_server.methods() == ["GET", "POST"]  # the look for copies, then the one createPet


def test_a_kept_animal_stays_queued_while_the_store_refuses_connections_and_is_added_once_it_answers(
    make_portal, tmp_path
):
    port = free_port()
    with FaultServer() as staging:
        app = make_portal.over(f"http://127.0.0.1:{port}/v1", staging.base_url)
        staff = app.test_client()
        AuthActions(staff).login("staff")
        fields = add_form(staff)
        refused = staff.post("/animals/new", data=fields)
        assert refused.status_code == 503
        assert "nothing was sent" in refused.text and 'name="when_back" value="1"' in refused.text
        assert staff.post("/animals/new", data={**fields, "when_back": "1"}).status_code == 303
        import_id = kept_import_id(app)
        with app.app_context():
            runner.run(import_id)  # the store still refuses connections: nothing sent, the animal still kept
            batch = db.session.get(BulkImport, import_id)
            assert batch.state == "queued" and batch.lease_until is not None and batch.runner is None
            batch.lease_until = None  # the try again a moment later, now
            db.session.commit()
        assert "Waiting" in staff.get("/animals/mine").text
        store = make_store(tmp_path / "late.sqlite", [PRODUCTION_KEY])
        with serve(store, port=port):
            with app.app_context():
                runner.run(import_id)
                runner.run(import_id)  # a second runner finds nothing left to send
            listed = store.test_client().get("/v1/pets", headers={"Authorization": f"Bearer {PRODUCTION_KEY}"})
            assert [animal["name"] for animal in listed.get_json()] == ["Rex"]
        dispose_store(store)
        mine = staff.get("/animals/mine").text
        assert "Waiting" not in mine and "Rex" in mine
        assert staff.post("/animals/new", data={**fields, "when_back": "1"}).headers["Location"] == "/animals/mine"
