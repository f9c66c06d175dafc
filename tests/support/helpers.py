"""What the tests share besides fixtures: the test secrets, the stores' sample data, PostgreSQL schemas, the
portal's test configuration, a hand-moved clock, and the forms' tokens and logins as a browser sends them."""

import io
import json
import os
import random
import re
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pyotp
import pytest
import requests
import sqlalchemy
from jinja2 import BytecodeCache
from jinja2.bccache import Bucket
from werkzeug.datastructures import FileStorage, MultiDict
from werkzeug.security import generate_password_hash
from werkzeug.test import encode_multipart

from petportal.reference_store import create_app as create_store
from petportal.reference_store.models import db as store_db

from support.portal import csrf_token, portal_environment
from support.servers import RecordingMiddleware

# Fresh secrets every run, so that the secret scan cannot pass by luck. Under pytest-xdist every worker must
# collect the same test ids, and some ids show these values: the workers then share one run's random seed.
_RUN = random.Random(os.environ.get("PYTEST_XDIST_TESTRUNUID") or None)


def _fresh() -> str:
    return f"{_RUN.getrandbits(128):032x}"


STORE_KEY = "store-key-" + _fresh()
PRODUCTION_KEY = "prod-key-" + _fresh()
STAGING_KEY = "staging-key-" + _fresh()
SECRET_KEY = "session-secret-" + _fresh()
PASSWORDS = {"staff": "staff-pass-" + _fresh()[:8], "admin": "admin-pass-" + _fresh()[:8]}
# The portals the tests build hash passwords with one round of PBKDF2, not production's scrypt (a tenth of a
# second, at every login and every password set): logging in still checks the password against its hash. One test
# checks production's scrypt (test_login_attacks.py), and the login timing test runs on it.
PASSWORD_HASH = "pbkdf2:sha256:1"
# Hashed once for the whole run: every portal a test builds has both accounts.
PASSWORD_HASHES = {role: generate_password_hash(password, PASSWORD_HASH) for role, password in PASSWORDS.items()}
# Passwords the tests choose through the portal's forms: long enough and hard to guess, as the policy asks.
NEW_PASSWORDS = [f"{word} meadow lantern {_fresh()[:6]}" for word in ("first", "second", "third")]
SECRETS = [STORE_KEY, PRODUCTION_KEY, STAGING_KEY, SECRET_KEY, *PASSWORDS.values(), *NEW_PASSWORDS]
POSTGRES_URL = os.environ.get("PETPORTAL_TEST_DATABASE_URL")
REDIS_URL = os.environ.get("PETPORTAL_TEST_REDIS_URL")
SAMPLE = [("Rex", 1, "available"), ("Mittens", 2, "pending"), ("Goldie", 3, "sold"), ("Nibbles", 4, None)]


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


def drop_postgres_schema(schema, attempts=5):
    """Remove a schema made by `postgres_schema_url`. A thread of the test's portal still finishing its work (an
    import's runner) may write there as it goes: PostgreSQL then ends one side of the deadlock, and if that is the
    DROP it is tried again."""
    engine = sqlalchemy.create_engine(POSTGRES_URL)
    try:
        for attempt in range(attempts):
            try:
                with engine.begin() as conn:
                    conn.execute(sqlalchemy.text(f"DROP SCHEMA {schema} CASCADE"))
                return
            except sqlalchemy.exc.OperationalError:
                if attempt == attempts - 1:
                    raise
                time.sleep(0.2)
    finally:
        engine.dispose()


def make_store(path, keys):
    """A reference store app on a SQLite file at `path`."""
    return create_store({"PETSTORE_API_KEYS": keys, "SQLALCHEMY_DATABASE_URI": f"sqlite:///{path}"})


def dispose_store(app):
    with app.app_context():
        store_db.engine.dispose()


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
        payload = new_pet(name, category_id, status)
        response = requests.post(f"{self.url}/pets", json=payload, headers={"Authorization": f"Bearer {self.key}"})
        assert response.status_code == 201, response.text
        self.recorder.received.pop()
        return response.json()

    def animals(self):
        """Every animal in the store, read directly, without recording the request."""
        response = requests.get(f"{self.url}/pets?limit=100", headers={"Authorization": f"Bearer {self.key}"})
        self.recorder.received.pop()
        return response.json()


def new_pet(name, category_id, status):
    """createPet's body for an animal; without a status, none sent."""
    return {"name": name, "categoryId": category_id, **({"status": status} if status else {})}


def live_store(tmp_path, name, key, animals=()):
    """A reference store app holding `animals` ((name, category id, status) each), added through its own test
    client (no socket, nothing recorded), and its requests' recorder."""
    app = make_store(tmp_path / f"{name}.sqlite", [key])
    client = app.test_client()
    for animal in animals:
        response = client.post("/v1/pets", json=new_pet(*animal), headers={"Authorization": f"Bearer {key}"})
        assert response.status_code == 201, response.text
    recorder = RecordingMiddleware(app)
    return app, recorder


