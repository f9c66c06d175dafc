"""Shared fixtures: real reference stores on real ports, the portal over them, a fault server,
the optional real PostgreSQL and Redis, and a scan of everything the portal sends for secrets."""

import json
import logging
import os
import re
import uuid
from datetime import UTC, datetime, timedelta
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests
import sqlalchemy
from servers import FaultServer, RecordingMiddleware, serve

from petportal import create_app
from petportal.extensions import db
from petportal.models import User
from petportal.store import create_app as create_store
from petportal.store.models import db as store_db

STORE_KEY = "store-key-" + uuid.uuid4().hex
PRODUCTION_KEY = "prod-key-" + uuid.uuid4().hex
STAGING_KEY = "staging-key-" + uuid.uuid4().hex
SECRET_KEY = "session-secret-" + uuid.uuid4().hex
PASSWORDS = {"staff": "staff-pass-" + uuid.uuid4().hex[:8], "admin": "admin-pass-" + uuid.uuid4().hex[:8]}
SECRETS = [STORE_KEY, PRODUCTION_KEY, STAGING_KEY, SECRET_KEY, *PASSWORDS.values()]
POSTGRES_URL = os.environ.get("PETPORTAL_TEST_DATABASE_URL")
REDIS_URL = os.environ.get("PETPORTAL_TEST_REDIS_URL")
FIGURES = {
    "responses_scanned": 0,
    "secrets_found": 0,
    "hostile_inputs": 0,
    "faults_injected": 0,
    "submissions": 0,
    "duplicates": 0,
    "lost": 0,
}
FIGURES_FILE = Path(os.environ.get("PETPORTAL_FIGURES_FILE", Path(__file__).parent.parent / "test-output" / "figures.json"))

SAMPLE = [("Rex", 1, "available"), ("Mittens", 2, "pending"), ("Goldie", 3, "sold"), ("Nibbles", 4, None)]


def pytest_sessionfinish(session):
    """Write the suite's reliability and security figures for `python -m petportal.checks`."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter else []
    reasons = {}
    for report in skipped:
        reason = report.longrepr[2].removeprefix("Skipped: ") if isinstance(report.longrepr, tuple) else str(report.longrepr)
        reasons[reason] = reasons.get(reason, 0) + 1
    FIGURES_FILE.parent.mkdir(parents=True, exist_ok=True)
    FIGURES_FILE.write_text(json.dumps(
        {**FIGURES, "tests_failed": session.testsfailed, "tests_skipped": len(skipped), "skipped_reasons": reasons},
        indent=2,
    ))


def pytest_terminal_summary(terminalreporter):
    terminalreporter.write_line(
        "figures: " + ", ".join(f"{name.replace('_', ' ')} {value}" for name, value in FIGURES.items())
    )


def postgres_schema_url():
    """A PostgreSQL URL whose search_path is a fresh, empty schema; skips when no server is configured."""
    if not POSTGRES_URL:
        pytest.skip("PETPORTAL_TEST_DATABASE_URL is not set: no PostgreSQL to test against")
    schema = "t_" + uuid.uuid4().hex[:12]
    engine = sqlalchemy.create_engine(POSTGRES_URL)
    with engine.begin() as conn:
        conn.execute(sqlalchemy.text(f"CREATE SCHEMA {schema}"))
    engine.dispose()
    separator = "&" if "?" in POSTGRES_URL else "?"
    return schema, f"{POSTGRES_URL}{separator}options=-csearch_path%3D{schema}"


def drop_postgres_schema(schema):
    """Remove a schema made by `postgres_schema_url`."""
    engine = sqlalchemy.create_engine(POSTGRES_URL)
    with engine.begin() as conn:
        conn.execute(sqlalchemy.text(f"DROP SCHEMA {schema} CASCADE"))
    engine.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request, tmp_path):
    """An empty database: a SQLite file, and a fresh schema of the local PostgreSQL when configured."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'database.sqlite'}"
        return
    schema, url = postgres_schema_url()
    yield url
    drop_postgres_schema(schema)


def make_store(path, keys):
    """A reference store app on a SQLite file at `path`."""
    return create_store({"PETSTORE_API_KEYS": keys, "SQLALCHEMY_DATABASE_URI": f"sqlite:///{path}"})


