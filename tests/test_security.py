"""Hardening: cookies and session limits, CSRF on every POST, headers, hosts, proxies (login limits:
test_login_limits.py; sessions: test_sessions.py)."""

import re
import subprocess
import sys

import pytest
from flask.testing import FlaskClient

from petportal.config import from_environment
from petportal.data.models import AuditEntry, BulkImport, CategoryLabel, User
from petportal.extensions import db
from petportal.imports import batches, files

from support.helpers import NEW_PASSWORDS, PASSWORDS, AuthActions
from support.portal import csrf_token, portal_environment
from support.servers import run_init_db

POST_ROUTES = [
    "/login",
    "/login/mfa",
    "/logout",
    "/animals/new",
    "/admin/environment",
    "/admin/environment/preview",
    "/admin/users/new",
    "/admin/users/<name>/role",
    "/admin/users/<name>/disable",
    "/admin/users/<name>/enable",
    "/admin/users/<name>/sessions/end",
    "/admin/users/<name>/password",
    "/admin/users/<name>/mfa/reset",
    "/admin/users/<name>/environments",
    "/account/password",
    "/account/sessions/end-others",
    "/account/mfa",
    "/admin/categories",
    "/admin/categories/<int(signed=True):category_id>/remove",
    "/animals/import",
    "/animals/import/<string(length=22):import_id>/start",
    "/animals/import/<string(length=22):import_id>/retry",
    "/animals/import/<string(length=22):import_id>/discard",
    "/animals/promote",
    "/login/passkey/options",
    "/login/passkey",
    "/account/passkeys/options",
    "/account/passkeys",
    "/account/passkeys/<int:passkey_id>/remove",
]
# POST routes that a server calls, without a browser's session: the identity provider's back-channel logout, whose
# signed logout token is its check (tests/test_single_sign_on.py).
CSRF_EXEMPT_ROUTES = ["/login/sso/backchannel-logout"]


def login(client, username="staff", **options):
    return AuthActions(client).login(username, **options)


class HttpsClient(FlaskClient):
    """A test client that reaches the portal over HTTPS, as users do behind TLS."""

    def open(self, *args, **kwargs):
        kwargs.setdefault("base_url", "https://localhost")
        # Over HTTPS, Flask-WTF also checks that a form came from this site, as browsers say it did.
        kwargs.setdefault("headers", {}).setdefault("Referer", "https://localhost/")
        return super().open(*args, **kwargs)


def https_client(app):
    app.test_client_class = HttpsClient
    return app.test_client()


def cookie_attributes(response, name):
    [header] = [h for h in response.headers.getlist("Set-Cookie") if h.startswith(f"{name}=")]
    return {part.strip().split("=")[0].lower() for part in header.split(";")[1:]}, header


# --- row 1: cookies and session limits ------------------------------------------------------------


def test_cookies_are_secure_httponly_and_lax_over_https(make_portal):
    client = https_client(make_portal(HTTPS=True))
    response = login(client, remember=True)
    for name in ("session", "remember", "device"):
        attributes, header = cookie_attributes(response, name)
        assert {"secure", "httponly", "samesite"} <= attributes, header
        assert "SameSite=Lax" in header
    assert "max-age=" in response.headers["Strict-Transport-Security"]


def test_over_plain_http_cookies_are_not_marked_secure_and_no_hsts_is_sent(client):
    response = login(client, remember=True)
    for name in ("session", "remember", "device"):
        attributes, _header = cookie_attributes(response, name)
        assert "secure" not in attributes and {"httponly", "samesite"} <= attributes
    assert "Strict-Transport-Security" not in response.headers


def test_https_mode_sends_plain_http_to_https_on_a_trusted_host(make_portal):
    response = make_portal(HTTPS=True, TRUSTED_HOSTS=["localhost"]).test_client().get("/animals?status=sold")
    assert response.status_code == 301
    assert response.headers["Location"] == "https://localhost/animals?status=sold"


def test_a_session_idle_for_30_minutes_ends(make_portal, clock):
    client = make_portal(CLOCK=clock).test_client()
    login(client)
    clock.advance(minutes=29)
    assert client.get("/animals/new").status_code == 200
    clock.advance(minutes=29)
    assert client.get("/animals/new").status_code == 200
    clock.advance(minutes=31)
    assert client.get("/animals/new").headers["Location"] == "/login?next=/animals/new"


