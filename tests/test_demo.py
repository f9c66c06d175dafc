"""Demo mode: `python app.py` with nothing configured serves seeded reference stores over real HTTP."""

import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from pathlib import Path

import pytest
import requests

from petportal.reference_store import SAMPLES
from petportal.running import demo
from petportal.running.processes import wait_for_port

from support.portal import PROJECT_ROOT, csrf_token, portal_environment
from support.servers import free_port

pytestmark = pytest.mark.slow


def is_listening(port: int) -> bool:
    """Whether something accepts connections on this loopback port."""
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def start_demo(command, port):
    """Start a demo portal; return the process, the stores' ports and the printed passwords."""
    portal = subprocess.Popen(
        command,
        cwd=PROJECT_ROOT,
        env=portal_environment(FLASK_RUN_PORT=str(port)),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        # As in a terminal: a shell's background job (CI) would otherwise start with Ctrl-C ignored.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # noqa: PLW1509 - the test runs no threads
    )
    banner = "".join(portal.stdout.readline() for _ in range(5))
    store_ports = [int(p) for p in re.findall(r"store: http://127\.0\.0\.1:(\d+)/v1", banner)]
    passwords = dict(re.findall(r"user name: (\w+)\s+password: (\S+)", banner))
    assert len(store_ports) == 2 and set(passwords) == {"staff", "admin"}, banner
    wait_for_port(port, portal)
    return portal, store_ports, passwords


def stop(portal, number):
    portal.send_signal(number)
    try:
        portal.wait(20)
    finally:
        portal.kill()
        portal.stdout.close()


def sign_in(origin, username, password):
    """A login form sent as a browser sends it; the answer, unfollowed."""
    browser = requests.Session()
    token = csrf_token(browser.get(f"{origin}/login").text)
    data = {"username": username, "password": password, "csrf_token": token}
    return browser.post(f"{origin}/login", data=data, allow_redirects=False)


def test_python_app_py_help_prints_the_options_and_starts_nothing(tmp_path):
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "app.py", "--help"],
        cwd=PROJECT_ROOT,
        env=portal_environment(),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 0
    assert "usage: python app.py [-h] [--host HOST] [--port PORT]" in result.stdout
    assert "store:" not in result.stdout + result.stderr, "no demo store was started"
    assert time.monotonic() - started < 15


def test_python_app_py_listens_on_the_port_and_host_it_is_given():
    port, unused = free_port(), free_port()
    portal = subprocess.Popen(
        [sys.executable, "app.py", "--host", "127.0.0.1", "--port", str(port)],
        cwd=PROJECT_ROOT,
        env=portal_environment(FLASK_RUN_PORT=str(unused)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # noqa: PLW1509 - the test runs no threads
    )
    try:
        wait_for_port(port, portal)
        assert requests.get(f"http://127.0.0.1:{port}/healthz", timeout=10).status_code == 200
        assert not is_listening(unused)
    finally:
        portal.send_signal(signal.SIGINT)
        assert portal.wait(20) == 0


@pytest.mark.parametrize("number, status", [(signal.SIGINT, 0), (signal.SIGTERM, 128 + 15), (signal.SIGHUP, 128 + 1)])
def test_python_app_py_serves_seeded_animals_and_each_stop_signal_stops_its_stores(number, status):
    port = free_port()
    portal, store_ports, passwords = start_demo([sys.executable, "app.py"], port)
    # Letters and digits only: nothing a shell or a command line reads as an option or a special character.
    assert all(password.isascii() and password.isalnum() for password in passwords.values()), passwords
    try:
        origin = f"http://127.0.0.1:{port}"
        page = requests.get(f"{origin}/animals?limit=100", timeout=10)
        assert page.status_code == 200
        assert ">Rex<" in page.text and "status-sold" in page.text
        # The demo's labels in the reader's language ("Fish · 3" on the German list read English).
        german = requests.get(f"{origin}/animals?limit=100", cookies={"language": "de"}, timeout=10).text
        assert "Fische · 3" in german and "Fish · 3" not in german
        login = sign_in(origin, "admin", passwords["admin"])
        assert login.status_code == 303
    finally:
        stop(portal, number)
    assert portal.returncode == status
    assert not is_listening(port)
    assert all(not is_listening(p) for p in store_ports)


def test_two_demos_started_at_once_from_one_folder_each_serve_and_sign_in():
    """Each has the stores' animals and accounts of its own: neither resets the other's database while it runs."""
    ports = [free_port(), free_port()]
    with ThreadPoolExecutor() as starting:
        starts = [starting.submit(start_demo, [sys.executable, "app.py"], port) for port in ports]
    demos = [start.result() for start in starts if start.exception() is None]
    try:
        assert len(demos) == 2, [start.exception() for start in starts]
        for port, (_, _, passwords) in zip(ports, demos, strict=True):
            origin = f"http://127.0.0.1:{port}"
            assert ">Rex<" in requests.get(f"{origin}/animals?limit=100", timeout=10).text
            login = sign_in(origin, "admin", passwords["admin"])
            assert login.status_code == 303, "each demo's printed password signs in to it"
    finally:
        for portal, _, _ in demos:
            stop(portal, signal.SIGINT)
    assert [portal.returncode for portal, _, _ in demos] == [0, 0]


def test_two_demos_seeding_one_store_at_once_leave_it_seeded_once_and_nothing_else(tmp_path):
    database = tmp_path / "production.sqlite"
    env = {**os.environ, "PETSTORE_API_KEYS": "demo-key-0123456789ab"}
    with ThreadPoolExecutor() as seeding:
        list(seeding.map(lambda _: demo._seed(database, env, "production"), range(2)))
    with closing(sqlite3.connect(database)) as store:
        assert store.execute("SELECT count(*) FROM pets").fetchone() == (len(SAMPLES["production"]),)
    assert [path.name for path in tmp_path.iterdir()] == ["production.sqlite"]


def test_a_demo_portal_database_is_removed_by_the_process_that_made_it_not_by_a_forked_worker(tmp_path):
    (tmp_path / "demo").mkdir()
    folder = Path(demo.fresh_portal_database(str(tmp_path)).removeprefix("sqlite:///")).parent
    demo._remove(str(folder), os.getpid() + 1)  # as a process forked from the demo's exits
    assert folder.is_dir()
    demo._remove(str(folder), os.getpid())
    assert not folder.exists()


def test_debug_mode_starts_the_stores_once_and_keeps_them_across_a_reload(tmp_path):
    port = free_port()
    portal, store_ports, passwords = start_demo([sys.executable, "-m", "flask", "--app", "app", "run", "--debug"], port)
    try:
        origin = f"http://127.0.0.1:{port}"
        assert requests.get(f"{origin}/animals", timeout=10).status_code == 200
        for store_port in store_ports:
            processes = subprocess.run(
                ["pgrep", "-f", f"petportal.reference_store run .*--port {store_port}$"],
                capture_output=True,
                text=True,
                check=False,
            ).stdout.split()
            assert len(processes) == 1, "each store runs once, with no reloader of its own"
        (PROJECT_ROOT / "petportal" / "running" / "ops.py").touch()  # the reloader restarts the portal
        time.sleep(3)
        wait_for_port(port, portal)
        login = sign_in(origin, "staff", passwords["staff"])
        assert login.status_code == 303, "the printed passwords still work after the reload"
        assert all(is_listening(p) for p in store_ports)
    finally:
        stop(portal, signal.SIGTERM)
    assert all(not is_listening(p) for p in store_ports)