@contextmanager
def routed_store(server, tmp_path, name, key, animals):
    """A new reference store holding `animals`, served by `server` ((StoreRouter, origin): conftest.py's
    `store_server`) under a prefix of its own until the block ends; a LiveStore."""
    router, origin = server
    app, recorder = live_store(tmp_path, name, key, animals)
    prefix = router.add(recorder)
    try:
        yield LiveStore(f"{origin}{prefix}/v1", key, recorder)
    finally:
        router.remove(prefix)
        dispose_store(app)


def portal_config(tmp_path, production_url, staging_url, **overrides):
    """The portal's test configuration over the given environment URLs."""
    return {
        "TESTING": True,
        "SECRET_KEY": SECRET_KEY,
        "SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path / 'portal.sqlite'}",
        "PETSTORE_ENVIRONMENTS": {
            # A key without its URL is refused at start, as a URL without its key.
            "production": {"url": production_url, "key": PRODUCTION_KEY if production_url else None},
            "staging": {"url": staging_url, "key": STAGING_KEY if staging_url else None},
        },
        "UPSTREAM_TIMEOUT": 3.0,
        "HTTPS": False,
        "PASSWORD_HASH": PASSWORD_HASH,
        # Most tests count upstream calls; the cache's own tests turn it on.
        "CACHE_SECONDS": 0,
        # Most admin tests are about something else; the second factor's own tests turn it on.
        "REQUIRE_ADMIN_MFA": False,
        # No thread per portal looking for abandoned imports; the crash tests run real processes that do.
        "IMPORT_WATCH_SECONDS": 0,
        **overrides,
    }


class CompiledTemplates(BytecodeCache):
    """The templates every portal of a test process compiled, kept for the next portal: each new portal compiles
    each page it draws again (template_text: once per language), a tenth of a second a page, as long as most tests
    take. Kept per language copy of the environment and per catalog folder, and checked against the template's
    source, as Jinja's caches are."""

    def __init__(self):
        self.code = {}

    def get_bucket(self, environment, name, filename, source):
        # Messages are compiled in: a portal with catalogs of its own (BABEL_TRANSLATION_DIRECTORIES) has its own.
        catalogs = environment.app.config.get("BABEL_TRANSLATION_DIRECTORIES", "")
        key = f"{environment.language}:{catalogs}:{self.get_cache_key(name, filename)}"
        bucket = Bucket(environment, key, self.get_source_checksum(source))
        self.load_bytecode(bucket)
        return bucket

    def load_bytecode(self, bucket):
        if bucket.key in self.code:
            bucket.bytecode_from_string(self.code[bucket.key])

    def dump_bytecode(self, bucket):
        self.code[bucket.key] = bucket.bytecode_to_string()


COMPILED_TEMPLATES = CompiledTemplates()


class Clock:
    """A clock the test moves by hand."""

    def __init__(self):
        self.now = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)

    def __call__(self):
        return self.now

    def advance(self, **delta):
        self.now += timedelta(**delta)


TOKEN_PATTERN = re.compile(r'name="submission_token" type="hidden" value="([^"]*)"')


def submission_token(html):
    """The one-time submission token of the add form on a page."""
    return TOKEN_PATTERN.search(html).group(1)


SECRET_PATTERN = re.compile(r'<code id="mfa-secret"[^>]*>([A-Z2-7]+)</code>')
RECOVERY_PATTERN = re.compile(r'<code class="recovery-code">([a-z2-7-]+)</code>')


def at_once(calls, send):
    """`send(*call, start)` for each of `calls`, each in its own thread, released together; their answers in order."""
    start = threading.Barrier(len(calls))
    with ThreadPoolExecutor(len(calls)) as pool:
        futures = [pool.submit(send, *call, start) for call in calls]
        return [future.result() for future in futures]


def post_form(client, page_path, action, **fields):
    """Open `page_path`, then send `fields` to `action` with that page's CSRF token, as a browser does."""
    token = csrf_token(client.get(page_path).text)
    return client.post(action, data={"csrf_token": token, **fields})


def totp(secret, clock, steps=0):
    """The code an authenticator app shows for `secret` at `clock`'s time, `steps` time steps (30 s) away."""
    return pyotp.TOTP(secret).at(clock.now, counter_offset=steps)


def enrol_mfa(client, clock, page_path="/account/mfa"):
    """Turn on a second factor through the enrolment page; the secret read off the page and the recovery codes."""
    page = client.get(page_path)
    secret = SECRET_PATTERN.search(page.text).group(1)
    response = post_form(client, page_path, page_path, code=totp(secret, clock))
    assert response.status_code == 303, response.text
    codes = RECOVERY_PATTERN.findall(client.get("/account/mfa").text)
    assert len(codes) == 10
    return secret, codes