def test_no_session_lasts_longer_than_12_hours_however_active(make_portal, clock):
    client = make_portal(CLOCK=clock).test_client()
    login(client, remember=True)
    for _ in range(35):  # 35 x 20 minutes = 11 h 40 min of steady use
        clock.advance(minutes=20)
        assert client.get("/animals/new").status_code == 200
    clock.advance(minutes=21)
    ended = client.get("/animals/new")
    assert ended.headers["Location"] == "/login?next=/animals/new"
    client.delete_cookie("session")
    assert client.get("/animals/new").status_code == 302, "the remember-me cookie outlived the 12 hours"


def test_after_an_idle_timeout_remember_me_restores_a_session_that_is_not_fresh(make_portal, clock):
    client = make_portal(CLOCK=clock).test_client()
    login(client, "admin", remember=True)
    clock.advance(minutes=45)
    assert client.get("/animals/new").status_code == 200
    page = client.get("/admin/environment")
    assert "You will be asked to log in again" in page.text


# --- row 2: CSRF on every POST, state changes only through POST -----------------------------------


def test_every_post_route_is_in_the_csrf_table(portal_app):
    posting = sorted(rule.rule for rule in portal_app.url_map.iter_rules() if "POST" in rule.methods)
    assert posting == sorted(POST_ROUTES + CSRF_EXEMPT_ROUTES)


@pytest.mark.parametrize("path", POST_ROUTES)
def test_a_post_without_csrf_token_is_refused_and_changes_nothing(
    portal_app, client, production_store, staging_store, path
):
    login(client, "admin")
    token = csrf_token(client.get("/animals/new").text)
    form = re.search(r'name="submission_token" type="hidden" value="([^"]*)"', client.get("/animals/new").text).group(1)
    fields = {
        "username": "admin",
        "password": PASSWORDS["admin"],
        "name": "Sneaky",
        "category_id": "1",
        "environment": "staging",
        "confirm": "staging",
        "submission_token": form,
        "role": "admin",
        "current_password": PASSWORDS["admin"],
        "new_password": NEW_PASSWORDS[0],
        "code": "123456",
        "label": "Sneaky",
    }
    other = portal_app.test_client()
    login(other, "staff")
    import_id = previewed_import(portal_app)
    path = (
        path.replace("<name>", "staff").replace("<int(signed=True):category_id>", "1").replace("<int:passkey_id>", "1")
    )
    response = client.post(path.replace("<string(length=22):import_id>", import_id), data=fields)
    assert response.status_code == 400
    assert "expired or was not sent from this site" in response.text
    assert [r for r in production_store.received + staging_store.received if r.method == "POST"] == []
    assert client.get("/animals/new").status_code == 200, "the user was logged out"
    assert other.get("/animals/new").status_code == 200, "the staff member was logged out"
    assert "You are using" not in client.get("/animals").text
    with portal_app.app_context():
        accounts = {user.username: user for user in db.session.scalars(db.select(User))}
    assert sorted(accounts) == ["admin", "staff"]
    assert [(user.role, user.enabled, user.mfa_enabled) for user in accounts.values()] == [
        (user.username, True, False) for user in accounts.values()
    ]
    assert accounts["admin"].check_password(PASSWORDS["admin"]) and accounts["staff"].check_password(PASSWORDS["staff"])
    with portal_app.app_context():
        assert db.session.scalars(db.select(CategoryLabel)).all() == []
        assert [(batch.id, batch.state) for batch in db.session.scalars(db.select(BulkImport))] == [
            (import_id, "preview")
        ]
    assert token


def previewed_import(app):
    """An import of one animal, previewed by the admin and not started; its id."""
    with app.test_request_context():
        admin = db.session.scalar(db.select(User).where(User.username == "admin"))
        raw = b"name,categoryId,status\nSneaky,1,\n"
        batch_id = batches.create(admin, "production", "a.csv", raw, files.read(raw, {})).id
        db.session.commit()  # the test is the unit of work here
        return batch_id


@pytest.mark.parametrize(
    "path", ["/logout", "/admin/environment/preview", "/admin/users/staff/disable", "/account/sessions/end-others"]
)
def test_get_on_a_post_only_route_is_405(client, path):
    login(client, "admin")
    assert client.get(path).status_code == 405


def test_a_request_refused_by_csrf_has_a_request_id(client):
    response = client.post("/login", data={"username": "staff", "password": "x"})
    assert response.status_code == 400
    assert response.headers["X-Request-ID"] in response.text


def test_a_405_names_the_methods_allowed(client):
    response = client.get("/logout")
    assert response.status_code == 405
    assert response.headers["Allow"] == "OPTIONS, POST"


# --- row 4: security headers everywhere -----------------------------------------------------------


@pytest.fixture
def headers_portal(make_portal):
    app = make_portal(HTTPS=True)
    app.add_url_rule("/explode", "explode", lambda: 1 / 0)
    return app


