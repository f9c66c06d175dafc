"""Production serving as an operator runs it: `flask --app app serve` (granian), and gunicorn beside it, on real
ports in front of a real store; their output read line by line, signals sent as a process manager sends them."""

import json
import logging
import os
import signal
import socket
import threading
import time
from pathlib import Path

import pytest
import requests

from petportal.telemetry import logs

from support.helpers import metric, production_variables
from support.servers import running, serve

pytestmark = pytest.mark.slow
LIST_PAGES = {"endpoint": "catalog.list_animals", "method": "GET", "status": "200"}


def workers_of(process):
    """The process ids of a server's workers (its children)."""
    return {int(pid) for pid in Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()}


def test_flask_serve_serves_pages_from_two_workers_and_adds_up_their_metrics(tmp_path, production_store):
    metrics_dir = tmp_path / "metrics"
    metrics_dir.mkdir()
    env = production_variables(tmp_path, production_store.url, PROMETHEUS_MULTIPROC_DIR=str(metrics_dir))
    with running("flask serve", env, tmp_path / "out.log") as (origin, process):
        pages = [requests.get(f"{origin}/animals", headers={"Connection": "close"}, timeout=10) for _ in range(40)]
        assert all(page.status_code == 200 and "Rex" in page.text for page in pages)
        # Compressed as the browser accepts (requests takes gzip and Brotli), with the server's one Date.
        assert all(page.headers["Content-Encoding"] in ("br", "gzip") for page in pages)
        assert all(len(page.raw.headers.getlist("Date")) == 1 for page in pages)
        assert requests.get(f"{origin}/healthz", timeout=10).status_code == 200
        stylesheet = requests.get(f"{origin}/static/css/portal.css", timeout=10)
        assert stylesheet.status_code == 200 and "text/css" in stylesheet.headers["Content-Type"]
        assert len(stylesheet.raw.headers.getlist("Date")) == 1
        counted_by = {
            int(name.rsplit("_", 1)[1][:-3]) for name in os.listdir(metrics_dir) if name.startswith("counter_")
        }
        assert workers_of(process) <= counted_by, "both workers served pages"
        text = requests.get(f"{origin}/metrics", timeout=10).text
        assert metric(text, "petportal_requests_total", **LIST_PAGES) == 40

        # A worker killed outright is replaced; its counters stay in the sums, its live gauges go.
        dead = sorted(workers_of(process))[0]
        assert any(name.endswith(f"_{dead}.db") and name.startswith("gauge_live") for name in os.listdir(metrics_dir))
        os.kill(dead, signal.SIGKILL)
        deadline = time.monotonic() + 20
        while len(workers_of(process) - {dead}) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(workers_of(process) - {dead}) == 2, "the killed worker was replaced"
        text = requests.get(f"{origin}/metrics", timeout=10).text
        assert metric(text, "petportal_requests_total", **LIST_PAGES) == 40
        assert not [name for name in os.listdir(metrics_dir) if name.startswith("gauge_live") and f"_{dead}." in name]
        assert requests.get(f"{origin}/animals", timeout=10).status_code == 200

        # A query that is not UTF-8 gets the portal's 400 page; a header that is not ASCII reaches the portal as
        # empty text under granian (docs/security.md), and its page is answered whole, never with a 500.
        refused = requests.get(f"{origin}/animals?q=%ff", timeout=10)
        assert refused.status_code == 400 and "its query is not UTF-8 text" in refused.text
        for value in (b"caf\xc3\xa9", b"\xff\xfe"):
            page = requests.get(
                f"{origin}/login", headers={"User-Agent": value, "Cookie": b"pref=" + value}, timeout=10
            )
            assert page.status_code in (200, 400) and "</html>" in page.text, page.status_code
    assert process.returncode == 0


class SlowList:
    """The reference store, answering each listPets only after `seconds`."""

    def __init__(self, app, seconds):
        self.app, self.seconds = app, seconds

    def __call__(self, environ, start_response):
        if environ["PATH_INFO"].endswith("/pets") and environ["REQUEST_METHOD"] == "GET":
            time.sleep(self.seconds)
        return self.app(environ, start_response)


