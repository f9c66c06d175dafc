"""Staff add animals: validated forms, exactly one createPet per form, honest outcomes."""

import json
import re
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from support.helpers import PASSWORDS, AuthActions, portal_config, post_form, submission_token, upload
from support.portal import csrf_token
from support.servers import FaultServer, answer, delay, serve


def open_form(client):
    page = client.get("/animals/new")
    assert page.status_code == 200
    return {"csrf_token": csrf_token(page.text), "submission_token": submission_token(page.text)}


def posts(store):
    return [r for r in store.received if r.method == "POST"]


def test_anonymous_users_are_sent_to_log_in_and_come_back_to_the_form(client, auth):
    response = client.get("/animals/new")
    assert response.status_code == 302
    assert response.headers["Location"] == "/login?next=/animals/new"
    back = auth.login("staff", next_path="/animals/new")
    assert back.status_code == 303 and back.headers["Location"] == "/animals/new"
    assert "Add an animal" in client.get("/animals/new").text


def test_the_form_says_which_environment_the_animal_goes_to(client, auth):
    auth.login("staff")
    page = client.get("/animals/new")
    assert "This animal will be added to <strong>production</strong>" in page.text
    for field in ("name", "category_id", "status", "csrf_token", "submission_token"):
        assert f'name="{field}"' in page.text


def test_a_valid_form_sends_exactly_one_create_pet_then_303s_to_the_animal(client, auth, production_store):
    auth.login("staff")
    form = open_form(client)
    response = client.post("/animals/new", data={**form, "name": "  Biscuit ", "category_id": "12", "status": ""})
    assert response.status_code == 303
    created = production_store.animals()[-1]
    assert created == {"id": created["id"], "name": "Biscuit", "categoryId": 12}
    assert response.headers["Location"] == f"/animals/{created['id']}"
    [sent] = posts(production_store)
    assert json.loads(sent.body) == {"name": "Biscuit", "categoryId": 12}
    assert sent.headers["authorization"] == f"Bearer {production_store.key}"
    page = client.get(response.headers["Location"])
    assert "Added Biscuit to production." in page.text


def test_a_copy_posted_to_be_kept_while_the_store_answers_is_asked_about_and_nothing_is_kept(
    client, auth, production_store
):
    """`when_back=1` is offered while the store is not answering; posted while it answers, a copy of a listed animal
    is asked about as any other add, and neither sent nor kept for later."""
    auth.login("staff")
    listed = production_store.animals()[0]
    copy = {"name": listed["name"], "category_id": str(listed["categoryId"]), "status": listed.get("status", "")}
    page = client.post("/animals/new", data={**open_form(client), **copy, "when_back": "1"})
    assert page.status_code == 409 and 'id="duplicate-warning"' in page.text
    assert posts(production_store) == []
    assert "is kept" not in client.get("/animals/mine").text
    assert [a["name"] for a in production_store.animals()].count(listed["name"]) == 1


def test_a_chosen_status_is_sent(client, auth, production_store):
    auth.login("staff")
    client.post("/animals/new", data={**open_form(client), "name": "Pip", "category_id": "0", "status": "pending"})
    assert production_store.animals()[-1]["status"] == "pending"
    assert production_store.animals()[-1]["categoryId"] == 0


@pytest.mark.parametrize(
    "fields, field, message",
    [
        ({"name": ""}, "name", "Enter the animal&#39;s name."),
        ({"name": "    "}, "name", "Enter the animal&#39;s name."),
        ({"name": "x" * 101}, "name", "100 characters or fewer"),
        ({"name": "Rex\u0000"}, "name", "control characters"),
        ({"category_id": ""}, "category_id", "Enter the category id"),
        ({"category_id": "abc"}, "category_id", "must be a whole number from 0"),
        ({"category_id": "1.5"}, "category_id", "must be a whole number from 0"),
        ({"category_id": "\u0661"}, "category_id", "must be a whole number from 0"),  # Arabic-Indic 1
        ({"category_id": "\uff19"}, "category_id", "must be a whole number from 0"),  # full-width 9
        ({"category_id": "1_000"}, "category_id", "must be a whole number from 0"),
        ({"category_id": "+5"}, "category_id", "must be a whole number from 0"),
        ({"category_id": "\u00a05"}, "category_id", "must be a whole number from 0"),  # a no-break space
        ({"category_id": "1" * 5000}, "category_id", "This category id is too large for the pet store."),
        ({"category_id": str(2**63)}, "category_id", "This category id is too large for the pet store."),
        ({"category_id": "-5"}, "category_id", "The category id must be a whole number from 0 up."),
        ({"category_id": str(10**400)}, "category_id", "This category id is too large for the pet store."),
        ({"status": "lost"}, "status", "Not a valid choice"),
    ],
)
def test_invalid_values_show_the_form_again_with_400_and_send_nothing(
    client, auth, production_store, fields, field, message
):
    auth.login("staff")
    data = {**open_form(client), "name": "Rex", "category_id": "1", "status": "", **fields}
    page = client.post("/animals/new", data=data)
    assert page.status_code == 400
    assert re.search(rf'id="{field}".*?invalid-feedback[^>]*>[^<]*{re.escape(message)}', page.text, re.DOTALL)
    assert posts(production_store) == []


