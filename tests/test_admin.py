"""Admins: switching for everyone, previewing for oneself, the audit log, the status page, ops endpoints."""

import re
from datetime import UTC, datetime

import pytest

from petportal.data.models import AuditEntry
from petportal.extensions import db

from support.helpers import PASSWORDS, PRODUCTION_KEY, STAGING_KEY, AuthActions, portal_config
from support.portal import csrf_token
from support.servers import FaultServer, answer


def switch(client, environment, confirm=None):
    page = client.get("/admin/environment")
    return client.post(
        "/admin/environment",
        data={
            "csrf_token": csrf_token(page.text),
            "environment": environment,
            "confirm": environment if confirm is None else confirm,
        },
    )


def preview(client, environment):
    page = client.get("/admin/environment")
    return client.post(
        "/admin/environment/preview", data={"csrf_token": csrf_token(page.text), "environment": environment}
    )


def served_by(client, production_store, staging_store):
    """Which store answers this client's next animal list."""
    before = len(production_store.received), len(staging_store.received)
    assert client.get("/animals").status_code == 200
    after = len(production_store.received), len(staging_store.received)
    return {(1, 0): "production", (0, 1): "staging"}[(after[0] - before[0], after[1] - before[1])]


def audit_entries(app, action):
    with app.app_context():
        return db.session.scalars(db.select(AuditEntry).filter_by(action=action).order_by(AuditEntry.id)).all()


def assert_keys_stayed_home(production_store, staging_store):
    assert {r.headers["authorization"] for r in production_store.received} <= {f"Bearer {PRODUCTION_KEY}"}
    assert {r.headers["authorization"] for r in staging_store.received} <= {f"Bearer {STAGING_KEY}"}


# --- the environment page -------------------------------------------------------------------------


def test_the_environment_page_lists_environments_without_their_keys(client, auth):
    auth.login("admin")
    page = client.get("/admin/environment")
    assert page.status_code == 200
    assert "production" in page.text and "staging" in page.text
    assert "active for everyone" in page.text
    assert page.text.count('<td data-label="Key configured">yes</td>') == 2
    assert "Everyone will see <strong data-switch-target>staging</strong>" in page.text


def test_staff_get_403_and_anonymous_users_are_sent_to_log_in(client, auth):
    assert client.get("/admin/environment").headers["Location"] == "/login?next=/admin/environment"
    auth.login("staff")
    for path in ("/admin/environment", "/admin/audit", "/admin/status"):
        assert client.get(path).status_code == 403


def test_the_admin_and_account_sections_open_on_their_first_page(client, auth):
    assert client.get("/admin").headers["Location"].startswith("/login")
    assert client.get("/account").headers["Location"].startswith("/login")
    auth.login("staff")
    assert client.get("/admin").status_code == 403
    assert client.get("/account").headers["Location"] == "/account/sessions"
    auth.logout()
    auth.login("admin")
    assert client.get("/admin").headers["Location"] == "/admin/environment"
    assert client.get("/account").headers["Location"] == "/account/sessions"


def test_an_environment_without_url_is_not_configured_and_cannot_be_chosen(make_portal, production_store):
    app = make_portal.over(production_store.url, None)
    client = app.test_client()
    AuthActions(client).login("admin")
    page = client.get("/admin/environment")
    refused = switch(client, "staging")
    refused_preview = preview(client, "staging")
    still = served_by(client, production_store, type("Nothing", (), {"received": []})())
    assert "staging (not configured)" in page.text and "cannot be chosen" in page.text
    assert refused.status_code == 400 and "staging is not configured" in refused.text
    assert refused_preview.status_code == 400
    assert still == "production"


# --- switching for everyone -----------------------------------------------------------------------


def test_a_switch_serves_everyone_from_the_new_environment_with_its_own_key(
    portal_app, auth, client, production_store, staging_store
):
    auth.login("admin")
    response = switch(client, "staging")
    assert response.status_code == 303
    customer = portal_app.test_client()
    assert served_by(customer, production_store, staging_store) == "staging"
    assert "You are using <strong>STAGING</strong>" in customer.get("/animals").text
    assert "Everyone is now served from staging." in client.get("/admin/environment").text
    back = switch(client, "production")
    assert back.status_code == 303
    assert served_by(customer, production_store, staging_store) == "production"
    assert "You are using" not in customer.get("/animals").text
    assert [(e.environment, e.details) for e in audit_entries(portal_app, "environment_switched")] == [
        ("staging", {"code": "switched_from", "previous": "production"}),
        ("production", {"code": "switched_from", "previous": "staging"}),
    ]
    assert [e.actor for e in audit_entries(portal_app, "environment_switched")] == ["admin", "admin"]
    assert_keys_stayed_home(production_store, staging_store)


