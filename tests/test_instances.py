"""Several portal instances: two gunicorn instances on different ports share PostgreSQL and Redis.

Within 2 s a switch made on one is served by the other; the login limit is counted across both;
one submission token used on both creates one animal; a cache invalidation on one is seen by the other;
a password changed on one logs the account's sessions on the other out.
"""

import os
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis
import requests

from support.helpers import (
    NEW_PASSWORDS,
    PRODUCTION_KEY,
    SECRET_KEY,
    STAGING_KEY,
    LiveStore,
    dispose_store,
    drop_postgres_schema,
    make_store,
    postgres_schema_url,
    submission_token,
)
from support.portal import csrf_token, logged_in, portal_environment, prepare_portal
from support.servers import RecordingMiddleware, portal_processes, serve

pytestmark = pytest.mark.slow

ADMIN_PASSWORD = "root password " + uuid.uuid4().hex[:6]
STAFF_PASSWORD = "staff password " + uuid.uuid4().hex[:6]


@pytest.fixture(scope="module")
def instances(tmp_path_factory):
    """Two gunicorn instances over two real stores, sharing a fresh PostgreSQL schema and Redis."""
    redis_url = os.environ.get("PETPORTAL_TEST_REDIS_URL")
    if not redis_url:
        pytest.skip("PETPORTAL_TEST_REDIS_URL is not set: no Redis to share between instances")
    # The test Redis database is the tests' own: start without counters or pages left by earlier runs
    # (the per-address login limit of 127.0.0.1 would otherwise fill up across runs within the hour).
    with redis.Redis.from_url(redis_url) as server:
        server.flushdb()
    schema, database_url = postgres_schema_url()
    folder = tmp_path_factory.mktemp("instances")
    production_app = make_store(folder / "production.sqlite", [PRODUCTION_KEY])
    staging_app = make_store(folder / "staging.sqlite", [STAGING_KEY])
    production_recorder = RecordingMiddleware(production_app)
    try:
        with serve(production_recorder) as production, serve(RecordingMiddleware(staging_app)) as staging:
            env = portal_environment(
                PETSTORE_PRODUCTION_URL=production + "/v1",
                PETSTORE_PRODUCTION_KEY=PRODUCTION_KEY,
                PETSTORE_STAGING_URL=staging + "/v1",
                PETSTORE_STAGING_KEY=STAGING_KEY,
                PETPORTAL_SECRET_KEY=SECRET_KEY,
                PETPORTAL_DATABASE_URL=database_url,
                PETPORTAL_HTTPS="0",
                PETPORTAL_REDIS_URL=redis_url,
                PETPORTAL_CACHE_SECONDS="30",
                # The admin here switches environments; the second factor has its own tests.
                PETPORTAL_REQUIRE_ADMIN_MFA="0",
            )
            prepare_portal(env, [("root", "admin", ADMIN_PASSWORD), ("kim", "staff", STAFF_PASSWORD)])
            with portal_processes(env) as origins:
                yield origins, LiveStore(production + "/v1", PRODUCTION_KEY, production_recorder)
    finally:
        dispose_store(production_app)
        dispose_store(staging_app)
        drop_postgres_schema(schema)


def test_a_cache_invalidation_on_one_instance_is_seen_by_the_other(instances):
    (first, second), _store = instances
    name = "Cached-" + uuid.uuid4().hex[:6]
    assert name not in requests.get(f"{second}/animals?limit=100").text
    staff = logged_in(first, "kim", STAFF_PASSWORD)
    form = staff.get(f"{first}/animals/new").text
    added = staff.post(
        f"{first}/animals/new",
        allow_redirects=False,
        data={
            "csrf_token": csrf_token(form),
            "submission_token": submission_token(form),
            "name": name,
            "category_id": "1",
        },
    )
    assert added.status_code == 303
    assert name in requests.get(f"{second}/animals?limit=100").text


