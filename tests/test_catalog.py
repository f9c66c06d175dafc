"""What customers see: the list, the filter, one animal, and the pages shown when the store fails."""

import re

import pytest

from support.helpers import PRODUCTION_KEY, post_form
from support.scanning import FIGURES
from support.servers import FaultServer, answer


def upstream_targets(store):
    return [f"{r.method} {r.target}" for r in store.received]


def test_root_redirects_to_the_animal_list(client):
    response = client.get("/")
    assert response.status_code == 302
    assert response.headers["Location"] == "/animals"


def test_list_shows_a_table_with_one_list_pets_call_and_the_key(client, production_store):
    page = client.get("/animals")
    assert page.status_code == 200
    for name in ("Rex", "Mittens", "Goldie", "Nibbles"):
        assert f">{name}<" in page.text
    assert 'class="badge status-badge status-sold">sold<' in page.text
    assert re.search(r'href="/animals/\d+"', page.text)
    assert upstream_targets(production_store) == ["GET /v1/pets?limit=20"]
    assert production_store.received[0].headers["authorization"] == f"Bearer {PRODUCTION_KEY}"


def test_filter_is_sent_upstream_and_the_form_keeps_its_values(client, production_store):
    page = client.get("/animals?status=sold&limit=5")
    assert page.status_code == 200
    assert ">Goldie<" in page.text and ">Rex<" not in page.text
    assert upstream_targets(production_store) == ["GET /v1/pets?limit=5&status=sold"]
    assert '<option selected value="sold">' in page.text
    assert 'value="5"' in page.text


def test_empty_status_means_all_animals(client, production_store):
    assert client.get("/animals?status=&limit=20").status_code == 200
    assert upstream_targets(production_store) == ["GET /v1/pets?limit=20"]


@pytest.mark.parametrize(
    "query, field, message",
    [
        ("limit=0", "limit", "from 1 to 100"),
        ("limit=101", "limit", "from 1 to 100"),
        ("limit=-3", "limit", "from 1 to 100"),
        (f"limit={10**400}", "limit", "from 1 to 100"),
        ("limit=abc", "limit", "Choose a number from 1 to 100."),
        ("limit=1.5", "limit", "Choose a number from 1 to 100."),
        ("limit=%D9%A1%D9%A0", "limit", "Choose a number from 1 to 100."),
        ("limit=%EF%BC%99", "limit", "Choose a number from 1 to 100."),
        ("limit=1_0", "limit", "Choose a number from 1 to 100."),
        ("status=foo", "status", "Not a valid choice"),
    ],
)
def test_invalid_filter_values_give_400_next_to_the_field_and_no_upstream_call(
    client, production_store, query, field, message
):
    page = client.get(f"/animals?{query}")
    assert page.status_code == 400
    # Bootstrap-Flask renders a field's errors right after its input, marked invalid.
    assert re.search(rf'id="{field}"[^>]*>.*?invalid-feedback[^>]*>[^<]*{message}', page.text, re.DOTALL) or re.search(
        rf'is-invalid[^>]*id="{field}".*?invalid-feedback[^>]*>[^<]*{message}', page.text, re.DOTALL
    )
    assert production_store.received == []


def test_exactly_limit_rows_says_more_may_exist_and_offers_a_larger_limit(client):
    page = client.get("/animals?limit=2")
    assert "The pet store may have more animals than the 2 fetched" in page.text
    assert 'href="/animals?limit=4"' in page.text
    assert "of 4" not in page.text and "4 animals" not in page.text


def test_fewer_rows_than_limit_shows_no_hint(client):
    assert "may be more" not in client.get("/animals?limit=5").text


def test_an_empty_store_shows_the_empty_state(make_portal, staging_store):
    with FaultServer() as empty:
        empty.script(answer(200, []))
        app = make_portal.over(empty.base_url, staging_store.url)
        page = app.test_client().get("/animals?status=sold")
    assert page.status_code == 200
    assert "No animals here" in page.text
    assert "Show all animals" in page.text


def test_names_from_upstream_are_escaped(client, production_store):
    FIGURES["hostile_inputs"] += 1
    production_store.add("<script>alert('x')</script>", 1, "available")
    page = client.get("/animals")
    assert "<script>alert" not in page.text
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in page.text
    pet_id = production_store.animals()[-1]["id"]
    detail = client.get(f"/animals/{pet_id}")
    assert "<script>alert" not in detail.text and "&lt;script&gt;" in detail.text


def test_detail_page_shows_the_animal_with_one_get_pet_call(client, production_store):
    rex = production_store.animals()[0]
    page = client.get(f"/animals/{rex['id']}?status=available&limit=5")
    assert page.status_code == 200
    assert "<h1" in page.text and "Rex" in page.text
    assert 'href="/animals?limit=5&amp;status=available"' in page.text
    assert upstream_targets(production_store) == [f"GET /v1/pets/{rex['id']}"]


@pytest.mark.parametrize(
    "language, said",
    [
        ("en", "The pet store offers no way to edit or delete an animal, so this page has none."),
        ("de", "Der Tierladen bietet keine Möglichkeit, ein Tier zu bearbeiten oder zu löschen"),
        ("es", "La tienda de mascotas no permite editar ni borrar un animal"),
    ],
)
def test_the_detail_page_says_once_that_the_store_offers_no_edit_or_delete(client, production_store, language, said):
    """People looked for an edit or delete button: the page says, once and in their language, there is none."""
    client.set_cookie("language", language)
    page = client.get(f"/animals/{production_store.animals()[0]['id']}").text
    assert page.count(said) == 1


