"""A pytest plugin: the suite's reliability and security figures, and the scan of everything the portal
sends for secrets. Loaded by conftest.py; the run prints them at its end and writes them to test-output/figures.json."""

import json
import re
from pathlib import Path

import pytest

from support.helpers import SECRETS

FIGURES = {
    "responses_scanned": 0,
    "secrets_found": 0,
    "hostile_inputs": 0,
    "faults_injected": 0,
    "submissions": 0,
    "duplicates": 0,
    "lost": 0,
}
FIGURES_FILE = Path(__file__).parents[2] / "test-output" / "figures.json"


def pytest_sessionfinish(session):
    """Write the suite's reliability and security figures (test-output/figures.json)."""
    worker_output = getattr(session.config, "workeroutput", None)
    if worker_output is not None:  # a pytest-xdist worker: hand its figures to the controller, which adds them up
        worker_output["figures"] = dict(FIGURES)
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter else []
    reasons = {}
    for report in skipped:
        reason = (
            report.longrepr[2].removeprefix("Skipped: ") if isinstance(report.longrepr, tuple) else str(report.longrepr)
        )
        reasons[reason] = reasons.get(reason, 0) + 1
    FIGURES_FILE.parent.mkdir(parents=True, exist_ok=True)
    FIGURES_FILE.write_text(
        json.dumps(
            {**FIGURES, "tests_failed": session.testsfailed, "tests_skipped": len(skipped), "skipped_reasons": reasons},
            indent=2,
        )
    )


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """A pytest-xdist worker finished: add its figures to the run's."""
    for name, value in getattr(node, "workeroutput", {}).get("figures", {}).items():
        FIGURES[name] += value


def pytest_terminal_summary(terminalreporter):
    terminalreporter.write_line(
        "figures: " + ", ".join(f"{name.replace('_', ' ')} {value}" for name, value in FIGURES.items())
    )


class SecretScanner:
    """WSGI middleware that looks for any secret in every status line, header, body and session (cookie and
    stored data)."""

    def __init__(self, app):
        self.app = app
        self.wsgi_app = app.wsgi_app
        self.leaks = []

    def __call__(self, environ, start_response):
        captured = {}

        def capture(status, headers, exc_info=None):
            captured["head"] = status + "\n" + "\n".join(f"{k}: {v}" for k, v in headers)
            captured["cookies"] = [v for k, v in headers if k.lower() == "set-cookie"]
            return start_response(status, headers, exc_info)

        iterable = self.wsgi_app(environ, capture)
        try:
            body = b"".join(iterable)
        finally:
            if hasattr(iterable, "close"):
                iterable.close()  # WSGI: the server must close what the app returned
        text = captured["head"] + "\n" + body.decode("utf-8", "replace")
        for cookie in captured["cookies"]:
            text += "\n" + self._decoded_session(cookie)
        FIGURES["responses_scanned"] += 1
        found = [f"{environ['PATH_INFO']}: {secret[:12]}..." for secret in SECRETS if secret in text]
        FIGURES["secrets_found"] += len(found)
        self.leaks.extend(found)
        return [body]

    def _decoded_session(self, cookie):
        """What the server keeps under the session cookie's id: it must hold no secret either."""
        name = self.app.config["SESSION_COOKIE_NAME"]
        match = re.match(rf"{name}=([^;]*)", cookie)
        if not match or not match.group(1):
            return ""
        interface = self.app.session_interface
        with self.app.app_context():
            data = interface._retrieve_session_data(interface._get_store_id(match.group(1)))
        return match.group(1) + json.dumps(data, default=str)


def leaks(app, caplog):
    """What of the secrets reached a response of `app` (scanned) or a log line; counted in the figures."""
    logged = [f"log: {s[:12]}..." for s in SECRETS if s in caplog.text]
    FIGURES["secrets_found"] += len(logged)
    return app.wsgi_app.leaks + logged
