"""A limit on an account stops its imports and promotions before their next row (issue 48), on SQLite and
PostgreSQL, against real reference stores: after the limit commits, the store receives at most the rows already
claimed (IMPORT_CONCURRENCY), and the import stops saying why.
"""

import time

import pytest
from test_rehearsal import promote

from petportal.auth import accounts
from petportal.config import IMPORT_CONCURRENCY, Environment
from petportal.extensions import db

from support.helpers import STAGING_KEY, SlowStore, finished, press, routed_store, upload
from support.servers import FaultServer, serve


def limit_while_sending(app, store, owner, disable=False):
    """Once the import is sending, limit its owner to staging (or disable it); how many createPet calls the store
    had received when the change committed."""
    deadline = time.monotonic() + 10
    while len(store.names) < 2 * IMPORT_CONCURRENCY and time.monotonic() < deadline:
        time.sleep(0.005)
    with app.app_context():
        if disable:
            accounts.set_enabled(accounts.find("admin"), accounts.find(owner), False)
        else:
            accounts.set_environments(accounts.find(owner), frozenset({Environment.STAGING}))
        db.session.commit()
        return len(store.names)


def assert_stopped_at_the_limit(app, auth_for, store, path, sent_at_limit, total):
    admin = auth_for(app, "admin")
    stopped = finished(admin, path)
    assert len(store.names) - sent_at_limit <= IMPORT_CONCURRENCY, (sent_at_limit, len(store.names))
    assert stopped["state"] == "stopped" and stopped["created"] == len(store.names) < total
    said = "staff may no longer add to production (limited or disabled), so nothing more was sent."
    assert said in admin.get(path).text


@pytest.mark.parametrize("disable", [False, True], ids=["limited", "disabled"])
def test_an_import_sends_no_row_claimed_after_its_owner_is_limited(
    make_portal, database_url, auth_for, tmp_path, disable
):
    store = SlowStore(tmp_path, seconds=0.01)
    with serve(store) as origin, FaultServer() as staging:
        app = make_portal.over(origin + "/v1", staging.base_url, SQLALCHEMY_DATABASE_URI=database_url)
        staff = auth_for(app, "staff")
        rows = "".join(f"Pup {number},1,\n" for number in range(300))
        path = upload(staff, "name,categoryId,status\n" + rows).headers["Location"]
        press(staff, path, "start")
        sent_at_limit = limit_while_sending(app, store, "staff", disable)
        assert_stopped_at_the_limit(app, auth_for, store, path, sent_at_limit, 300)


def test_a_promotion_sends_no_row_claimed_after_its_owner_is_limited(make_portal, auth_for, tmp_path, store_server):
    store = SlowStore(tmp_path, seconds=0.01)
    animals = [(f"Promoted {number}", 4, "available") for number in range(100)]
    with serve(store) as origin, routed_store(store_server, tmp_path, "staging", STAGING_KEY, animals) as staging:
        app = make_portal.over(origin + "/v1", staging.url)
        staff = auth_for(app, "staff")
        ids = [animal["id"] for animal in staging.animals()]
        path = promote(staff, *ids).headers["Location"]
        press(staff, path, "start")
        sent_at_limit = limit_while_sending(app, store, "staff")
        assert_stopped_at_the_limit(app, auth_for, store, path, sent_at_limit, 100)
