"""Deploys as an operator runs them: a server stopped with SIGTERM under load while it sends an import, and the
import taken on by the next instance at once; two instances behind nginx, with the deploying guide's own config,
restarted in turn under load."""

import signal
import subprocess
import threading
import time
import uuid
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from petportal.running.processes import stop, wait_for_port

from support.helpers import SlowStore, dispose_store, production_variables
from support.portal import PROJECT_ROOT, prepare_portal, start_import, wait_for
from support.servers import free_port, running, serve

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


# Each visitor asks at most this often: 80 pages a second among eight keep both instances busy through every stop
# and start (a stop's few seconds see hundreds), where asking flat out only spent the CPU the suite's other tests need.
PACE_SECONDS = 0.1


class Clients:
    """`count` visitors asking for the list over and over (each at most once every PACE_SECONDS), half on kept-alive
    connections and half on a new one for each page, until stopped; every answer's status is kept, and every failure
    to get one."""

    def __init__(self, origin, count=8):
        self.origin, self.statuses, self.failures = origin, [], []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._visit, args=(number % 2 == 0,)) for number in range(count)]

    def _visit(self, keep_alive):
        session = requests.Session()
        if keep_alive:
            # As a browser does: a GET on a kept-alive connection the server closed just then is sent once more (a
            # race of HTTP/1.1 itself); a refused connection is not.
            retry = Retry(total=1, connect=0, read=1, status=0, other=0, allowed_methods={"GET"})
            session.mount("http://", HTTPAdapter(max_retries=retry))
        headers = {} if keep_alive else {"Connection": "close"}
        while not self._stop.is_set():
            asked = time.monotonic()
            try:
                self.statuses.append(session.get(f"{self.origin}/animals", headers=headers, timeout=20).status_code)
            except requests.ConnectionError as error:
                self.failures.append(error)
            self._stop.wait(asked + PACE_SECONDS - time.monotonic())

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

    handed_back = (tmp_path / "first.log").read_text()
    assert "handed back as this process stops" in handed_back, handed_back[-3000:]
    with running(command, env, tmp_path / "second.log") as (origin, _second):
        wait_for(lambda: len(slow_store.names) == ROWS, 60, "every row sent by the second instance")
        wait_for(lambda: browser.get(f"{origin}{path}.json").json()["state"] == "done", 10, "the import done")
        final = browser.get(f"{origin}{path}.json").json()
    # The rows under way at the stop were answered and settled before the lease was given up: none is unknown.
    assert (final["created"], final["failed"], final["unknown"]) == (ROWS, 0, 0), final
    assert sorted(slow_store.names) == NAMES, "every name sent once"


NGINX = "/usr/sbin/nginx"
SITE = PROJECT_ROOT / "deploy" / "nginx-petportal.conf"
# What the guide's file says, and what the test puts in its place.
GUIDE_INSTANCES = ("127.0.0.1:8001", "127.0.0.1:8002")
GUIDE_LISTEN = "listen 8080;"
FAIL_TIMEOUT_SECONDS = 5  # the guide's fail_timeout


@contextmanager
def nginx(folder, instance_ports):
    """The deploying guide's nginx site (deploy/nginx-petportal.conf), its addresses replaced by `instance_ports`
    and a free port, run by an unprivileged nginx with everything it writes in `folder`; yields its origin."""
    site = SITE.read_text()
    assert all(address in site for address in GUIDE_INSTANCES) and GUIDE_LISTEN in site
    assert f"fail_timeout={FAIL_TIMEOUT_SECONDS}s" in site
    for address, port in zip(GUIDE_INSTANCES, instance_ports, strict=True):
        site = site.replace(address, f"127.0.0.1:{port}")
    port = free_port()
    (folder / "petportal.conf").write_text(site.replace(GUIDE_LISTEN, f"listen 127.0.0.1:{port};"))
    temporary = "".join(
        f"{kind}_temp_path {folder / kind};\n" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    (folder / "nginx.conf").write_text(
        f"daemon off;\nworker_processes 1;\npid {folder / 'nginx.pid'};\nerror_log {folder / 'error.log'} warn;\n"
        "events { worker_connections 512; }\n"
        f"http {{\naccess_log off;\n{temporary}include {folder / 'petportal.conf'};\n}}\n"
    )
    process = subprocess.Popen(
        [NGINX, "-p", str(folder), "-c", str(folder / "nginx.conf")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, process)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop([process])


def serving(env, tmp_path, number, port):
    """Instance `number` of the portal under `flask serve` on `port`, its output kept in the test's folder."""
    return running("flask serve", env, tmp_path / f"portal-{number}.log", port=port)


def ready(port):
    try:
        return requests.get(f"http://127.0.0.1:{port}/readyz", timeout=5).status_code == 200
    except requests.ConnectionError:
        return False


@pytest.mark.skipif(not Path(NGINX).exists(), reason="nginx is not installed (apt-get install nginx-light)")
def test_two_instances_behind_the_guides_nginx_restarted_in_turn_under_load_fail_no_request(tmp_path, production_store):
    env = production_variables(tmp_path, production_store.url, PETPORTAL_TRUSTED_PROXIES="1")
    ports = [free_port(), free_port()]
    (tmp_path / "nginx").mkdir()
    instances = [ExitStack() for _ in ports]
    try:
        for number, port in enumerate(ports):
            instances[number].enter_context(serving(env, tmp_path, number, port))
        with nginx(tmp_path / "nginx", ports) as origin, Clients(origin) as clients:
            wait_for(lambda: len(clients.statuses) >= 16, 30, "16 pages answered")
            for number, port in enumerate(ports):
                # The guide's rolling restart: stop an instance (SIGTERM), start it again, wait until its /readyz
                # answers 200, then twice nginx's fail_timeout (it may have marked the instance down while it
                # started), then the next.
                before = len(clients.statuses)
                instances[number].close()
                instances[number] = ExitStack()
                instances[number].enter_context(serving(env, tmp_path, number, port))
                wait_for(lambda port=port: ready(port), 30, f"instance {number} ready")
                time.sleep(2 * FAIL_TIMEOUT_SECONDS)
                wait_for(lambda before=before: len(clients.statuses) >= before + 16, 30, "16 more pages answered")
    finally:
        for instance in instances:
            instance.close()
    assert not clients.failures, [str(error) for error in clients.failures][:3]
    assert set(clients.statuses) == {200}, sorted(set(clients.statuses))
    print(f"\n{len(clients.statuses)} pages through nginx while both instances restarted in turn, none failed")