def test_the_form_needs_its_csrf_token(client, auth, production_store):
    auth.login("staff")
    form = open_form(client)
    page = client.post(
        "/animals/new", data={"submission_token": form["submission_token"], "name": "Rex", "category_id": "1"}
    )
    assert page.status_code == 400
    assert posts(production_store) == []


def test_sending_the_same_form_again_lands_on_the_first_animal(client, auth, production_store):
    auth.login("staff")
    data = {**open_form(client), "name": "Once", "category_id": "3"}
    first = client.post("/animals/new", data=data)
    again = client.post("/animals/new", data=data)
    assert again.status_code == 303
    assert again.headers["Location"] == first.headers["Location"]
    assert "already been sent" in client.get(again.headers["Location"]).text
    assert len(posts(production_store)) == 1


def test_a_token_from_another_user_or_made_up_is_refused(client, auth, production_store):
    auth.login("staff")
    form = open_form(client)
    page = client.post("/animals/new", data={**form, "submission_token": "made-up", "name": "Rex", "category_id": "1"})
    assert page.status_code == 400
    assert "This form has expired" in page.text
    assert submission_token(page.text) not in ("", "made-up")
    assert posts(production_store) == []


def test_twenty_concurrent_posts_with_one_token_create_exactly_one_animal(make_portal, production_store, staging_store):
    # Everything here shares one interpreter; a generous timeout keeps a busy machine from turning
    # the one createPet into an (honest, but here irrelevant) unknown outcome. Three database
    # connections for twenty requests: the waiting requests must not hold one while they wait, or the
    # request that sent createPet could never record the animal it created.
    pool = {"pool_size": 3, "max_overflow": 0, "connect_args": {"timeout": 30}}
    portal_app = make_portal(UPSTREAM_TIMEOUT=10, SQLALCHEMY_ENGINE_OPTIONS=pool)
    with serve(portal_app) as origin:
        browser = requests.Session()
        login = browser.get(f"{origin}/login")
        browser.post(
            f"{origin}/login",
            data={"username": "staff", "password": PASSWORDS["staff"], "csrf_token": csrf_token(login.text)},
        )
        form_page = browser.get(f"{origin}/animals/new")
        data = {
            "csrf_token": csrf_token(form_page.text),
            "submission_token": submission_token(form_page.text),
            "name": "Twenty",
            "category_id": "7",
        }
        start = threading.Barrier(20)

        def submit(_):
            session = requests.Session()
            session.cookies.update(browser.cookies)
            start.wait()
            return session.post(f"{origin}/animals/new", data=data, allow_redirects=False)

        with ThreadPoolExecutor(20) as pool:
            responses = list(pool.map(submit, range(20)))
    outcomes = [(r.status_code, r.headers.get("Location") or r.text[r.text.find("<main") :][:300]) for r in responses]
    assert [status for status, _ in outcomes] == [303] * 20, outcomes
    assert len({r.headers["Location"] for r in responses}) == 1
    assert len(posts(production_store)) == 1
    assert [a["name"] for a in production_store.animals()].count("Twenty") == 1


def test_an_upstream_400_shows_the_apis_message_on_the_form(make_portal, staging_store):
    with FaultServer() as store:
        store.script(
            answer(400, {"code": "duplicate", "message": "An animal called Rex already exists.", "status": 400})
        )
        app = make_portal.over(store.base_url, staging_store.url)
        client = app.test_client()
        AuthActions(client).login("staff")
        # Confirmed as a copy: the fault server answers createPet alone, not the listPets that looks for copies.
        form = {**open_form(client), "confirm_duplicate": "1"}
        page = client.post("/animals/new", data={**form, "name": "Rex", "category_id": "1"})
        store.script(answer(201, {"id": 77, "name": "Rex II", "categoryId": 1}))
        retry = client.post("/animals/new", data={**form, "name": "Rex II", "category_id": "1"})
    assert page.status_code == 400
    assert "An animal called Rex already exists." in page.text
    assert 'value="Rex"' in page.text
    assert retry.status_code == 303 and retry.headers["Location"] == "/animals/77"
    assert store.methods() == ["POST", "POST"]


