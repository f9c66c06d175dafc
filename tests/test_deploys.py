"""Deploys as an operator runs them: a server stopped with SIGTERM under load while it sends an import, and the
import taken on by the next instance at once; two instances behind nginx, with the deploying guide's own config,
restarted in turn under load."""

import signal
import threading
import uuid
from pathlib import Path

import pytest
import requests

from support.helpers import SlowStore, dispose_store, production_variables
from support.portal import prepare_portal, start_import, wait_for
from support.servers import running, serve

pytestmark = pytest.mark.slow

PASSWORD = "handing over password " + uuid.uuid4().hex[:6]
ROWS = 40
NAMES = [f"Handed {number:02d}" for number in range(ROWS)]


@pytest.fixture
def slow_store(tmp_path):
    store = SlowStore(tmp_path, seconds=0.3)
    with serve(store) as origin:
        store.url = origin + "/v1"
        yield store
    dispose_store(store.app)


class Clients:
    """`count` visitors asking for the list over and over, half on kept-alive connections and half on a new one for
    each page, until stopped; every answer's status is kept, and every failure to get one."""

    def __init__(self, origin, count=8):
        self.origin, self.statuses, self.failures = origin, [], []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._visit, args=(number % 2 == 0,)) for number in range(count)]

    def _visit(self, keep_alive):
        session = requests.Session()
        headers = {} if keep_alive else {"Connection": "close"}
        while not self._stop.is_set():
            try:
                self.statuses.append(session.get(f"{self.origin}/animals", headers=headers, timeout=20).status_code)
            except requests.ConnectionError as error:
                self.failures.append(error)
                self._stop.wait(0.05)

    def __enter__(self):
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc_info):
        self._stop.set()
        for thread in self._threads:
            thread.join(30)


def refused(error):
    """Whether a request failed because nothing listened (so nothing was sent), not on a connection reset."""
    cause = error
    while cause is not None:
        if isinstance(cause, ConnectionRefusedError):
            return True
        cause = cause.__cause__ or cause.__context__
    return "Connection refused" in str(error)


@pytest.mark.parametrize("command", ["flask serve", "gunicorn"])
def test_sigterm_under_load_mid_import_answers_every_request_and_hands_the_import_on(tmp_path, slow_store, command):
    # A lease far longer than the test: another instance can only take the import over if it was handed back.
    env = production_variables(tmp_path, slow_store.url, PETPORTAL_IMPORT_LEASE_SECONDS="600")
    prepare_portal(env, [("kim", "staff", PASSWORD)])
    with running(command, env, tmp_path / "first.log") as (origin, first):
        browser, path = start_import(origin, "kim", PASSWORD, NAMES)
        wait_for(lambda: len(slow_store.names) >= 8, 30, "8 rows sent")
        workers = [int(pid) for pid in Path(f"/proc/{first.pid}/task/{first.pid}/children").read_text().split()]
        with Clients(origin) as clients:
            wait_for(lambda: len(clients.statuses) >= 16, 30, "16 pages answered")
            first.send_signal(signal.SIGTERM)
            assert first.wait(10) == 0
            answered_before_the_stop = len(clients.statuses)
            wait_for(lambda: len(clients.failures) >= 8, 10, "8 requests refused once the server is gone")
    assert not [pid for pid in workers if Path(f"/proc/{pid}").exists()], "the workers are gone"
    assert clients.statuses and all(200 <= status < 300 for status in clients.statuses), clients.statuses
    assert answered_before_the_stop >= 16
    # No request was reset: a connection made while the server stopped was answered, or refused at once.
    assert all(refused(error) for error in clients.failures), [str(error) for error in clients.failures][:3]
    sent_by_the_first = len(slow_store.names)
    assert sent_by_the_first < ROWS

    with running(command, env, tmp_path / "second.log") as (origin, _second):
        wait_for(lambda: len(slow_store.names) == ROWS, 60, "every row sent by the second instance")
        wait_for(lambda: browser.get(f"{origin}{path}.json").json()["state"] == "done", 10, "the import done")
        final = browser.get(f"{origin}{path}.json").json()
    # The rows under way at the stop were answered and settled before the lease was given up: none is unknown.
    assert (final["created"], final["failed"], final["unknown"]) == (ROWS, 0, 0), final
    assert sorted(slow_store.names) == NAMES, "every name sent once"