@pytest.mark.parametrize("command", ["flask serve", "gunicorn"])
def test_sigterm_during_a_slow_page_lets_it_finish_and_the_server_exits_0(tmp_path, production_store, command):
    app = production_store.recorder.app
    with serve(SlowList(app, 2.0)) as slow_origin:
        env = production_variables(tmp_path, slow_origin + "/v1", PETPORTAL_UPSTREAM_TIMEOUT="5")
        with running(command, env, tmp_path / "out.log") as (origin, process):
            answers = []
            waiting = threading.Thread(target=lambda: answers.append(requests.get(f"{origin}/animals", timeout=20)))
            waiting.start()
            time.sleep(0.8)  # the page is now waiting on the store
            process.send_signal(signal.SIGTERM)
            waiting.join(20)
            assert process.wait(30) == 0
    [page] = answers
    assert page.status_code == 200 and "Rex" in page.text


@pytest.mark.parametrize("command", ["flask serve", "gunicorn", "flask run"])
def test_with_json_logs_every_line_of_the_server_is_one_json_object(tmp_path, production_store, command):
    env = production_variables(tmp_path, production_store.url, PETPORTAL_LOG_FORMAT="json")
    output = tmp_path / "out.log"
    with running(command, env, output) as (origin, _process):
        page = requests.get(f"{origin}/animals?status=available", timeout=10)
        missing = requests.get(f"{origin}/animals/999999", timeout=10)
        # An access line is written once its answer is sent: wait for both before stopping the server.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not all(
            response.headers["X-Request-ID"] in output.read_text() for response in (page, missing)
        ):
            time.sleep(0.05)
    assert page.status_code == 200 and missing.status_code == 404
    lines = output.read_text().splitlines()
    if command == "flask run":  # Flask's own banner, printed (not logged) by its command line before serving
        lines = [line for line in lines if not line.startswith((" * Serving Flask app", " * Debug mode"))]
    records = []
    for line in lines:
        try:
            records.append(json.loads(line))
        except ValueError:
            pytest.fail(f"{command} wrote a line that is not JSON: {line!r}")
    access = [record for record in records if record.get("logger") == "petportal.access"]
    by_id = {record["request_id"]: record for record in access}
    for response, path in ((page, "/animals"), (missing, "/animals/999999")):
        record = by_id[response.headers["X-Request-ID"]]
        assert record["method"] == "GET" and record["path"] == path
        assert record["status"] == response.status_code and record["duration_ms"] > 0
        assert "status=available" not in json.dumps(record), "the query (what a visitor typed) is not logged"
    if command != "flask run":  # the development server prints its banner with click; it is not for production
        messages = " ".join(record.get("message", "") for record in records)
        assert "Listening at" in messages or "Listening at: http" in messages
        assert any(word in messages for word in ("Shutting down", "Handling signal")), "its stop is logged too"


def test_a_workers_access_lines_are_made_later_with_the_time_of_their_answers(caplog):
    """In a worker, a request only keeps its access line's fields: the line is made by the worker's own thread, and
    says when the answer was made, not when the line was."""
    caplog.set_level(logging.INFO, logger=logs.ACCESS_LOGGER)
    lines = logs.AccessLines()
    lines.keep_for_later()
    answered = time.time() - 3600.25
    lines.write(logs.AccessEvent(answered, "GET", "/animals", 200, 1.5, "a" * 32, "-"))
    lines.write(logs.AccessEvent(answered + 1, "GET", "/animals/7", 404, 0.5, "b" * 32, "-"))
    assert not [record for record in caplog.records if record.name == logs.ACCESS_LOGGER]
    lines.drain()
    first, second = [record for record in caplog.records if record.name == logs.ACCESS_LOGGER]
    assert (first.created, first.request_id, first.getMessage()) == (answered, "a" * 32, "GET '/animals' 200 1.50 ms")
    assert (second.created, second.status, second.path) == (answered + 1, 404, "/animals/7")
    text = logs.formatter("text").format(first)
    milliseconds = int((answered - int(answered)) * 1000)
    assert text.startswith(time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(answered)) + f",{milliseconds:03d} "), text


