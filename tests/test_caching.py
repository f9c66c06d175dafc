"""The micro-cache: anonymous list and detail pages only, per environment and query, never stale after an add."""

import gzip
import socket
import time

import brotli
import pytest

from support.helpers import AuthActions, submission_token
from support.portal import csrf_token
from support.servers import serve


@pytest.fixture
def cached_portal(make_portal):
    return make_portal(CACHE_SECONDS=1)


def list_calls(store):
    return [r.target for r in store.received if r.method == "GET" and r.target.startswith("/v1/pets?")]


def test_anonymous_pages_are_served_from_the_cache_for_at_most_the_configured_seconds(cached_portal, production_store):
    client = cached_portal.test_client()
    first = client.get("/animals")
    second = client.get("/animals")
    assert first.text == second.text
    assert list_calls(production_store) == ["/v1/pets?limit=20"]
    time.sleep(1.2)
    client.get("/animals")
    assert len(list_calls(production_store)) == 2


def test_each_query_and_each_animal_is_cached_on_its_own(cached_portal, production_store):
    client = cached_portal.test_client()
    rex = production_store.animals()[0]["id"]
    for path in (
        "/animals?status=sold",
        "/animals?status=sold",
        "/animals?status=pending",
        f"/animals/{rex}",
        f"/animals/{rex}",
    ):
        assert client.get(path).status_code == 200
    assert [r.target for r in production_store.received] == [
        "/v1/pets?limit=20&status=sold",
        "/v1/pets?limit=20&status=pending",
        f"/v1/pets/{rex}",
    ]


def test_an_animal_added_through_the_portal_shows_at_once(cached_portal, production_store, auth_for):
    visitor = cached_portal.test_client()
    assert "Fresh" not in visitor.get("/animals").text
    staff = auth_for(cached_portal, "staff")
    form = staff.get("/animals/new").text
    staff.post(
        "/animals/new",
        data={
            "csrf_token": csrf_token(form),
            "submission_token": submission_token(form),
            "name": "Fresh",
            "category_id": "1",
        },
    )
    assert "Fresh" in visitor.get("/animals").text


def test_switching_environments_never_serves_the_other_environments_page(cached_portal, staging_store, auth_for):
    visitor = cached_portal.test_client()
    assert "Staging Sam" not in visitor.get("/animals").text
    admin = auth_for(cached_portal, "admin")
    page = admin.get("/admin/environment").text
    admin.post(
        "/admin/environment", data={"csrf_token": csrf_token(page), "environment": "staging", "confirm": "staging"}
    )
    assert "Staging Sam" in visitor.get("/animals").text


def test_logged_in_pages_and_forms_are_never_cached(cached_portal, production_store, auth_for):
    staff = auth_for(cached_portal, "staff")
    for _ in range(2):
        page = staff.get("/animals")
        assert page.headers["Cache-Control"] == "no-store"
        assert "ETag" not in page.headers
    assert len(list_calls(production_store)) == 2
    for path in ("/animals/new", "/login"):
        assert staff.get(path).headers["Cache-Control"] == "no-store"


def test_a_visitor_with_a_flash_message_gets_a_page_of_their_own(cached_portal, production_store, auth_for):
    staff = auth_for(cached_portal, "staff")
    page = staff.get("/animals").text
    staff.post("/logout", data={"csrf_token": csrf_token(page)})
    assert "Logged out." in staff.get("/animals").text
    assert "Logged out." not in cached_portal.test_client().get("/animals").text


@pytest.mark.parametrize("seconds", [0, 1])
def test_list_and_detail_pages_answer_if_none_match_with_304(make_portal, production_store, staging_store, seconds):
    app = make_portal(CACHE_SECONDS=seconds)
    client = app.test_client()
    rex = production_store.animals()[0]["id"]
    for path in ("/animals?limit=5", f"/animals/{rex}"):
        page = client.get(path)
        assert page.headers["ETag"] and page.headers["Cache-Control"] == "no-cache"
        again = client.get(path, headers={"If-None-Match": page.headers["ETag"]})
        assert again.status_code == 304 and again.data == b""


def test_with_caching_off_every_visit_asks_the_store(make_portal, production_store, staging_store):
    app = make_portal(CACHE_SECONDS=0)
    client = app.test_client()
    for _ in range(3):
        client.get("/animals")
    assert len(list_calls(production_store)) == 3


