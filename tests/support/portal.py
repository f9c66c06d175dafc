"""A portal readied and driven from outside, as an operator and a browser do: init-db and accounts through the
`flask` commands, a form's CSRF token, a logged-in browser.

The benches use it too (`python -m bench` runs from the checkout's root, where `tests.support` is importable); the
tests never import `bench`."""

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import requests

PROJECT_ROOT = Path(__file__).resolve().parents[2]
FLASK_PORTAL = [sys.executable, "-m", "flask", "--app", "app"]
CSRF_PATTERN = re.compile(r'name="csrf_token" (?:type="hidden" )?value="([^"]+)"')


def portal_environment(**variables):
    """This process's environment without any PETSTORE_, PETPORTAL_ or PROMETHEUS_ variable, plus `variables`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PETSTORE_", "PETPORTAL_", "PROMETHEUS_"))}
    env.update(variables)
    return env


def prepare_portal(env, accounts=()):
    """`flask --app app init-db`, then `user create NAME --role ROLE --password-stdin` for each of `accounts`
    ((name, role, password)...), as an operator readies a new portal."""
    subprocess.run([*FLASK_PORTAL, "init-db"], cwd=PROJECT_ROOT, env=env, check=True, capture_output=True)
    for name, role, password in accounts:
        subprocess.run(
            [*FLASK_PORTAL, "user", "create", name, "--role", role, "--password-stdin"],
            cwd=PROJECT_ROOT,
            env=env,
            input=password + "\n",
            text=True,
            check=True,
            capture_output=True,
        )


def csrf_token(page):
    """The CSRF token of the first form on a portal page."""
    match = CSRF_PATTERN.search(page)
    assert match, "no CSRF token on the page"
    return match.group(1)


def logged_in(origin, username, password):
    """A browser (a requests session) logged in to a portal running at `origin`."""
    browser = requests.Session()
    token = csrf_token(browser.get(f"{origin}/login").text)
    response = browser.post(f"{origin}/login", data={"username": username, "password": password, "csrf_token": token})
    assert response.status_code == 200, response.status_code
    return browser


def start_import(origin, username, password, names):
    """Log in as `username`, upload a CSV of `names` (category 1, no status) and start it, as staff do;
    (the logged-in browser, the import's path)."""
    browser = logged_in(origin, username, password)
    token = csrf_token(browser.get(f"{origin}/animals/import").text)
    rows = "".join(f"{name},1,\n" for name in names)
    response = browser.post(
        f"{origin}/animals/import",
        data={"csrf_token": token},
        files={"file": ("animals.csv", "name,categoryId,status\n" + rows)},
        allow_redirects=False,
    )
    assert response.status_code == 303, response.text
    path = response.headers["Location"]
    token = csrf_token(browser.get(f"{origin}{path}").text)
    assert browser.post(f"{origin}{path}/start", data={"csrf_token": token}, allow_redirects=False).status_code == 303
    return browser, path


def wait_for(condition, seconds, what):
    """Wait until `condition()` holds; fails saying `what` did not happen within `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"{what} did not happen within {seconds} s")
