"""Day two: installed from a wheel anywhere, watched through /metrics and JSON logs, clear at start-up."""

import io
import json
import logging
import os
import re
import subprocess
import sys
import sysconfig
from datetime import UTC, date, datetime

import pytest
import requests

from petportal.admin.status import in_words, stability_in_words
from petportal.petstore.environments import DeprecationNotice
from petportal.reference_store import create_app as create_store
from petportal.running.processes import stop, wait_for_port
from petportal.telemetry.logs import RequestContextFilter

from support.helpers import PRODUCTION_KEY, SECRET_KEY, AuthActions, metric, production_variables
from support.portal import PROJECT_ROOT, portal_environment
from support.servers import free_port, portal_processes

FLASK = [sys.executable, "-m", "flask"]


# --- installable anywhere --------------------------------------------------------------------------


@pytest.mark.slow
def test_a_built_wheel_serves_pages_and_stylesheet_from_another_directory(tmp_path, production_store):
    """Build the wheel, install it (alone) into a fresh venv, and serve a store from an empty folder: refused
    until one is configured (an installed portal never runs the demo)."""
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(tmp_path / "dist"), str(PROJECT_ROOT)],
        check=True,
        capture_output=True,
    )
    [wheel] = (tmp_path / "dist").glob("petportal-*.whl")
    venv = tmp_path / "venv"
    # Without a pip of its own (ensurepip takes seconds): this environment's pip installs into it (--python).
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    # The wheel's dependencies come from this environment; the checkout itself is not on the path.
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    (tmp_path / "venv" / site.split(str(venv) + "/")[1] / "deps.pth").write_text(
        sysconfig.get_paths()["purelib"] + "\n"
    )
    subprocess.run(
        # --force-reinstall: the environment whose packages it borrows may hold the checkout, installed editable.
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--no-deps",
            "--force-reinstall",
            "--quiet",
            str(wheel),
        ],
        check=True,
        capture_output=True,
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    configured = production_variables(tmp_path, production_store.url)
    env = {key: value for key, value in configured.items() if key not in ("PYTHONPATH",)}
    unconfigured = {key: value for key, value in portal_environment().items() if key not in ("PYTHONPATH",)}
    where = subprocess.run(
        [str(python), "-c", "import petportal; print(petportal.__file__)"],
        cwd=elsewhere,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert str(venv) in where and str(PROJECT_ROOT) not in where
    refused = subprocess.run(
        [str(python), "-m", "flask", "--app", "petportal", "run", "--port", str(free_port())],
        cwd=elsewhere,
        env=unconfigured,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert refused.returncode != 0 and "PETSTORE_PRODUCTION_URL" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    subprocess.run([str(python), "-m", "flask", "--app", "petportal", "init-db"], cwd=elsewhere, env=env, check=True)
    port = free_port()
    portal = subprocess.Popen(
        [str(python), "-m", "flask", "--app", "petportal", "run", "--port", str(port)],
        cwd=elsewhere,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, portal, seconds=60)
        page = requests.get(f"http://127.0.0.1:{port}/animals", timeout=10)
        assert page.status_code == 200 and "Rex" in page.text
        stylesheet = re.search(r'href="(/static/css/site\.css[^"]*)"', page.text).group(1)
        assert requests.get(f"http://127.0.0.1:{port}{stylesheet}", timeout=10).status_code == 200
    finally:
        stop([portal], seconds=20)


# --- metrics ---------------------------------------------------------------------------------------


@pytest.mark.slow
def test_metrics_add_up_over_two_gunicorn_workers(tmp_path, production_store):
    metrics_dir = tmp_path / "metrics"
    metrics_dir.mkdir()
    env = portal_environment(
        PETSTORE_PRODUCTION_URL=production_store.url,
        PETSTORE_PRODUCTION_KEY=PRODUCTION_KEY,
        PETPORTAL_SECRET_KEY=SECRET_KEY,
        PETPORTAL_HTTPS="0",
        PETPORTAL_CACHE_SECONDS="0",
        PETPORTAL_DATABASE_URL=f"sqlite:///{tmp_path / 'portal.sqlite'}",
        PROMETHEUS_MULTIPROC_DIR=str(metrics_dir),
    )
    with portal_processes(env, count=1) as [origin]:
        pages = [requests.get(f"{origin}/animals", headers={"Connection": "close"}, timeout=10) for _ in range(40)]
        assert all(len(page.raw.headers.getlist("Date")) == 1 for page in pages), "gunicorn writes the one Date"
        workers = {name.rsplit("_", 1)[1] for name in os.listdir(metrics_dir) if name.startswith("counter_")}
        text = requests.get(f"{origin}/metrics", timeout=10).text
    assert len(workers) >= 2, "both workers served requests"
    assert metric(text, "petportal_requests_total", endpoint="catalog.list_animals", method="GET", status="200") == 40
    assert (
        metric(
            text,
            "petportal_upstream_request_duration_seconds_count",
            environment="production",
            operation="listPets",
            outcome="ok",
        )
        == 40
    )
    assert metric(text, "petportal_active_environment", environment="production") == 1


def test_metrics_need_the_token_when_one_is_set_and_else_a_loopback_client(make_portal):
    guarded = make_portal(METRICS_TOKEN="metrics-token").test_client()
    assert guarded.get("/metrics").status_code == 401
    assert guarded.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401
    allowed = guarded.get("/metrics", headers={"Authorization": "Bearer metrics-token"})
    assert allowed.status_code == 200 and "petportal_requests_total" in allowed.text
    open_to_loopback = make_portal().test_client()
    assert open_to_loopback.get("/metrics").status_code == 200
    assert open_to_loopback.get("/metrics", environ_base={"REMOTE_ADDR": "203.0.113.9"}).status_code == 403


def test_metrics_count_logins_submissions_and_cache_lookups(make_portal):
    app = make_portal(CACHE_SECONDS=5)
    client = app.test_client()
    before = client.get("/metrics").text
    client.get("/animals?limit=3")
    client.get("/animals?limit=3")
    AuthActions(client).login("staff", password="wrong")
    after = client.get("/metrics").text
    for name, labels, grew in [
        ("petportal_page_cache_total", {"result": "hit"}, 1),
        ("petportal_page_cache_total", {"result": "miss"}, 1),
        # The cached page is counted as a request too, though Flask never saw it.
        ("petportal_requests_total", {"endpoint": "catalog.list_animals", "method": "GET", "status": "200"}, 2),
        ("petportal_logins_total", {"outcome": "failure"}, 1),
    ]:
        assert metric(after, name, **labels) - metric(before, name, **labels) == grew, name


# --- logs ------------------------------------------------------------------------------------------


def test_json_logs_are_one_object_a_line_with_request_id_user_and_environment(make_portal):
    app = make_portal(LOG_FORMAT="json")
    stream = io.StringIO()
    [handler] = [
        h
        for h in logging.getLogger("petportal").handlers
        if any(isinstance(f, RequestContextFilter) for f in h.filters)
    ]
    handler.setStream(stream)
    logging.getLogger("petportal").setLevel(logging.DEBUG)  # the client's line for each call is DEBUG
    client = app.test_client()
    AuthActions(client).login("staff")
    page = client.get("/animals")
    records = [json.loads(line) for line in stream.getvalue().splitlines()]
    mine = [r for r in records if r["request_id"] == page.headers["X-Request-ID"]]
    assert mine, records
    assert {"time", "level", "logger", "message", "request_id", "user", "environment"} <= set(mine[0])
    assert mine[0]["user"] == "staff" and mine[0]["environment"] == "production"
    assert mine[0]["logger"] == "petportal.petstore.client" and mine[0]["level"] == "DEBUG"


# --- start-up --------------------------------------------------------------------------------------

ENTRY_POINTS = {
    "python app.py": [sys.executable, "app.py"],
    "flask run": [*FLASK, "--app", "app", "run"],
    "flask init-db": [*FLASK, "--app", "app", "init-db"],
    "flask --app petportal": [*FLASK, "--app", "petportal", "run"],
    "gunicorn": [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py", "app:app"],
}
MISTAKES = {
    "no /v1": (
        {"PETSTORE_PRODUCTION_URL": "http://127.0.0.1:9/api", "PETSTORE_PRODUCTION_KEY": "production-key-0123456789ab"},
        "PETSTORE_PRODUCTION_URL",
    ),
    "no secret": (
        {"PETSTORE_PRODUCTION_URL": "http://127.0.0.1:9/v1", "PETSTORE_PRODUCTION_KEY": "production-key-0123456789ab"},
        "PETPORTAL_SECRET_KEY",
    ),
    "bad number": (
        {
            "PETSTORE_PRODUCTION_URL": "http://127.0.0.1:9/v1",
            "PETSTORE_PRODUCTION_KEY": "production-key-0123456789ab",
            "PETPORTAL_SECRET_KEY": "x" * 32,
            "PETPORTAL_UPSTREAM_TIMEOUT": "soon",
        },
        "PETPORTAL_UPSTREAM_TIMEOUT",
    ),
}


@pytest.mark.parametrize("entry", ENTRY_POINTS)
@pytest.mark.parametrize("mistake", MISTAKES)
def test_every_configuration_mistake_is_one_line_naming_the_variable(entry, mistake):
    variables, named = MISTAKES[mistake]
    result = subprocess.run(
        ENTRY_POINTS[entry],
        cwd=PROJECT_ROOT,
        env=portal_environment(**variables),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert named in lines[0] and "Traceback" not in result.stderr


def gunicorn_settings(*names):
    """Settings of gunicorn.conf.py, read in a process of their own (the file sets environment variables)."""
    script = f"import json, runpy; s = runpy.run_path('gunicorn.conf.py'); print(json.dumps([s[n] for n in {names!r}]))"
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=PROJECT_ROOT,
        env=portal_environment(),
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(result.stdout)


def test_gunicorn_listens_on_loopback_unless_told_otherwise():
    assert gunicorn_settings("bind") == ["127.0.0.1:8000"]


def test_gunicorn_believes_no_forwarded_header_itself():
    assert gunicorn_settings("forwarded_allow_ips", "secure_scheme_headers", "forwarder_headers") == ["", {}, ""]


# --- the reference store and the status page -------------------------------------------------------


def test_seeding_the_store_fills_it_up_to_the_count_and_no_further(tmp_path):
    store = create_store({"PETSTORE_API_KEYS": ["k"], "SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path / 's.sqlite'}"})
    runner = store.test_cli_runner()
    assert "Added 12 animals; the store holds 12" in runner.invoke(args=["seed"]).output
    assert "Added 0 animals; the store holds 12" in runner.invoke(args=["seed"]).output
    assert "Added 8 animals; the store holds 20" in runner.invoke(args=["seed", "--count", "20"]).output


@pytest.mark.parametrize(
    "deprecation, sunset, deprecated, removal",
    [
        (
            "@1733356800",
            "Thu, 05 Dec 2030 00:00:00 GMT",
            "deprecated since 2024-12-05",
            "removal on 2030-12-05 (1474 days left)",
        ),
        ("true", None, "deprecated", "no removal date announced"),
        ("<script>", "soon", "a Deprecation header the portal cannot read", "a Sunset header the portal cannot read"),
    ],
)
def test_deprecation_and_sunset_read_as_dates(deprecation, sunset, deprecated, removal):
    words = in_words(DeprecationNotice(deprecation, sunset), date(2026, 11, 22))
    assert (words.deprecated, words.removal) == (deprecated, removal)


def test_stability_markers_read_as_words_and_unknown_ones_are_not_repeated():
    assert stability_in_words("beta") == "beta: may still change"
    assert stability_in_words(None) == "no stability marker (stable)"
    assert "<b>" not in stability_in_words("<b>new</b>")


def test_the_status_page_shows_the_store_notices_as_dates(make_portal, production_store):
    client = make_portal(CLOCK=lambda: datetime(2026, 11, 22, tzinfo=UTC)).test_client()
    AuthActions(client).login("admin")
    page = client.get("/admin/status").text
    assert "deprecated since 2024-12-05" in page
    assert "removal on 2030-12-05 (1474 days left)" in page
    assert "@1733356800" not in page