@pytest.mark.parametrize("compressed", [False, True])
@pytest.mark.parametrize("conditional", [False, True])
def test_a_page_has_one_date_header_whether_fresh_or_replayed(make_portal, production_store, conditional, compressed):
    """The server writes the Date; the portal writes none of its own (Werkzeug's make_conditional would)."""
    app = make_portal(CACHE_SECONDS=30)
    extra = b'If-None-Match: "not-this-one"\r\n' if conditional else b""
    extra += b"Accept-Encoding: br\r\n" if compressed else b""
    with serve(app) as origin:
        port = int(origin.rsplit(":", 1)[1])
        for _ in range(2):  # fresh, then from the cache
            with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
                conn.sendall(b"GET /animals HTTP/1.1\r\nHost: 127.0.0.1\r\n" + extra + b"Connection: close\r\n\r\n")
                head = b""
                while b"\r\n\r\n" not in head and (chunk := conn.recv(65536)):
                    head += chunk
            lines = head.split(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")
            assert lines[0].startswith("HTTP/1.1 200")
            assert sum(line.lower().startswith("date:") for line in lines) == 1, lines
            assert ("content-encoding: br" in (line.lower() for line in lines)) is compressed, lines
    assert len(list_calls(production_store)) == 1


# Headers that differ between any two responses, cached or not: each request has its own id and date.
PER_RESPONSE = {"Date", "X-Request-ID"}


@pytest.mark.parametrize("https", [False, True])
@pytest.mark.parametrize("path", ["/animals?limit=5", "/animals/{rex}"])
def test_a_cached_page_carries_exactly_the_headers_of_a_fresh_one(make_portal, production_store, https, path):
    """Header for header: the security headers, X-Request-ID, the ETag and the cache rules hold for both."""
    app = make_portal(CACHE_SECONDS=30, HTTPS=https, TRUSTED_HOSTS=["portal.example"])
    client = app.test_client()
    url = path.format(rex=production_store.animals()[0]["id"])
    base_url = f"{'https' if https else 'http'}://portal.example"
    fresh = client.get(url, base_url=base_url)
    cached = client.get(url, base_url=base_url)
    assert fresh.status_code == cached.status_code == 200
    assert len([r for r in production_store.received if r.method == "GET"]) == 1, "the second page was not cached"
    assert fresh.text == cached.text
    assert sorted(fresh.headers.keys()) == sorted(cached.headers.keys())
    for name, value in fresh.headers.items():
        if name not in PER_RESPONSE:
            assert cached.headers[name] == value, name
    assert fresh.headers["X-Request-ID"] != cached.headers["X-Request-ID"]
    for name in ("Content-Security-Policy", "X-Frame-Options", "X-Content-Type-Options", "Referrer-Policy"):
        assert name in cached.headers, name
    assert ("Strict-Transport-Security" in cached.headers) is https


def test_a_stored_page_never_answers_a_request_that_flask_would_refuse_or_redirect(make_portal, production_store):
    """The HTTPS rule and the trusted hosts hold for cached pages too: a stored page is only replayed to a
    request of the same scheme and host."""
    app = make_portal(CACHE_SECONDS=30, HTTPS=True, TRUSTED_HOSTS=["portal.example"])
    client = app.test_client()
    assert client.get("/animals", base_url="https://portal.example").status_code == 200
    assert client.get("/animals", base_url="https://portal.example").status_code == 200
    assert len([r for r in production_store.received if r.method == "GET"]) == 1, "the second page was not cached"
    plain = client.get("/animals", base_url="http://portal.example")
    assert plain.status_code == 301 and plain.headers["Location"] == "https://portal.example/animals"
    assert client.get("/animals", base_url="https://evil.example").status_code == 400
    forged = client.get("/animals", base_url="https://portal.example", headers={"Host": "evil.example"})
    assert forged.status_code == 400


def test_a_stored_page_answers_head_too(make_portal, production_store):
    app = make_portal(CACHE_SECONDS=30)
    client = app.test_client()
    page = client.get("/animals")
    head = client.head("/animals")
    assert head.status_code == 200 and head.data == b""
    assert head.headers["Content-Length"] == str(len(page.data))
    assert len([r for r in production_store.received if r.method == "GET"]) == 1


def test_a_visitor_kept_logged_in_gets_their_own_page_even_when_one_is_stored(make_portal, production_store):
    app = make_portal(CACHE_SECONDS=30)
    app.test_client().get("/animals")  # stored for visitors without cookies
    staff = app.test_client()
    AuthActions(staff).login("staff", remember=True)
    staff.delete_cookie("session")  # a new browser session: only the remember-me cookie is left
    page = staff.get("/animals").text
    assert "staff (staff)" in page


@pytest.mark.parametrize("query", ["x=1", "utm_source=mail", "q=%20%20", "limit=020", "limit=20&limit=7", "sort=&q="])
def test_junk_in_a_url_is_read_as_the_page_reads_it_and_cannot_bypass_the_cache(make_portal, production_store, query):
    """Each of these reads as the plain list: it is answered from the page kept for it, with one listPets call."""
    anyone = make_portal(CACHE_SECONDS=30).test_client()
    first = anyone.get("/animals")
    again = anyone.get(f"/animals?{query}")
    assert again.status_code == 200 and again.data == first.data
    assert len(list_calls(production_store)) == 1


def test_a_host_header_cannot_make_a_page_that_is_not_kept(make_portal, production_store):
    """A page names no host: any host the portal answers to shares one kept page (a host in the key let every
    made-up Host header, or port, render afresh)."""
    anyone = make_portal(CACHE_SECONDS=30, TRUSTED_HOSTS=["portal.example"]).test_client()
    for host in ("portal.example", "portal.example:1001", "portal.example:1002"):
        assert anyone.get("/animals", headers={"Host": host}).status_code == 200
    for refused in ("elsewhere.example", "PORTAL.example"):  # as Flask refuses them, a kept page or not
        assert anyone.get("/animals", headers={"Host": refused}).status_code == 400
    assert len(list_calls(production_store)) == 1


def test_a_query_read_differently_gets_its_own_page(make_portal, production_store):
    anyone = make_portal(CACHE_SECONDS=30).test_client()
    anyone.get("/animals?limit=5")
    anyone.get("/animals?limit=05&utm_source=mail")
    anyone.get("/animals?limit=6")
    assert list_calls(production_store) == ["/v1/pets?limit=5", "/v1/pets?limit=6"]


def test_a_full_in_process_cache_still_forgets_pages_after_an_add(make_portal, production_store, auth_for):
    """The in-process cache drops entries when full; the generation counters are not the first to go."""
    app = make_portal(CACHE_SECONDS=30, CACHE_THRESHOLD=5)
    anyone = app.test_client()
    anyone.get("/animals?limit=100")
    staff = auth_for(app, "staff")
    page = staff.get("/animals/new").text
    fields = {"csrf_token": csrf_token(page), "submission_token": submission_token(page)}
    staff.post("/animals/new", data={**fields, "name": "Latecomer", "category_id": "1", "status": ""})
    assert "Latecomer" in anyone.get("/animals?limit=100").text
    for limit in range(1, 5):
        anyone.get(f"/animals?limit={limit}")  # takes the cache just past its threshold: it prunes once
    assert "Latecomer" in anyone.get("/animals?limit=100").text


def test_a_host_header_cannot_pass_itself_off_as_part_of_a_path(make_portal, production_store):
    client = make_portal(CACHE_SECONDS=60).test_client()
    for _ in range(2):
        assert client.get("/animals", headers={"Host": "h/animals?status=sold"}).status_code == 200
    # Joined as text, this request's scheme, host, path and query would read like the one stored above.
    odd = client.get("/animals", query_string="status=sold/animals?", headers={"Host": "h"})
    assert odd.status_code == 400


def decoded(page):
    """A page's text, whichever encoding it came in."""
    encoding = page.headers.get("Content-Encoding")
    body = {"br": brotli.decompress, "gzip": gzip.decompress, None: bytes}[encoding](page.data)
    return body.decode()


def test_a_stored_page_is_only_replayed_in_the_encoding_it_was_stored_in(make_portal, production_store):
    """Each encoding is a page of its own in the cache: a browser that takes no Brotli never gets Brotli."""
    app = make_portal(CACHE_SECONDS=30)
    client = app.test_client()
    visits = ["br, gzip", "", "gzip", "gzip, deflate, br, zstd", "identity", "gzip;q=1, br;q=0.5"]
    encodings = []
    for accept in visits:
        page = client.get("/animals?limit=5", headers={"Accept-Encoding": accept})
        assert page.status_code == 200
        assert "Accept-Encoding" in page.headers["Vary"]
        assert "Rex" in decoded(page)
        encodings.append(page.headers.get("Content-Encoding"))
    assert encodings == ["br", None, "gzip", "br", None, "gzip"]
    assert len(list_calls(production_store)) == 3, "one fresh page for each encoding, then replayed"


def test_a_compressed_page_answers_if_none_match_with_304_fresh_and_replayed(make_portal, production_store):
    app = make_portal(CACHE_SECONDS=30)
    client = app.test_client()
    page = client.get("/animals", headers={"Accept-Encoding": "br"})
    for _ in range(2):  # the stored page answers the same
        again = client.get("/animals", headers={"Accept-Encoding": "br", "If-None-Match": page.headers["ETag"]})
        assert again.status_code == 304 and again.data == b""
    # The uncompressed page has another ETag: a validator of one encoding never stands for the other.
    plain = client.get("/animals", headers={"If-None-Match": page.headers["ETag"]})
    assert plain.status_code == 200 and "Content-Encoding" not in plain.headers