@pytest.mark.parametrize(
    "environment, confirm, message",
    [
        ("staging", "Staging", "exactly to confirm"),
        ("staging", "production", "exactly to confirm"),
        ("staging", "", "Type the environment&#39;s name to confirm"),
        ("qa", "qa", "Not a valid choice"),
        ("", "", "Not a valid choice"),
    ],
)
def test_refused_switches_change_nothing_and_say_why(
    portal_app, auth, client, production_store, staging_store, environment, confirm, message
):
    auth.login("admin")
    response = switch(client, environment, confirm)
    assert response.status_code == 400
    assert message in response.text
    assert served_by(portal_app.test_client(), production_store, staging_store) == "production"
    assert audit_entries(portal_app, "environment_switched") == []


def selected_in(page, select_id):
    """The value of the option `select_id`'s menu shows as chosen ("" for its first, empty one)."""
    menu = page.split(f'id="{select_id}"', 1)[1].split("</select>", 1)[0]
    found = re.search(r'<option selected value="([^"]*)"|<option value="([^"]*)" selected', menu)
    return next(value for value in found.groups() if value is not None) if found else ""


def test_a_refused_switch_leaves_each_menu_showing_what_is_so(portal_app, auth, client, production_store):
    auth.login("admin")
    refused = switch(client, "staging", "Staging")
    assert refused.status_code == 400
    assert selected_in(refused.text, "preview_environment") == ""  # no preview is active: the menu says so
    assert selected_in(refused.text, "environment") == "staging"  # what was asked, with its error
    assert preview(client, "staging").status_code == 303
    token = csrf_token(client.get("/admin/environment").text)
    refused = client.post("/admin/environment/preview", data={"csrf_token": token, "environment": "qa"})
    assert refused.status_code == 400
    assert selected_in(refused.text, "environment") == "staging"  # the switch menu offers the other one, as before


def test_staff_cannot_switch(portal_app, auth, client, production_store, staging_store):
    auth.login("staff")
    token = csrf_token(client.get("/animals").text)
    response = client.post(
        "/admin/environment", data={"csrf_token": token, "environment": "staging", "confirm": "staging"}
    )
    assert response.status_code == 403
    assert served_by(client, production_store, staging_store) == "production"


def test_a_switch_needs_the_csrf_token(portal_app, auth, client, production_store, staging_store):
    auth.login("admin")
    response = client.post("/admin/environment", data={"environment": "staging", "confirm": "staging"})
    assert response.status_code == 400
    assert served_by(client, production_store, staging_store) == "production"


def test_a_session_restored_from_remember_me_must_log_in_again_to_switch(
    portal_app, auth, client, production_store, staging_store
):
    auth.login("admin", remember=True)
    client.delete_cookie("session")  # the browser was closed; only the remember-me cookie is left
    assert client.get("/admin/environment").status_code == 200
    stale = switch(client, "staging")
    assert stale.status_code == 303
    assert stale.headers["Location"] == "/login?next=/admin/environment"
    assert served_by(client, production_store, staging_store) == "production"
    auth.login("admin", next_path="/admin/environment")
    assert switch(client, "staging").status_code == 303
    assert served_by(client, production_store, staging_store) == "staging"


# --- previewing for oneself -----------------------------------------------------------------------


def test_a_preview_serves_only_that_admins_session(portal_app, auth, client, production_store, staging_store):
    auth.login("admin")
    assert preview(client, "staging").status_code == 303
    customer = portal_app.test_client()
    assert served_by(client, production_store, staging_store) == "staging"
    assert served_by(customer, production_store, staging_store) == "production"
    form = client.get("/animals/new").text
    assert "This animal will be added to <strong>staging</strong>" in form
    assert "(your preview only)" in form
    assert preview(client, "").status_code == 303
    assert served_by(client, production_store, staging_store) == "production"
    assert [(e.environment, e.details) for e in audit_entries(portal_app, "preview_changed")] == [
        ("staging", None),
        (None, {"code": "preview_cleared"}),
    ]
    assert_keys_stayed_home(production_store, staging_store)