def test_one_submission_token_used_on_both_instances_creates_one_animal(instances):
    (first, second), store = instances
    name = "Both-" + uuid.uuid4().hex[:6]
    staff = logged_in(first, "kim", STAFF_PASSWORD)
    form = staff.get(f"{first}/animals/new").text
    data = {
        "csrf_token": csrf_token(form),
        "submission_token": submission_token(form),
        "name": name,
        "category_id": "2",
    }
    with ThreadPoolExecutor(4) as pool:
        responses = list(
            pool.map(
                lambda origin: staff.post(f"{origin}/animals/new", data=data, allow_redirects=False),
                [first, second, first, second],
            )
        )
    assert [r.status_code for r in responses] == [303] * 4
    assert len({r.headers["Location"] for r in responses}) == 1
    assert [a["name"] for a in store.animals()].count(name) == 1


def test_the_login_limit_is_counted_across_both_instances(instances):
    (first, second), _ = instances
    username = "nobody-" + uuid.uuid4().hex[:8]
    statuses = []
    for attempt in range(6):
        origin = (first, second)[attempt % 2]
        browser = requests.Session()
        token = csrf_token(browser.get(f"{origin}/login").text)
        statuses.append(
            browser.post(
                f"{origin}/login", data={"username": username, "password": "wrong", "csrf_token": token}
            ).status_code
        )
    assert statuses == [401, 401, 401, 401, 401, 429]


def switch(browser, origin, environment):
    page = browser.get(f"{origin}/admin/environment")
    response = browser.post(
        f"{origin}/admin/environment",
        allow_redirects=False,
        data={"csrf_token": csrf_token(page.text), "environment": environment, "confirm": environment},
    )
    assert response.status_code == 303


def test_a_switch_on_one_instance_is_served_by_the_other_within_2_seconds(instances):
    (first, second), _ = instances
    admin = logged_in(first, "root", ADMIN_PASSWORD)
    assert "You are using" not in requests.get(f"{second}/animals").text
    switch(admin, first, "staging")
    started = time.monotonic()
    try:
        while "You are using <strong>STAGING</strong>" not in requests.get(f"{second}/animals").text:
            assert time.monotonic() - started < 2, "the other instance still serves production after 2 s"
            time.sleep(0.05)
    finally:
        switch(admin, first, "production")


def change_password(browser, origin, current, new):
    page = browser.get(f"{origin}/account/password")
    return browser.post(
        f"{origin}/account/password",
        allow_redirects=False,
        data={
            "csrf_token": csrf_token(page.text),
            "current_password": current,
            "new_password": new,
            "confirm": new,
        },
    )


def test_a_password_changed_on_one_instance_logs_the_accounts_sessions_on_the_other_out(instances):
    (first, second), _ = instances
    admin = logged_in(first, "root", ADMIN_PASSWORD)
    name = "pat" + uuid.uuid4().hex[:6]
    page = admin.get(f"{first}/admin/users/new")
    created = admin.post(
        f"{first}/admin/users/new",
        allow_redirects=False,
        data={
            "csrf_token": csrf_token(page.text),
            "username": name,
            "role": "staff",
            "environments": ["production", "staging"],
            "password": NEW_PASSWORDS[0],
        },
    )
    assert created.status_code == 303
    here = logged_in(first, name, NEW_PASSWORDS[0])
    assert here.get(f"{first}/animals", allow_redirects=False).headers["Location"] == "/account/password"
    assert change_password(here, first, NEW_PASSWORDS[0], NEW_PASSWORDS[1]).status_code == 303
    there = logged_in(second, name, NEW_PASSWORDS[1])
    assert there.get(f"{second}/animals/new", allow_redirects=False).status_code == 200
    assert change_password(here, first, NEW_PASSWORDS[1], NEW_PASSWORDS[2]).status_code == 303
    assert there.get(f"{second}/animals/new", allow_redirects=False).status_code == 302
    assert here.get(f"{first}/animals/new", allow_redirects=False).status_code == 200
