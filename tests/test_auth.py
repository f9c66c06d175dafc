"""Staff and admin accounts: login, logout, the `next` parameter, and who may open what."""

from urllib.parse import urljoin, urlsplit

import pytest

from petportal.data.models import AuditEntry
from petportal.extensions import db

from support.helpers import PASSWORDS
from support.portal import csrf_token
from support.scanning import FIGURES

HOSTILE_NEXT = [
    "https://evil.example/",
    "http://evil.example/animals",
    "//evil.example/",
    "///evil.example/",
    "////evil.example",
    "/\\evil.example",
    "\\\\evil.example",
    "\\/evil.example",
    "/\\/evil.example",
    "https:evil.example",
    "http:/evil.example",
    "javascript:alert(1)",
    "JaVaScRiPt:alert(1)",
    "data:text/html,<script>alert(1)</script>",
    "vbscript:msgbox(1)",
    "evil.example",
    "animals",
    " //evil.example",
    "\t//evil.example",
    "/\t/evil.example",
    "/\n/evil.example",
    "/%09/evil.example",
    "%2F%2Fevil.example",
    "/%2F/evil.example",
    "https://127.0.0.1@evil.example/",
    "//127.0.0.1@evil.example",
    "http://localhost:5000@evil.example",
    "ftp://evil.example",
    "//evil.example/%2e%2e",
    "/\x00/evil.example",
    "\u3002evil.example",
    "//evil\u3002example",
    "/\u2215\u2215evil.example",
    "https://evil.example/?next=/animals",
]


def test_login_page_has_the_contract_fields(client):
    page = client.get("/login")
    assert page.status_code == 200
    for field in ("username", "password", "csrf_token"):
        assert f'name="{field}"' in page.text


def test_login_goes_on_to_a_local_next_path(auth):
    response = auth.login("staff", next_path="/animals?status=sold")
    assert response.status_code == 303
    assert response.headers["Location"] == "/animals?status=sold"


@pytest.mark.parametrize("target", HOSTILE_NEXT)
def test_a_hostile_next_never_leaves_the_site(auth, target):
    FIGURES["hostile_inputs"] += 1
    response = auth.login("staff", next_path=target)
    assert response.status_code == 303
    location = response.headers["Location"]
    assert location.startswith("/") and not location.startswith(("//", "/\\"))
    assert "\\" not in location and not any(ord(char) < 32 for char in location)
    assert urlsplit(urljoin("http://portal.test/login", location)).netloc == "portal.test"


def test_there_are_more_than_thirty_hostile_next_values():
    assert len(HOSTILE_NEXT) >= 31


def test_a_wrong_password_is_refused_and_audited(portal_app, auth):
    response = auth.login("staff", password="not-the-password")
    assert response.status_code == 401
    assert "Unknown user name or wrong password." in response.text
    unknown = auth.login("nobody", password="whatever-it-is")
    assert unknown.status_code == 401
    with portal_app.app_context():
        failures = db.session.scalars(db.select(AuditEntry).filter_by(action="login_failed")).all()
    assert [entry.actor for entry in failures] == ["staff", "nobody"]
    assert all("not-the-password" not in str(entry.details) for entry in failures)


def test_login_clears_the_session_it_started_with(client, auth):
    with client.session_transaction() as session:
        session["planted"] = "by an attacker"
    auth.login("staff")
    with client.session_transaction() as session:
        assert "planted" not in session
        assert session["_user_id"]


def test_logout_is_a_post_with_a_csrf_token(client, auth):
    auth.login("staff")
    assert client.get("/logout").status_code == 405
    refused = client.post("/logout")
    assert refused.status_code == 400
    assert client.get("/animals/new").status_code == 200
    done = auth.logout()
    assert done.status_code == 303 and done.headers["Location"] == "/animals"
    assert client.get("/animals/new").status_code == 302


def test_staff_see_add_animal_in_the_navigation_and_customers_do_not(client, auth):
    assert "Add animal" not in client.get("/animals").text
    auth.login("staff")
    page = client.get("/animals")
    assert "Add animal" in page.text and "staff (staff)" in page.text


def test_admins_may_add_animals_too(client, auth):
    auth.login("admin")
    assert client.get("/animals/new").status_code == 200


def test_login_form_without_csrf_token_is_refused(client):
    response = client.post("/login", data={"username": "staff", "password": PASSWORDS["staff"]})
    assert response.status_code == 400
    assert client.get("/animals/new").status_code == 302
    assert csrf_token(client.get("/login").text)


def test_a_static_files_request_never_writes_back_a_session_it_read_before_a_change(portal_app, client):
    """A page's files are fetched while its next request may be changing the session. A file's request that had
    read the session before a CSRF token was made would, by saving it, take the token away again."""
    from petportal.data.models import ServerSession

    client.get("/login")  # the session, with its CSRF token

    def stored():
        with portal_app.app_context():
            return [(row.data, row.expires_at) for row in db.session.scalars(db.select(ServerSession))]

    before = stored()
    assert before
    for path in ("/static/js/portal.js", "/bootstrap/static/css/bootstrap.min.css", "/static/favicon.svg"):
        assert client.get(path).status_code == 200
    assert stored() == before
    client.get("/animals")  # a page's request still refreshes it