def test_a_timeout_after_the_post_was_sent_says_the_outcome_is_unknown_and_never_resends(make_portal, staging_store):
    with FaultServer() as store:
        store.script(delay(3, answer(201, {"id": 5, "name": "Slow", "categoryId": 1})))
        app = make_portal.over(store.base_url, staging_store.url, UPSTREAM_TIMEOUT=1.0)
        client = app.test_client()
        AuthActions(client).login("staff")
        data = {**open_form(client), "name": "Slow", "category_id": "1", "confirm_duplicate": "1"}  # no listPets
        page = client.post("/animals/new", data=data)
        again = client.post("/animals/new", data=data)
    assert page.status_code == 502
    assert "cannot tell whether Slow was added" in page.text
    assert 'href="/animals?limit=100"' in page.text
    assert again.status_code == 502
    assert store.methods() == ["POST"]


def test_a_store_that_cannot_be_reached_keeps_the_form_and_its_token(make_portal, staging_store):
    with FaultServer() as closed:
        url = closed.base_url
    app = make_portal.over(url, staging_store.url)
    client = app.test_client()
    AuthActions(client).login("staff")
    data = {**open_form(client), "name": "Later", "category_id": "1"}
    page = client.post("/animals/new", data=data)
    assert page.status_code == 503
    assert "nothing was added" in page.text
    assert 'value="Later"' in page.text
    assert submission_token(page.text) == data["submission_token"]


def test_the_audit_log_records_the_animal_added(portal_app, client, auth, production_store):
    from petportal.data.models import AuditEntry
    from petportal.extensions import db

    auth.login("staff")
    client.post("/animals/new", data={**open_form(client), "name": "Audited", "category_id": "2"})
    pet_id = production_store.animals()[-1]["id"]
    with portal_app.app_context():
        entry = db.session.scalars(db.select(AuditEntry).filter_by(action="animal_added")).one()
    assert (entry.actor, entry.environment) == ("staff", "production")
    assert entry.details == {"code": "animal_added", "pet_id": pet_id, "name": "Audited"}


def test_a_second_portal_instance_with_the_same_token_creates_no_second_animal(
    portal_app, production_store, staging_store, caplog, tmp_path
):
    from petportal import create_app

    database = portal_app.config["SQLALCHEMY_DATABASE_URI"]
    other = create_app(
        portal_config(tmp_path, production_store.url, staging_store.url, SQLALCHEMY_DATABASE_URI=database)
    )
    first, second = portal_app.test_client(), other.test_client()
    AuthActions(first).login("staff")
    data = {**open_form(first), "name": "Shared", "category_id": "5"}
    second.set_cookie("session", first.get_cookie("session").value)
    made_here = first.post("/animals/new", data=data)
    made_there = second.post("/animals/new", data=data)
    other.extensions["petportal.petstore.environments"].close()
    assert made_here.status_code == made_there.status_code == 303
    assert made_here.headers["Location"] == made_there.headers["Location"]
    assert len(posts(production_store)) == 1


INT64_BOUND = "9223372036854775807"


@pytest.mark.parametrize(
    "language, from_zero_up, too_large",
    [
        ("en", "a whole number from 0 up", "too large for the pet store"),
        ("de", "eine ganze Zahl ab 0", "für die Tierhandlung zu groß"),
        ("es", "un número entero desde 0", "demasiado grande para la tienda de mascotas"),
    ],
)
def test_a_category_ids_message_says_from_0_up_and_never_the_64_bit_bound(
    portal_app, auth_for, production_store, language, from_zero_up, too_large
):
    """The add form, the import's preview, its results CSV and the labels page, in every language."""
    staff, admin = auth_for(portal_app, "staff"), auth_for(portal_app, "admin")
    for client in (staff, admin):
        client.get(f"/language/{language}?next=/animals")
    added = client_post_add(staff, category_id="-5")
    assert added.status_code == 400
    assert from_zero_up in added.text and INT64_BOUND not in added.text
    assert too_large in client_post_add(staff, category_id=str(2**63)).text
    preview = staff.get(upload(staff, f"name,categoryId,status\nMinus,-5,\nHuge,{2**63},\n").headers["Location"])
    assert from_zero_up in preview.text and too_large in preview.text and INT64_BOUND not in preview.text
    results = staff.get(preview.request.path + "/results.csv").get_data(as_text=True)
    assert "a whole number from 0 up" in results and INT64_BOUND not in results  # the file's words are English
    labelled = post_form(
        admin, "/admin/categories", "/admin/categories", environment="production", category_id="-5", label="Dogs"
    )
    assert labelled.status_code == 400
    assert from_zero_up in labelled.text and INT64_BOUND not in labelled.text


def client_post_add(client, **fields):
    """The add form sent with a valid animal but for `fields`."""
    return client.post("/animals/new", data={**open_form(client), "name": "Nine", "category_id": "9", **fields})


def test_no_field_cuts_what_is_typed(portal_app, auth_for):
    """No page puts a maxlength on a field: a long value reaches the server, which answers with its message."""
    admin = auth_for(portal_app, "admin")
    for path in ("/animals/new", "/animals", "/admin/categories", "/admin/users/new", "/animals/promote", "/login"):
        page = admin.get(path)
        assert page.status_code == 200, path
        assert "maxlength" not in page.text, path