@pytest.mark.parametrize("command", ["flask serve", "gunicorn"])
def test_with_text_logs_the_servers_own_lines_are_written_too(tmp_path, production_store, command):
    env = production_variables(tmp_path, production_store.url)
    output = tmp_path / "out.log"
    with running(command, env, output) as (origin, _process):
        assert requests.get(f"{origin}/animals", timeout=10).status_code == 200
    written = output.read_text()
    assert "Listening at" in written, "the server's start is logged"
    assert "Logging error" not in written and "Traceback" not in written
    # 8 threads a worker, which mostly wait on the store, is the shape measured best (gunicorn.conf.py): granian's
    # warning about threads for computing does not apply, and is not written.
    assert "Python threads" not in written, written


def test_a_server_believes_no_forwarded_header_without_trusted_proxies(tmp_path, production_store):
    env = production_variables(tmp_path, production_store.url, PETPORTAL_HTTPS="1", PETPORTAL_TRUSTED_HOSTS="127.0.0.1")
    with running("flask serve", env, tmp_path / "out.log") as (origin, _process):
        forged = requests.get(
            f"{origin}/animals",
            headers={"X-Forwarded-Proto": "https", "X-Forwarded-Host": "evil.example"},
            allow_redirects=False,
            timeout=10,
        )
    # Plain HTTP is sent to HTTPS on the address it came to, whatever the headers claim.
    assert forged.status_code in (301, 302, 308)
    assert forged.headers["Location"].startswith("https://127.0.0.1")
    assert "evil.example" not in forged.headers["Location"]


@pytest.mark.parametrize(
    "opening",
    [
        b"GET /animals HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ",
        b"POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\n"
        b"Content-Length: 100000\r\n\r\nusername=",
    ],
    ids=["headers", "body"],
)
def test_slow_clients_holding_connections_do_not_keep_pages_from_others(tmp_path, production_store, opening):
    env = production_variables(tmp_path, production_store.url)
    with running("flask serve", env, tmp_path / "out.log") as (origin, _process):
        port = int(origin.rsplit(":", 1)[1])
        # More half-sent requests than the two workers have threads (2 x 8), each still sending.
        slow = [socket.create_connection(("127.0.0.1", port)) for _ in range(24)]
        try:
            for connection in slow:
                connection.sendall(opening)
            time.sleep(0.5)
            for connection in slow:
                connection.sendall(b"a")
            started = time.monotonic()
            page = requests.get(f"{origin}/animals", timeout=10)
            assert page.status_code == 200 and "Rex" in page.text
            assert requests.get(f"{origin}/healthz", timeout=10).status_code == 200
            assert time.monotonic() - started < 5
        finally:
            for connection in slow:
                connection.close()


def test_under_flask_serve_no_secret_variable_reaches_a_requests_environ(tmp_path, production_store):
    secrets_set = {
        "PETSTORE_STAGING_KEY": "staging-key-" + "s" * 24,  # with its URL below: a key alone is refused at start
        "PETPORTAL_METRICS_TOKEN": "metrics-token-" + "m" * 24,
        "PETPORTAL_OIDC_CLIENT_SECRET": "client-secret-" + "c" * 24,
        "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer collector-token-" + "o" * 24,
    }
    env = production_variables(tmp_path, production_store.url, PETSTORE_STAGING_URL=production_store.url, **secrets_set)
    hidden = {name: env[name] for name in ("PETSTORE_PRODUCTION_KEY", "PETPORTAL_SECRET_KEY", *secrets_set)}
    with running("flask serve, environ page", env, tmp_path / "out.log") as (origin, _process):
        shown = requests.get(f"{origin}/test/environ", timeout=10).json()
        page = requests.get(f"{origin}/animals", timeout=10)
    # granian puts the server's environment in every request's environ: the rest of it is there.
    assert "PATH" in shown["names"]
    assert not set(hidden) & set(shown["names"])
    assert not [value for value in shown["values"] if any(secret in value for secret in hidden.values())]
    assert not [name for name in shown["names"] if name in ("PETPORTAL_DATABASE_URL", "PETPORTAL_DEMO_STARTED")]
    # The portal read them before they went: it still calls the store with its key.
    assert page.status_code == 200 and "Rex" in page.text