def dispose_store(app):
    with app.app_context():
        store_db.engine.dispose()


@pytest.fixture
def store_app(tmp_path):
    """A reference store on a SQLite file, accepting `STORE_KEY` and one other key."""
    app = make_store(tmp_path / "store.sqlite", [STORE_KEY, "second-key"])
    yield app
    dispose_store(app)


@pytest.fixture
def store_url(store_app):
    """The base URL (ending in /v1) of a reference store served on a real port."""
    with serve(store_app) as origin:
        yield origin + "/v1"


@dataclass
class LiveStore:
    """A reference store on a real port, and every request it received."""

    url: str
    key: str
    recorder: RecordingMiddleware

    @property
    def received(self):
        return self.recorder.received

    def add(self, name, category_id=1, status=None):
        """Add an animal directly (not through the portal) and forget that request."""
        payload = {"name": name, "categoryId": category_id, **({"status": status} if status else {})}
        response = requests.post(f"{self.url}/pets", json=payload, headers={"Authorization": f"Bearer {self.key}"})
        assert response.status_code == 201, response.text
        self.recorder.received.pop()
        return response.json()

    def animals(self):
        """Every animal in the store, read directly, without recording the request."""
        response = requests.get(f"{self.url}/pets?limit=100", headers={"Authorization": f"Bearer {self.key}"})
        self.recorder.received.pop()
        return response.json()


def live_store(tmp_path, name, key):
    app = make_store(tmp_path / f"{name}.sqlite", [key])
    recorder = RecordingMiddleware(app)
    return app, recorder


@pytest.fixture
def production_store(tmp_path):
    """The production reference store, seeded with four animals."""
    app, recorder = live_store(tmp_path, "production", PRODUCTION_KEY)
    with serve(recorder) as origin:
        store = LiveStore(origin + "/v1", PRODUCTION_KEY, recorder)
        for name, category, status in SAMPLE:
            store.add(name, category, status)
        yield store
    dispose_store(app)


@pytest.fixture
def staging_store(tmp_path):
    """The staging reference store, with one animal of its own."""
    app, recorder = live_store(tmp_path, "staging", STAGING_KEY)
    with serve(recorder) as origin:
        store = LiveStore(origin + "/v1", STAGING_KEY, recorder)
        store.add("Staging Sam", 9, "available")
        yield store
    dispose_store(app)


@pytest.fixture
def fault_server():
    """A loopback server that misbehaves on cue and records what it received."""
    with FaultServer() as server:
        yield server


class SecretScanner:
    """WSGI middleware that looks for any secret in every status line, header, body and session (cookie and stored data)."""

    def __init__(self, app):
        self.app = app
        self.wsgi_app = app.wsgi_app
        self.leaks = []

    def __call__(self, environ, start_response):
        captured = {}

        def capture(status, headers, exc_info=None):
            captured["head"] = status + "\n" + "\n".join(f"{k}: {v}" for k, v in headers)
            captured["cookies"] = [v for k, v in headers if k.lower() == "set-cookie"]
            return start_response(status, headers, exc_info)

        iterable = self.wsgi_app(environ, capture)
        try:
            body = b"".join(iterable)
        finally:
            if hasattr(iterable, "close"):
                iterable.close()  # WSGI: the server must close what the app returned
        text = captured["head"] + "\n" + body.decode("utf-8", "replace")
        for cookie in captured["cookies"]:
            text += "\n" + self._decoded_session(cookie)
        FIGURES["responses_scanned"] += 1
        found = [f"{environ['PATH_INFO']}: {secret[:12]}..." for secret in SECRETS if secret in text]
        FIGURES["secrets_found"] += len(found)
        self.leaks.extend(found)
        return [body]

    def _decoded_session(self, cookie):
        """What the server keeps under the session cookie's id: it must hold no secret either."""
        name = self.app.config["SESSION_COOKIE_NAME"]
        match = re.match(rf"{name}=([^;]*)", cookie)
        if not match or not match.group(1):
            return ""
        interface = self.app.session_interface
        with self.app.app_context():
            data = interface._retrieve_session_data(interface._get_store_id(match.group(1)))
        return match.group(1) + json.dumps(data, default=str)


