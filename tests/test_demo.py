"""Demo mode: `python app.py` with nothing configured serves seeded reference stores over real HTTP."""

import re
import signal
import subprocess
import sys

import requests
from conftest import csrf_token
from servers import PROJECT_ROOT, free_port, is_listening, portal_environment, wait_for_port


def test_python_app_py_serves_seeded_animals_and_ctrl_c_stops_everything():
    port = free_port()
    portal = subprocess.Popen(
        [sys.executable, "app.py"], cwd=PROJECT_ROOT, env=portal_environment(FLASK_RUN_PORT=str(port)),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        # As in a terminal: a shell's background job (CI) would otherwise start with Ctrl-C ignored.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        banner = "".join(portal.stdout.readline() for _ in range(5))
        store_ports = [int(p) for p in re.findall(r"store: http://127\.0\.0\.1:(\d+)/v1", banner)]
        assert len(store_ports) == 2, banner
        passwords = dict(re.findall(r"user name: (\w+)\s+password: (\S+)", banner))
        assert set(passwords) == {"staff", "admin"}, banner
        origin = f"http://127.0.0.1:{port}"
        wait_for_port(port, portal)
        page = requests.get(f"{origin}/animals?limit=100", timeout=10)
        assert page.status_code == 200
        assert ">Rex<" in page.text and "status-sold" in page.text
        browser = requests.Session()
        login = browser.post(
            f"{origin}/login",
            data={"username": "admin", "password": passwords["admin"], "csrf_token": csrf_token(browser.get(f"{origin}/login").text)},
            allow_redirects=False,
        )
        assert login.status_code == 303
    finally:
        portal.send_signal(signal.SIGINT)
        try:
            portal.wait(20)
        finally:
            portal.kill()
            portal.stdout.close()
    assert portal.returncode == 0
    assert not is_listening(port)
    assert all(not is_listening(p) for p in store_ports)