@pytest.mark.parametrize(
    "method, path, status",
    [
        ("GET", "/", 302),
        ("GET", "/animals", 200),
        ("GET", "/animals?limit=0", 400),
        ("GET", "/animals/999999", 404),
        ("GET", "/no/such/page", 404),
        ("GET", "/login", 200),
        ("GET", "/animals/new", 302),
        ("GET", "/logout", 405),
        ("POST", "/logout", 400),
        ("GET", "/explode", 500),
        ("GET", "/healthz", 200),
        ("GET", "/readyz", 200),
        ("GET", "/static/css/portal.css", 200),
        ("GET", "/bootstrap/static/css/bootstrap.min.css", 200),
    ],
)
def test_every_response_carries_the_security_headers(headers_portal, method, path, status):
    response = https_client(headers_portal).open(path, method=method)
    assert response.status_code == status
    csp = response.headers["Content-Security-Policy"]
    for directive in ("default-src 'self'", "object-src 'none'", "base-uri 'none'", "frame-ancestors 'none'"):
        assert directive in csp
    assert "unsafe-inline" not in csp
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["Referrer-Policy"] == "strict-origin-when-cross-origin"
    assert response.headers["Strict-Transport-Security"].startswith("max-age=")
    assert response.headers["X-Frame-Options"] == "DENY"


@pytest.mark.parametrize(
    "path", ["/animals", "/animals/new", "/login", "/admin/environment", "/admin/audit", "/admin/status", "/nowhere"]
)
def test_pages_have_no_inline_scripts_styles_or_event_handlers(client, path):
    login(client, "admin")
    page = client.get(path).text
    assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", page)
    assert not re.search(r"<style|\sstyle=|\son[a-z]+=", page, re.IGNORECASE)


# --- rows 5 and 6: hosts, proxies, error pages ----------------------------------------------------


def test_only_trusted_host_names_are_answered(make_portal):
    client = make_portal(TRUSTED_HOSTS=["portal.example"]).test_client()
    assert client.get("/animals", headers={"Host": "portal.example"}).status_code == 200
    refused = client.get("/animals", headers={"Host": "evil.example"})
    assert refused.status_code == 400
    assert "Request id" in refused.text


def test_a_host_name_that_cannot_be_encoded_gets_the_bad_host_page_and_no_traceback(make_portal, caplog):
    client = make_portal().test_client()
    refused = client.get("/animals", headers={"Host": "a" * 70})  # a DNS label holds at most 63
    assert refused.status_code == 400
    assert "does not answer to that host name" in refused.text and refused.headers["X-Request-ID"] in refused.text
    assert "Traceback" not in caplog.text


def test_a_host_no_url_can_be_built_for_gets_the_bad_host_page_before_any_other(make_portal, caplog):
    """Found by the fuzz: a forwarded host "." with a query that is not UTF-8 drew the query's 400 page, whose
    links need a URL of this site, and logged a traceback."""
    client = make_portal(TRUSTED_PROXIES=1).test_client()
    refused = client.get("/animals?%C8N=1", headers={"X-Forwarded-Host": "."})
    assert refused.status_code == 400
    assert "does not answer to that host name" in refused.text
    assert "Traceback" not in caplog.text and "could not be drawn" not in caplog.text


def test_trusted_hosts_and_proxies_come_from_the_environment():
    config = from_environment(
        {"PETPORTAL_TRUSTED_HOSTS": "a.example, b.example", "PETPORTAL_TRUSTED_PROXIES": "2"}, read_dotenv=False
    )
    assert config["TRUSTED_HOSTS"] == ["a.example", "b.example"]
    assert config["TRUSTED_PROXIES"] == 2
    assert from_environment({}, read_dotenv=False)["TRUSTED_HOSTS"] is None


@pytest.mark.parametrize("proxies, recorded", [(0, "127.0.0.1"), (1, "203.0.113.9")])
def test_the_client_address_is_taken_from_trusted_proxies_only(make_portal, proxies, recorded):
    app = make_portal(TRUSTED_PROXIES=proxies)
    client = app.test_client()
    page = client.get("/login")
    client.post(
        "/login",
        data={"username": "staff", "password": "wrong", "csrf_token": csrf_token(page.text)},
        headers={"X-Forwarded-For": "203.0.113.9"},
    )
    with app.app_context():
        entry = db.session.scalars(db.select(AuditEntry).filter_by(action="login_failed")).one()
    assert entry.remote_addr == recorded


def test_health_checks_never_redirect_even_in_https_mode(make_portal):
    client = make_portal(HTTPS=True, TRUSTED_HOSTS=["localhost"]).test_client()
    assert client.get("/healthz").status_code == 200
    assert client.get("/readyz").status_code == 200
    assert client.get("/animals").status_code == 301


