"""A bulk import survives its runner being killed: kill -9 in the middle of 50 rows against a slowed store.

Without Redis the portal's own process runs imports: it is killed and started again. With Redis an RQ
worker runs them: the worker is killed and started again while the portal keeps serving. Either way the
import then reaches `done`, no name reaches the store twice, and created + refused + unknown = 50.
"""

import csv
import io
import json
import os
import signal
import subprocess
import sys
import uuid

import pytest
import redis

from petportal.running.processes import wait_for_port

from support.helpers import (
    PRODUCTION_KEY,
    SECRET_KEY,
    SlowStore,
    dispose_store,
    drop_postgres_schema,
    postgres_schema_url,
)
from support.portal import (
    FLASK_PORTAL,
    PROJECT_ROOT,
    portal_environment,
    prepare_portal,
    start_import,
    wait_for,
)
from support.servers import free_port, serve

pytestmark = pytest.mark.slow

ROWS = 50
NAMES = [f"Crash {number:02d}" for number in range(ROWS)]
PASSWORD = "crash test password " + uuid.uuid4().hex[:6]


def start_portal(env, port):
    """The portal under gunicorn (one worker)."""
    command = [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py", "--bind", f"127.0.0.1:{port}"]
    return start([*command, "--workers", "1", "app:app"], env)


def start(command, env):
    """A process in a group of its own, so that it can be killed with all it starts."""
    return subprocess.Popen(
        command, cwd=PROJECT_ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )


def kill(process):
    """SIGKILL the process and all it started (no clean-up code of the portal's runs), and wait until all
    are gone: a gunicorn worker left for a moment would still hold the port."""
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(10)
    wait_for(lambda: not group_alive(process.pid), 10, "the killed processes to go")


def group_alive(group):
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True


def progress(browser, origin, path):
    return browser.get(f"{origin}{path}.json").json()


def check_the_outcome(final, store, results):
    """Done; every row counted once; nothing sent twice; every row but the unknown ones is in the store. A row whose
    call was under way at the kill is unknown: the store may or may not have got it, and it is never sent again."""
    assert final["state"] == "done", final
    assert final["created"] + final["failed"] + final["unknown"] == ROWS, final
    assert final["failed"] == 0
    assert len(store.names) == len(set(store.names)), "a name was sent twice"
    every = {f"Crash {number:02d}" for number in range(ROWS)}
    outcomes = {row["name"]: row["outcome"] for row in results}
    assert set(outcomes) == every
    assert {name for name in every if outcomes[name] != "unknown"} <= set(store.names) <= every
    # Only calls under way at the kill may be unknown: at most IMPORT_CONCURRENCY of them.
    assert final["unknown"] <= 4
    created = [row for row in results if row["outcome"] == "created"]
    assert len(created) == final["created"] and all(row["id"] for row in created)


def results_of(browser, origin, path):
    text = browser.get(f"{origin}{path}/results.csv").content.decode("utf-8-sig")
    return list(csv.DictReader(io.StringIO(text)))


@pytest.fixture
def slow_store(tmp_path):
    store = SlowStore(tmp_path, seconds=0.3)
    with serve(store) as origin:
        store.url = origin + "/v1"
        yield store
    dispose_store(store.app)


def portal_variables(store, **variables):
    return portal_environment(
        PETSTORE_PRODUCTION_URL=store.url,
        PETSTORE_PRODUCTION_KEY=PRODUCTION_KEY,
        PETPORTAL_SECRET_KEY=SECRET_KEY,
        PETPORTAL_HTTPS="0",
        PETPORTAL_CACHE_SECONDS="0",
        PETPORTAL_REQUIRE_ADMIN_MFA="0",
        **variables,
    )


def test_killing_the_portal_mid_import_loses_nothing_and_sends_nothing_twice(slow_store, tmp_path):
    env = portal_variables(slow_store, PETPORTAL_DATABASE_URL=f"sqlite:///{tmp_path / 'portal.sqlite'}")
    prepare_portal(env, [("kim", "staff", PASSWORD)])
    port = free_port()
    origin = f"http://127.0.0.1:{port}"
    portal = start_portal(env, port)
    try:
        wait_for_port(port, portal)
        browser, path = start_import(origin, "kim", PASSWORD, NAMES)
        wait_for(lambda: len(slow_store.names) >= 12, 30, "12 rows sent")
        kill(portal)
        sent_before = len(slow_store.names)
        assert sent_before < ROWS
        portal = start_portal(env, port)
        wait_for_port(port, portal)
        # With no request at all, the new worker's watcher picks the import up once the dead runner's lease
        # ends, and sends the rows not yet sent.
        wait_for(lambda: len(slow_store.names) == ROWS, 60, "every row sent")
        wait_for(lambda: progress(browser, origin, path)["state"] == "done", 10, "the import reaching done")
        final = progress(browser, origin, path)
        check_the_outcome(final, slow_store, results_of(browser, origin, path))
        print(f"\nkilled the portal after {sent_before} of {ROWS} rows were sent: {json.dumps(final)}")
    finally:
        kill(portal)


def test_killing_the_rq_worker_mid_import_loses_nothing_and_sends_nothing_twice(slow_store, tmp_path):
    redis_url = os.environ.get("PETPORTAL_TEST_REDIS_URL")
    if not redis_url:
        pytest.skip("PETPORTAL_TEST_REDIS_URL is not set: no Redis for the RQ worker")
    with redis.Redis.from_url(redis_url) as server:
        server.flushdb()
    schema, database_url = postgres_schema_url()
    env = portal_variables(slow_store, PETPORTAL_DATABASE_URL=database_url, PETPORTAL_REDIS_URL=redis_url)
    port = free_port()
    origin = f"http://127.0.0.1:{port}"
    portal = worker = None
    try:
        prepare_portal(env, [("kim", "staff", PASSWORD)])
        portal = start_portal(env, port)
        worker = start([*FLASK_PORTAL, "imports", "worker"], env)
        wait_for_port(port, portal)
        browser, path = start_import(origin, "kim", PASSWORD, NAMES)
        wait_for(lambda: len(slow_store.names) >= 12, 30, "12 rows sent")
        kill(worker)
        sent_before = len(slow_store.names)
        assert sent_before < ROWS
        stalled = progress(browser, origin, path)
        assert stalled["state"] == "running"
        worker = start([*FLASK_PORTAL, "imports", "worker"], env)
        wait_for(lambda: progress(browser, origin, path)["state"] == "done", 60, "the import reaching done")
        final = progress(browser, origin, path)
        check_the_outcome(final, slow_store, results_of(browser, origin, path))
        print(f"\nkilled the RQ worker after {sent_before} of {ROWS} rows were sent: {json.dumps(final)}")
    finally:
        for process in (portal, worker):
            if process is not None and process.poll() is None:
                kill(process)
        drop_postgres_schema(schema)


def test_sigterm_to_the_rq_worker_mid_import_hands_the_import_to_the_next_worker_at_once(slow_store, tmp_path):
    """A worker stopped with SIGTERM sends no more rows: it settles those under way, gives its lease up and queues the
    import again, so the next worker goes on with it at once (the lease here outlasts the test) and nothing is
    unknown."""
    redis_url = os.environ.get("PETPORTAL_TEST_REDIS_URL")
    if not redis_url:
        pytest.skip("PETPORTAL_TEST_REDIS_URL is not set: no Redis for the RQ worker")
    with redis.Redis.from_url(redis_url) as server:
        server.flushdb()
    schema, database_url = postgres_schema_url()
    env = portal_variables(
        slow_store,
        PETPORTAL_DATABASE_URL=database_url,
        PETPORTAL_REDIS_URL=redis_url,
        PETPORTAL_IMPORT_LEASE_SECONDS="600",
    )
    port = free_port()
    origin = f"http://127.0.0.1:{port}"
    portal = worker = None
    try:
        prepare_portal(env, [("kim", "staff", PASSWORD)])
        portal = start_portal(env, port)
        worker = start([*FLASK_PORTAL, "imports", "worker"], env)
        wait_for_port(port, portal)
        browser, path = start_import(origin, "kim", PASSWORD, NAMES)
        wait_for(lambda: len(slow_store.names) >= 12, 30, "12 rows sent")
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(10) == 0
        sent_by_the_first = len(slow_store.names)
        assert sent_by_the_first < ROWS, "the stopped worker sent every row before it stopped"
        assert progress(browser, origin, path)["state"] == "queued"
        worker = start([*FLASK_PORTAL, "imports", "worker"], env)
        wait_for(lambda: progress(browser, origin, path)["state"] == "done", 60, "the import reaching done")
        final = progress(browser, origin, path)
        check_the_outcome(final, slow_store, results_of(browser, origin, path))
        assert final["unknown"] == 0, final
        print(f"\nstopped the RQ worker after {sent_by_the_first} of {ROWS} rows were sent: {json.dumps(final)}")
    finally:
        for process in (portal, worker):
            if process is not None and process.poll() is None:
                kill(process)
        drop_postgres_schema(schema)
