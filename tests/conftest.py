"""Fixtures: real reference stores on real ports, the portal over them (built and closed for each test,
every response scanned for secrets), a fault server, and the optional real PostgreSQL.

Helpers live in the `support` package beside this file (support/__init__.py lists its modules): helpers.py, real
servers in servers.py, the figures and the secret scan in scanning.py, a portal readied and driven from outside in
portal.py.
"""

import logging
import os

import pytest
from hypothesis import settings

# Under pytest-xdist each worker flushes a Redis database of its own, read by support/helpers.py below: the base's
# number minus the worker's (15, 14, 13, ... from CI's 15), wrapping round within Redis's 16 (0 to 15): distinct
# for up to 16 workers.
_worker = os.environ.get("PYTEST_XDIST_WORKER", "")
if _worker.startswith("gw") and os.environ.get("PETPORTAL_TEST_REDIS_URL"):
    _base, _, _number = os.environ["PETPORTAL_TEST_REDIS_URL"].rpartition("/")
    if _number.isdigit():
        os.environ["PETPORTAL_TEST_REDIS_URL"] = f"{_base}/{(int(_number) - int(_worker[2:])) % 16}"


def pytest_xdist_auto_num_workers(config):
    """`pytest -n auto`: two workers per core, at most the 16 that have a Redis database each. Most tests wait on a
    server, a subprocess or a browser: on this 2-core machine the whole suite took 338 s with four workers, where
    two took about 460 s."""
    return min(16, 2 * len(os.sched_getaffinity(0)))


def pytest_collection_modifyitems(items):
    """The slow tests first, each file's in its order: the workers then end on short tests, together, rather than
    one worker running a long browser sweep after the others have finished (with `--dist worksteal`, in addopts,
    an idle worker takes tests queued for a busy one)."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


# Before they are imported: their asserts then explain themselves as a test's own do.
pytest.register_assert_rewrite("support")

from petportal import create_app  # noqa: E402
from petportal.data.models import User  # noqa: E402
from petportal.extensions import db  # noqa: E402

from support import openid_provider  # noqa: E402
from support.browsers import chromium  # noqa: E402
from support.helpers import (  # noqa: E402
    COMPILED_TEMPLATES,
    PASSWORD_HASHES,
    PRODUCTION_KEY,
    SAMPLE,
    STAGING_KEY,
    STORE_KEY,
    AuthActions,
    Clock,
    dispose_store,
    drop_postgres_schema,
    make_store,
    portal_config,
    postgres_schema_url,
    routed_store,
)
from support.scanning import SecretScanner, leaks  # noqa: E402
from support.servers import FaultServer, StoreRouter, serve  # noqa: E402

pytest_plugins = ["support.scanning"]

# Every property test's bounds unless it sets its own: 50 examples, and no deadline per example (a machine busy
# with other tests makes an example slow, not wrong). HYPOTHESIS_PROFILE=thorough tries ten times as many.
settings.register_profile("petportal", max_examples=50, deadline=None)
settings.register_profile("thorough", max_examples=500, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "petportal"))


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request, tmp_path):
    """An empty database: a SQLite file, and a fresh schema of the local PostgreSQL when configured."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'database.sqlite'}"
        return
    schema, url = postgres_schema_url()
    yield url
    drop_postgres_schema(schema)


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


@pytest.fixture(scope="session")
def store_server():
    """One real server for the reference stores of every test of this process (pytest-xdist worker), each test's
    stores new and under paths of their own (servers.StoreRouter): (router, origin)."""
    router = StoreRouter()
    with serve(router) as origin:
        yield router, origin


@pytest.fixture
def production_store(tmp_path, store_server):
    """The production reference store, seeded with four animals."""
    with routed_store(store_server, tmp_path, "production", PRODUCTION_KEY, SAMPLE) as store:
        yield store


@pytest.fixture
def staging_store(tmp_path, store_server):
    """The staging reference store, with one animal of its own."""
    with routed_store(store_server, tmp_path, "staging", STAGING_KEY, [("Staging Sam", 9, "available")]) as store:
        yield store


@pytest.fixture
def fault_server():
    """A loopback server that misbehaves on cue and records what it received."""
    with FaultServer() as server:
        yield server


def build_portal(config, caplog):
    """A portal app with its tables and the staff and admin accounts, its responses scanned for secrets."""
    caplog.set_level(logging.INFO)
    app = create_app(config)
    app.jinja_env.bytecode_cache = COMPILED_TEMPLATES
    with app.app_context():
        db.create_all()
        for role, password_hash in PASSWORD_HASHES.items():
            db.session.add(User(username=role, role=role, password_hash=password_hash))
        db.session.commit()
    app.wsgi_app = SecretScanner(app)
    return app


def close_portal(app, caplog):
    """Dispose of a portal app, failing if anything it sent or logged held a secret."""
    found = leaks(app, caplog)
    app.extensions["petportal.petstore.environments"].close()
    with app.app_context():
        db.engine.dispose()
    assert found == [], "secrets reached a response or a log line"


@pytest.fixture
def portal_app(make_portal):
    """The portal over the two real reference stores, on a SQLite file."""
    return make_portal()


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def make_portal(tmp_path, caplog, request):
    """Build portals with extra settings, closed and checked for leaks after the test.

    `make_portal(**settings)` serves the two real reference stores (started on first use);
    `make_portal.over(production_url, staging_url, **settings)` serves any other upstream;
    `make_portal.build(config)` takes a whole configuration made with `portal_config`.
    """
    apps = []

    def build(config):
        app = build_portal(config, caplog)
        apps.append(app)
        return app

    def over(production_url, staging_url, **overrides):
        folder = tmp_path / f"portal-{len(apps)}"
        folder.mkdir()
        return build(portal_config(folder, production_url, staging_url, **overrides))

    def make(**overrides):
        stores = [request.getfixturevalue(name) for name in ("production_store", "staging_store")]
        return over(stores[0].url, stores[1].url, **overrides)

    make.over, make.build = over, build
    yield make
    for app in apps:
        close_portal(app, caplog)


@pytest.fixture
def client(portal_app):
    return portal_app.test_client()


@pytest.fixture
def runner(portal_app):
    return portal_app.test_cli_runner()


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


@pytest.fixture(scope="module")
def identity_provider(tmp_path_factory):
    """A certified OpenID Provider on a real port (tests/support/openid_provider.py), or None where Node or the npm
    package is missing: the single sign-on tests then skip, and the fuzz runs without a company sign-in."""
    if not openid_provider.available():
        yield None
        return
    with openid_provider.running(tmp_path_factory.mktemp("provider")) as provider:
        yield provider


@pytest.fixture(scope="session")
def browser():
    """Debian's Chromium, headless, for the browser tests of every module (one Playwright per process)."""
    with chromium() as launched:
        yield launched