def test_a_form_opened_during_a_preview_is_not_sent_elsewhere_after_it_ends(
    portal_app, auth, client, production_store, staging_store
):
    from support.helpers import submission_token

    auth.login("admin")
    preview(client, "staging")
    page = client.get("/animals/new").text
    data = {
        "csrf_token": csrf_token(page),
        "submission_token": submission_token(page),
        "name": "Drifter",
        "category_id": "1",
    }
    preview(client, "")
    response = client.post("/animals/new", data=data)
    assert response.status_code == 409
    assert "opened for staging, but the portal now serves production" in response.text
    assert [r for r in production_store.received + staging_store.received if r.method == "POST"] == []


# --- the audit log --------------------------------------------------------------------------------


def test_the_audit_log_shows_every_kind_of_action_newest_first(portal_app, auth, client):
    auth.login("staff", password="wrong password")
    auth.login("admin")
    switch(client, "staging")
    preview(client, "production")
    page = client.get("/admin/audit")
    assert page.status_code == 200
    actions = ["preview changed", "environment switched", "login", "login failed"]
    positions = [page.text.index(f'<td data-label="What">{action}</td>') for action in actions]
    assert positions == sorted(positions)
    assert "from production to staging" in page.text
    auth.logout()
    assert audit_entries(portal_app, "logout")[0].actor == "admin"


def test_the_audit_log_is_paginated_and_survives_a_restart(portal_app, auth, client):
    from petportal import create_app

    portal_app.config.update(
        LOGIN_LIMIT_PER_ACCOUNT_ADDRESS="100 per minute",
        LOGIN_LIMIT_PER_ACCOUNT="100 per minute",
        LOGIN_LIMIT_PER_ADDRESS="100 per minute",
    )
    for number in range(30):  # from 30 addresses: failures from one address are counted on one entry
        auth.login("staff", password=f"wrong {number}", address=f"198.51.100.{number}")
    auth.login("admin")
    first = client.get("/admin/audit")
    second = client.get("/admin/audit?page=2")
    assert first.text.count('<td data-label="What">login failed</td>') == 24  # plus the admin's own login, newest
    assert second.text.count('<td data-label="What">login failed</td>') == 6
    assert re.search(r'href="\s*/admin/audit\?page=2"', first.text)
    # A page number in other digits (Arabic-Indic 2, full-width 2) is no whole number: the first page, as for "x".
    for page in ("\u0662", "\uff12", "x"):
        assert client.get(f"/admin/audit?page={page}").text.count('<td data-label="What">login failed</td>') == 24
    restarted = create_app(dict(portal_app.config))
    with restarted.app_context():
        assert db.session.scalar(db.select(db.func.count()).select_from(AuditEntry)) == 31
    restarted.extensions["petportal.petstore.environments"].close()


def test_the_audit_log_never_holds_a_password_or_a_key(portal_app, auth, client):
    auth.login("staff", password=PASSWORDS["admin"])
    auth.login("admin")
    switch(client, "staging")
    with portal_app.app_context():
        text = " ".join(
            f"{e.actor} {e.action} {e.environment} {e.details}" for e in db.session.scalars(db.select(AuditEntry))
        )
    for secret in (*PASSWORDS.values(), PRODUCTION_KEY, STAGING_KEY):
        assert secret not in text


# --- the status page ------------------------------------------------------------------------------


def test_the_status_page_shows_a_healthy_store(make_portal):
    # The page's probes share one upstream timeout; the tests' 1 s can run out on a machine busy with other tests.
    client = make_portal(UPSTREAM_TIMEOUT=10.0).test_client()
    AuthActions(client).login("admin")
    page = client.get("/admin/status")
    assert page.status_code == 200
    assert page.text.count('<dt class="col-6">Reachable</dt><dd class="col-6">yes</dd>') == 2
    assert page.text.count('<dt class="col-6">Key accepted</dt><dd class="col-6">yes</dd>') == 2
    assert " ms</dd>" in page.text
    assert "deprecated since 2024-12-05; removal on 2030-12-05" in page.text
    assert "<code>getPet</code>: deprecated</li>" in page.text  # never "stable, deprecated"
    assert "will be removed on 2030-12-05" in page.text


def test_the_status_page_names_a_rejected_key_and_a_store_that_is_down(make_portal, tmp_path, production_store):
    with FaultServer() as closed:
        down = closed.base_url
    config = portal_config(tmp_path, production_store.url, down)
    config["PETSTORE_ENVIRONMENTS"]["production"]["key"] = "wrong-key-" + "0" * 16
    app = make_portal.build(config)
    client = app.test_client()
    AuthActions(client).login("admin")
    page = client.get("/admin/status")
    assert page.status_code == 200
    assert "The production key was rejected by the pet store." in page.text
    assert "Not reachable: The pet store could not be reached." in page.text
    assert "Traceback" not in page.text
    # Nothing the page could not know: the store publishes its description, but a refused key never asked for it.
    assert "No API description was published" not in page.text
    assert "Not known: the pet store refused the key, so it was not asked." in page.text
    assert "Not known: the pet store was not asked." in page.text