@pytest.mark.parametrize("path", ["/animals", "/static//css/portal.css", "/animals/new", "/"])
def test_a_forged_host_never_reaches_a_location_header(make_portal, path):
    client = make_portal(HTTPS=True).test_client()
    response = client.get(path, headers={"Host": "evil.example"})
    assert "evil.example" not in response.headers.get("Location", "")
    assert response.headers.get("Location", "/").startswith("/")
    assert "max-age=" in response.headers["Strict-Transport-Security"]


@pytest.mark.parametrize(
    "host", ["localhost@evil.example", "evil.example/x", "a b", "evil.example:abc", "evil.example"]
)
def test_no_host_header_makes_an_absolute_location(make_portal, host):
    client = make_portal().test_client()
    for path in ("/static//css/portal.css", "/animals/new", "/"):
        response = client.get(path, headers={"Host": host})
        location = response.headers.get("Location", "")
        assert "evil" not in location and "://" not in location
        assert "evil.example" not in response.text


@pytest.mark.parametrize("proxies, redirected", [(0, True), (1, False)])
def test_a_forwarded_scheme_counts_only_from_trusted_proxies(make_portal, proxies, redirected):
    client = make_portal(HTTPS=True, TRUSTED_HOSTS=["localhost"], TRUSTED_PROXIES=proxies).test_client()
    response = client.get("/animals", headers={"X-Forwarded-Proto": "https", "X-Forwarded-For": "203.0.113.9"})
    assert (response.status_code == 301) is redirected


def test_an_unexpected_error_shows_a_generic_page_with_a_request_id(headers_portal, caplog):
    response = https_client(headers_portal).get("/explode")
    assert response.status_code == 500
    assert "Something went wrong" in response.text
    assert "ZeroDivisionError" not in response.text and "Traceback" not in response.text
    assert response.headers["X-Request-ID"] in response.text
    assert not headers_portal.debug
    assert any(r.request_id == response.headers["X-Request-ID"] for r in caplog.records if r.levelname == "ERROR")


def test_a_dotenv_file_in_the_working_directory_is_read(tmp_path, monkeypatch):
    (tmp_path / ".env").write_text("PETPORTAL_CACHE_SECONDS=7\nPETPORTAL_TRUSTED_PROXIES=1\n")
    for name in ("PETPORTAL_CACHE_SECONDS", "PETPORTAL_TRUSTED_PROXIES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    script = (
        "import os; from petportal.config import from_environment; c = from_environment(os.environ); "
        "print(c['CACHE_SECONDS'], c['TRUSTED_PROXIES'])"
    )
    (tmp_path / "show.py").write_text(script)
    result = subprocess.run(
        [sys.executable, "show.py"], cwd=tmp_path, capture_output=True, text=True, env=portal_environment(), check=False
    )
    assert result.stdout.split() == ["7.0", "1"], result.stderr


def test_a_default_environment_without_url_is_refused_at_start():
    env = portal_environment(
        PETSTORE_STAGING_URL="http://127.0.0.1:9/v1",
        PETSTORE_STAGING_KEY="staging-key-0123456789ab",
        PETPORTAL_SECRET_KEY="x" * 32,
    )
    result = run_init_db(env)
    assert result.returncode != 0
    assert "PETPORTAL_DEFAULT_ENVIRONMENT is production, but PETSTORE_PRODUCTION_URL is not set." in result.stderr


def test_a_redis_url_the_login_counters_cannot_use_is_refused_at_start_without_showing_it():
    env = portal_environment(
        PETSTORE_PRODUCTION_URL="http://127.0.0.1:9/v1",
        PETSTORE_PRODUCTION_KEY="production-key-0123456789ab",
        PETPORTAL_SECRET_KEY="x" * 32,
        PETPORTAL_REDIS_URL="unix://:hunter2-redis-password@/run/redis.sock",
    )
    result = run_init_db(env)
    assert result.returncode != 0
    assert "PETPORTAL_REDIS_URL must start with redis:// or rediss://" in result.stderr
    assert "hunter2" not in result.stderr + result.stdout


def test_outside_demo_mode_the_portal_refuses_to_start_without_a_secret_key(tmp_path):
    env = portal_environment(
        PETSTORE_PRODUCTION_URL="http://127.0.0.1:9/v1", PETSTORE_PRODUCTION_KEY="production-key-0123456789ab"
    )
    result = run_init_db(env)
    assert result.returncode != 0
    assert "PETPORTAL_SECRET_KEY is not set" in result.stderr