def test_an_animal_without_status_says_so(client, production_store):
    nibbles = production_store.animals()[3]
    assert "not given" in client.get(f"/animals/{nibbles['id']}").text


def test_unknown_id_gives_the_404_page(client):
    page = client.get("/animals/999999")
    assert page.status_code == 404
    assert "No animal has this id" in page.text


@pytest.mark.parametrize(
    "path",
    [
        "/animals/99999999999999999999999",
        f"/animals/{2**63}",
        "/animals/" + "9" * 5000,
        "/animals/abc",
        "/animals/-1",
        "/animals/%D9%A1",
        "/animals/%EF%BC%99",
    ],
)
def test_ids_that_cannot_exist_give_404_without_an_upstream_call(client, production_store, path):
    page = client.get(path)
    assert page.status_code == 404
    assert "There is nothing at this address." in page.text  # the address matches no page: the store is not asked
    assert production_store.received == []


# --- the store failing ----------------------------------------------------------------------------


@pytest.fixture
def faulty_portal(make_portal, staging_store, fault_server):
    app = make_portal.over(fault_server.base_url, staging_store.url)
    yield app.test_client()


def assert_friendly_page(page, status):
    assert page.status_code == status
    assert "Traceback" not in page.text
    assert re.search(r"Request id: <code>[0-9a-f]{32}</code>", page.text)
    assert page.headers["X-Request-ID"] in page.text


def test_a_store_that_does_not_answer_gives_the_503_page_with_a_retry_link(make_portal, staging_store):
    with FaultServer() as closed:
        url = closed.base_url
    app = make_portal.over(url, staging_store.url)
    page = app.test_client().get("/animals?status=sold")
    assert_friendly_page(page, 503)
    assert "The pet store is not answering" in page.text
    assert 'href="/animals?status=sold"' in page.text


REX = {"id": 7, "name": "Rex the reliable", "categoryId": 1, "status": "available"}
STALE_NOTICE = "The pet store is not answering. This is its answer as of"


@pytest.mark.parametrize(("stale_seconds", "stands_in"), [(3600, True), (0, False)])
def test_a_5xx_shows_the_last_good_answer_to_the_same_call_unless_turned_off(
    make_portal, staging_store, fault_server, stale_seconds, stands_in
):
    app = make_portal.over(fault_server.base_url, staging_store.url, STALE_SECONDS=stale_seconds)
    visitor = app.test_client()
    down = answer(503, b"<h1>UPSTREAM-INTERNALS</h1>", content_type="text/html")
    fault_server.script(answer(200, [REX]), answer(200, REX), down)
    assert visitor.get("/animals").status_code == 200 and visitor.get("/animals/7").status_code == 200
    for path in ("/animals", "/animals/7", "/animals?limit=20&sort=name&q=rex"):  # the last: the same call
        page = visitor.get(path)
        if stands_in:
            assert page.status_code == 200 and "Rex the reliable" in page.text and STALE_NOTICE in page.text
            assert "no-store" in page.headers["Cache-Control"] and "ETag" not in page.headers
        else:
            assert_friendly_page(page, 503)
    for never_made in ("/animals?status=sold", "/animals?limit=21", "/animals/8"):
        assert_friendly_page(visitor.get(never_made), 503)
    assert "UPSTREAM-INTERNALS" not in visitor.get("/animals").text


def test_another_environments_last_good_answer_never_stands_in(make_portal, auth_for, production_store, fault_server):
    app = make_portal.over(production_store.url, fault_server.base_url)
    assert "Rex" in app.test_client().get("/animals").text
    admin = auth_for(app, "admin")
    post_form(admin, "/admin/environment", "/admin/environment/preview", environment="staging")
    fault_server.script(answer(503, b"down", content_type="text/plain"))
    page = admin.get("/animals")
    assert_friendly_page(page, 503)
    assert "Rex" not in page.text


@pytest.mark.parametrize("status", [500, 502, 504])
def test_5xx_gives_the_503_page_without_the_upstream_body(faulty_portal, fault_server, status):
    fault_server.script(answer(status, b"<h1>UPSTREAM-INTERNALS stack</h1>", content_type="text/html"))
    page = faulty_portal.get("/animals")
    assert_friendly_page(page, 503)
    assert "UPSTREAM-INTERNALS" not in page.text


def test_a_rejected_key_tells_customers_only_that_the_store_is_unavailable(faulty_portal, fault_server):
    fault_server.script(answer(401, {"code": "unauthorized", "message": "KEY-REJECTED-DETAIL", "status": 401}))
    page = faulty_portal.get("/animals")
    assert_friendly_page(page, 502)
    assert "temporarily unavailable" in page.text
    assert "KEY-REJECTED-DETAIL" not in page.text and "key" not in page.text.lower()


@pytest.mark.parametrize(
    "body",
    [
        b"{not json",
        b'[{"id": 1, "name": null, "categoryId": 1}]',
        b'{"id": 1}',
        b'[{"id": "1", "name": "x", "categoryId": 1}]',
    ],
)
def test_malformed_or_misshapen_answers_give_502_and_are_logged_with_the_request_id(
    faulty_portal, fault_server, caplog, body
):
    fault_server.script(answer(200, body))
    page = faulty_portal.get("/animals")
    assert_friendly_page(page, 502)
    logged = [r for r in caplog.records if "unusable answer" in r.getMessage()]
    assert logged and logged[0].request_id == page.headers["X-Request-ID"]


def test_the_request_id_is_sent_upstream(faulty_portal, fault_server):
    fault_server.script(answer(200, []))
    page = faulty_portal.get("/animals")
    assert fault_server.received[0].headers["x-request-id"] == page.headers["X-Request-ID"]