def test_a_rejected_key_is_told_to_admins_and_hidden_from_customers(
    make_portal, tmp_path, production_store, staging_store
):
    config = portal_config(tmp_path, production_store.url, staging_store.url)
    config["PETSTORE_ENVIRONMENTS"]["production"]["key"] = "wrong-key-" + "0" * 16
    app = make_portal.build(config)
    customer, admin = app.test_client(), app.test_client()
    AuthActions(admin).login("admin")
    customer_page = customer.get("/animals")
    admin_page = admin.get("/animals")
    elsewhere = admin.get("/admin/environment")
    assert customer_page.status_code == 502 and "temporarily unavailable" in customer_page.text
    assert "rejected" not in customer_page.text
    assert admin_page.status_code == 502 and "The production API key was rejected" in admin_page.text
    assert "The production key was rejected by the pet store." in elsewhere.text


# --- getPet's deprecation -------------------------------------------------------------------------


def test_after_the_removal_date_animals_are_found_through_list_pets(
    make_portal, tmp_path, production_store, staging_store
):
    config = portal_config(
        tmp_path, production_store.url, staging_store.url, CLOCK=lambda: datetime(2030, 12, 5, 0, 0, 1, tzinfo=UTC)
    )
    app = make_portal.build(config)
    rex = production_store.animals()[0]
    page = app.test_client().get(f"/animals/{rex['id']}")
    missing = app.test_client().get("/animals/424242")
    assert page.status_code == 200 and "Rex" in page.text
    assert missing.status_code == 404 and "not among the first 100" in missing.text
    assert [r.target for r in production_store.received] == ["/v1/pets?limit=100", "/v1/pets?limit=100"]


def test_before_the_removal_date_get_pet_is_used(make_portal, tmp_path, production_store, staging_store):
    config = portal_config(
        tmp_path, production_store.url, staging_store.url, CLOCK=lambda: datetime(2030, 12, 4, 23, 59, tzinfo=UTC)
    )
    app = make_portal.build(config)
    rex = production_store.animals()[0]
    assert app.test_client().get(f"/animals/{rex['id']}").status_code == 200
    assert [r.target for r in production_store.received] == [f"/v1/pets/{rex['id']}"]


def test_a_store_answering_410_is_read_through_list_pets(make_portal, staging_store):
    with FaultServer() as store:
        store.script(
            answer(410, {"code": "gone", "message": "getPet was removed", "status": 410}),
            answer(200, [{"id": 8, "name": "Fido", "categoryId": 2}]),
        )
        app = make_portal.over(store.base_url, staging_store.url)
        page = app.test_client().get("/animals/8")
    assert page.status_code == 200 and "Fido" in page.text
    assert [r.target for r in store.received] == ["/v1/pets/8", "/v1/pets?limit=100"]


# --- operations endpoints -------------------------------------------------------------------------


def test_healthz_and_readyz_with_a_healthy_store(client):
    assert client.get("/healthz").status_code == 200
    ready = client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json["checks"] == {"database": "ok", "petstore": "ok", "environment": "production"}


@pytest.mark.parametrize("fault", ["wrong key", "store down", "database down"])
def test_readyz_names_the_failing_part(make_portal, tmp_path, production_store, staging_store, fault):
    config = portal_config(tmp_path, production_store.url, staging_store.url)
    if fault == "wrong key":
        config["PETSTORE_ENVIRONMENTS"]["production"]["key"] = "wrong-key-" + "0" * 16
    elif fault == "store down":
        with FaultServer() as closed:
            config["PETSTORE_ENVIRONMENTS"]["production"]["url"] = closed.base_url
    app = make_portal.build(config)
    if fault == "database down":
        with app.app_context():
            db.engine.dispose()
        database = tmp_path / "portal.sqlite"
        database.unlink()
        database.mkdir()  # nothing can open it as a database now
    client = app.test_client()
    ready, healthy = client.get("/readyz"), client.get("/healthz")
    assert healthy.status_code == 200
    assert ready.status_code == 503
    checks = ready.json["checks"]
    failing = {"wrong key": "petstore", "store down": "petstore", "database down": "database"}[fault]
    assert checks[failing] == "unavailable"
    assert [part for part in ("database", "petstore") if checks[part] != "ok"] == [failing]