def portal_config(tmp_path, production_url, staging_url, **overrides):
    """The portal's test configuration over the given environment URLs."""
    return {
        "TESTING": True,
        "SECRET_KEY": SECRET_KEY,
        "SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path / 'portal.sqlite'}",
        "PETSTORE_ENVIRONMENTS": {
            "production": {"url": production_url, "key": PRODUCTION_KEY},
            "staging": {"url": staging_url, "key": STAGING_KEY},
        },
        "UPSTREAM_TIMEOUT": 1.0,
        "HTTPS": False,
        # Most tests count upstream calls; the cache's own tests turn it on.
        "CACHE_SECONDS": 0,
        **overrides,
    }


def build_portal(config, caplog):
    """A portal app with its tables and the staff and admin accounts, its responses scanned for secrets."""
    caplog.set_level(logging.INFO)
    app = create_app(config)
    with app.app_context():
        db.create_all()
        for role, password in PASSWORDS.items():
            user = User(username=role, role=role)
            user.set_password(password)
            db.session.add(user)
        db.session.commit()
    app.wsgi_app = SecretScanner(app)
    return app


def close_portal(app, caplog):
    """Dispose of a portal app, failing if anything it sent or logged held a secret."""
    logged = [f"log: {s[:12]}..." for s in SECRETS if s in caplog.text]
    FIGURES["secrets_found"] += len(logged)
    leaks = app.wsgi_app.leaks + logged
    app.extensions["petportal.environments"].close()
    with app.app_context():
        db.engine.dispose()
    assert leaks == [], "secrets reached a response or a log line"


@pytest.fixture
def portal_app(tmp_path, production_store, staging_store, caplog):
    """The portal over the two real reference stores, on a SQLite file."""
    app = build_portal(portal_config(tmp_path, production_store.url, staging_store.url), caplog)
    yield app
    close_portal(app, caplog)


class Clock:
    """A clock the test moves by hand."""

    def __init__(self):
        self.now = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)

    def __call__(self):
        return self.now

    def advance(self, **delta):
        self.now += timedelta(**delta)


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def make_portal(tmp_path, caplog, production_store, staging_store):
    """Build portals over the two real stores with extra settings; each is closed and checked for leaks."""
    apps = []

    def make(**overrides):
        app = build_portal(portal_config(tmp_path / str(len(apps)), production_store.url, staging_store.url, **overrides), caplog)
        apps.append(app)
        return app

    (tmp_path / "0").mkdir()
    (tmp_path / "1").mkdir()
    yield make
    for app in apps:
        close_portal(app, caplog)


@pytest.fixture
def client(portal_app):
    return portal_app.test_client()


@pytest.fixture
def runner(portal_app):
    return portal_app.test_cli_runner()


CSRF_PATTERN = re.compile(r'name="csrf_token" type="hidden" value="([^"]+)"|name="csrf_token" value="([^"]+)"')
TOKEN_PATTERN = re.compile(r'name="submission_token" type="hidden" value="([^"]*)"')


def csrf_token(html):
    """The CSRF token of the first form on a page."""
    match = CSRF_PATTERN.search(html)
    assert match, "no CSRF token on the page"
    return match.group(1) or match.group(2)


def submission_token(html):
    """The one-time submission token of the add form on a page."""
    return TOKEN_PATTERN.search(html).group(1)


class AuthActions:
    """Log in and out through the real forms, CSRF tokens included."""

    def __init__(self, client):
        self._client = client

    def login(self, username="staff", password=None, next_path=None, remember=False, address="127.0.0.1"):
        """Log in from `address` (the client's IP address as the portal sees it)."""
        page = self._client.get("/login")
        data = {"username": username, "password": password or PASSWORDS[username], "csrf_token": csrf_token(page.text)}
        if remember:
            data["remember"] = "y"
        query = {"next": next_path} if next_path is not None else None
        return self._client.post("/login", data=data, query_string=query, environ_base={"REMOTE_ADDR": address})

    def logout(self):
        page = self._client.get("/animals")
        return self._client.post("/logout", data={"csrf_token": csrf_token(page.text)})


@pytest.fixture
def auth(client):
    return AuthActions(client)


@pytest.fixture
def auth_for():
    """A test client of `app` already logged in as `username`."""

    def logged_in(app, username):
        client = app.test_client()
        AuthActions(client).login(username)
        return client

    return logged_in