def wrong_password(client, username, address="127.0.0.1", token=None):
    """One wrong password for `username` from `address`; its status."""
    token = token or csrf_token(client.get("/login").text)
    data = {"username": username, "password": "not the password", "csrf_token": token}
    return client.post("/login", data=data, environ_base={"REMOTE_ADDR": address}).status_code


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

    def login_with_code(self, code, username="staff", password=None, remember=False, address="127.0.0.1"):
        """Log in with the password, then the second factor's `code` on /login/mfa; the code's answer."""
        first = self.login(username, password, remember=remember, address=address)
        assert first.headers["Location"] == "/login/mfa", first.status_code
        return post_form(self._client, "/login/mfa", "/login/mfa", code=code)

    def logout(self):
        page = self._client.get("/animals")
        return self._client.post("/logout", data={"csrf_token": csrf_token(page.text)})


class SlowStore:
    """The reference store on a SQLite file, answering each createPet after `seconds`; records the names sent."""

    def __init__(self, tmp_path, seconds):
        self.app = make_store(tmp_path / "slow.sqlite", [PRODUCTION_KEY])
        self.seconds = seconds
        self.names = []

    def __call__(self, environ, start_response):
        if environ["REQUEST_METHOD"] == "POST":
            body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
            self.names.append(json.loads(body)["name"])
            environ["wsgi.input"] = io.BytesIO(body)
            time.sleep(self.seconds)
        return self.app(environ, start_response)


# --- bulk imports, as staff drive them through their pages ---------------------------------------------


def creates(store):
    return [json.loads(request.body) for request in store.received if request.method == "POST"]


def upload(client, content, filename="animals.csv"):
    """Send a file through the upload form, as a browser does."""
    token = csrf_token(client.get("/animals/import").text)
    data = content.encode() if isinstance(content, str) else content
    fields = MultiDict({"csrf_token": token, "file": FileStorage(io.BytesIO(data), filename)})
    # Encoded in memory: the test client would spool a large body to a temporary file it never closes.
    boundary, body = encode_multipart(fields)
    return client.post("/animals/import", data=body, content_type=f"multipart/form-data; boundary={boundary}")


def press(client, import_path, action):
    """Press a button of the import's page (start, retry, discard)."""
    token = csrf_token(client.get(import_path).text)
    return client.post(f"{import_path}/{action}", data={"csrf_token": token})


def finished(client, import_path, seconds=15):
    """The import's progress JSON once it stops sending."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        progress = client.get(f"{import_path}.json").get_json()
        if progress["state"] not in ("queued", "running"):
            return progress
        time.sleep(0.05)
    raise AssertionError(f"the import still runs after {seconds} s: {progress}")


def metric(text, name, **labels):
    """The value of one sample in Prometheus text, or 0."""
    wanted = ",".join(f'{key}="{value}"' for key, value in sorted(labels.items()))
    for line in text.splitlines():
        if line.startswith(name + "{"):
            found = ",".join(sorted(line[len(name) + 1 : line.index("}")].split(",")))
            if found == wanted:
                return float(line.rsplit(" ", 1)[1])
    return 0.0


def production_variables(tmp_path, store_url, **extra):
    """A production portal's variables over the store at `store_url`: plain HTTP, no cache, SQLite in `tmp_path`;
    then `extra`."""
    settings = {
        "PETSTORE_PRODUCTION_URL": store_url,
        "PETSTORE_PRODUCTION_KEY": PRODUCTION_KEY,
        "PETPORTAL_SECRET_KEY": SECRET_KEY,
        "PETPORTAL_HTTPS": "0",
        "PETPORTAL_CACHE_SECONDS": "0",
        "PETPORTAL_DATABASE_URL": f"sqlite:///{tmp_path / 'portal.sqlite'}",
    }
    return portal_environment(**{**settings, **extra})


# Pages of each kind a visitor meets, as (who is logged in, path): the list with and without its messages'
# values, an animal, the forms with and without errors, the import, the account and the admin pages, and 404.
PAGES_OF_EVERY_KIND = [
    (None, "/animals"),
    (None, "/animals?q=re&status=available&sort=name&limit=5"),
    (None, "/animals?q=zzz&status=sold"),
    (None, "/animals?limit=0"),
    (None, "/animals/1"),
    (None, "/login"),
    (None, "/no-such-page"),
    ("staff", "/animals/new"),
    ("staff", "/animals/import"),
    ("staff", "/animals/mine"),
    ("staff", "/account/sessions"),
    ("admin", "/admin/environment"),
    ("admin", "/admin/users"),
    ("admin", "/admin/audit"),
    ("admin", "/admin/categories"),
    ("admin", "/admin/status"),
]
