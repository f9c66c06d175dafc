"""The README's walk-through, run as a newcomer would, against a local reference store."""

import os
import re
import shutil
import signal
import subprocess

import pyotp
import pytest
import requests

from petportal.running.processes import wait_for_port

from support.helpers import SECRET_PATTERN
from support.portal import PROJECT_ROOT, csrf_token, portal_environment
from support.servers import free_port

pytestmark = pytest.mark.slow


def walkthrough():
    """The bash block that follows the `walkthrough` marker in README.md."""
    text = (PROJECT_ROOT / "README.md").read_text()
    return re.search(r"<!-- walkthrough -->\s*```bash\n(.*?)```", text, re.DOTALL).group(1)


def test_the_readme_walkthrough_works_as_written(tmp_path):
    """As written, in its order: the reference store started first, then the portal pointed at it."""
    script = walkthrough()
    store_port, port = free_port(), free_port()
    script = script.replace("8001", str(store_port))  # the README's port, free or not on this machine
    shutil.copy(PROJECT_ROOT / "app.py", tmp_path / "app.py")  # the reader's checkout, without its instance/
    env = portal_environment(FLASK_RUN_PORT=str(port), PATH=os.environ["PATH"])
    portal = subprocess.Popen(
        ["bash", "-euc", script],
        cwd=tmp_path,
        env=env,
        start_new_session=True,  # the store in the background and the portal: one process group, stopped together
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_for_port(port, portal, seconds=60)
        browser = requests.Session()
        origin = f"http://127.0.0.1:{port}"
        password = re.search(r'echo "([^"]+)" \| flask --app app user create alice', script).group(1)
        login = browser.post(
            f"{origin}/login",
            allow_redirects=False,
            data={
                "username": "alice",
                "password": password,
                "csrf_token": csrf_token(browser.get(f"{origin}/login").text),
            },
        )
        assert login.status_code == 303
        page = browser.get(f"{origin}/animals")
        assert page.status_code == 200 and "Rex" in page.text
        # As the README says, alice first sets up a second factor (codes from the real clock here).
        enrolment = browser.get(f"{origin}/admin/environment")
        assert enrolment.url == f"{origin}/account/mfa"
        secret = SECRET_PATTERN.search(enrolment.text).group(1)
        token = csrf_token(enrolment.text)
        browser.post(f"{origin}/account/mfa", data={"csrf_token": token, "code": pyotp.TOTP(secret).now()})
        assert browser.get(f"{origin}/admin/environment").url == f"{origin}/admin/environment"
    finally:
        os.killpg(portal.pid, signal.SIGTERM)
        output = portal.communicate(timeout=20)[0]
    assert (tmp_path / "portal.sqlite").exists(), output
    assert (tmp_path / "instance" / "petstore.sqlite").exists(), output
