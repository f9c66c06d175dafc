"""The portal's own database or Redis down or hanging: customers keep browsing, logins get a clear 503, an error
page is drawn whatever failed, and one log line per failure."""

import socket
import time

from sqlalchemy.exc import OperationalError

from petportal.data.database import cause
from petportal.extensions import db
from petportal.imports.engines import Watcher
from petportal.serving.choice import ActiveChoice

from support.helpers import AuthActions
from support.portal import csrf_token


def break_database(app, tmp_path):
    """Make the portal's SQLite database impossible to open, as a database server that went away."""
    with app.app_context():
        db.engine.dispose()
    database = tmp_path / "portal-0" / "portal.sqlite"
    database.unlink()
    database.mkdir()


def test_customers_keep_browsing_while_the_portal_database_is_down(make_portal, tmp_path, caplog):
    app = make_portal()
    staff = app.test_client()
    AuthActions(staff).login("staff")
    break_database(app, tmp_path)
    caplog.clear()
    customer = app.test_client().get("/animals")
    assert customer.status_code == 200 and "Rex" in customer.text
    caplog.clear()
    page = staff.get("/animals/new")
    assert page.status_code == 503
    assert "Logging in is unavailable for the moment" in page.text
    assert page.headers["X-Request-ID"] in page.text
    assert "default-src 'self'" in page.headers["Content-Security-Policy"]
    # One line per failure; the access lines (one per request, written once each answer is sent) aside.
    portal_lines = [
        r for r in caplog.records if r.name.startswith(("petportal", "flask")) and r.name != "petportal.access"
    ]
    assert len(portal_lines) <= 2, [r.getMessage() for r in portal_lines]
    assert "Traceback" not in caplog.text


def test_a_login_while_the_database_is_down_is_a_clear_503(make_portal, tmp_path):
    app = make_portal()
    client = app.test_client()
    form = csrf_token(client.get("/login").text)
    break_database(app, tmp_path)
    response = client.post("/login", data={"username": "staff", "password": "whatever", "csrf_token": form})
    assert response.status_code == 503
    assert "Logging in is unavailable for the moment" in response.text


def test_an_error_page_is_drawn_even_when_nothing_about_the_request_can_be_worked_out(make_portal, monkeypatch):
    app = make_portal()
    monkeypatch.setattr(ActiveChoice, "active", lambda self: 1 / 0)
    page = app.test_client().get("/animals")
    assert page.status_code == 500
    assert "Something went wrong" in page.text and page.headers["X-Request-ID"] in page.text
    assert "Serving the <strong>unknown</strong> environment" in page.text
    monkeypatch.setattr("petportal.web.error_pages.render_template", lambda *args, **kwargs: 1 / 0)
    bare = app.test_client().get("/animals")
    assert bare.status_code == 500 and "<h1>Something went wrong</h1>" in bare.text
    assert bare.headers["X-Request-ID"] in bare.text and "Traceback" not in bare.text


def test_with_redis_down_customers_browse_and_logins_get_a_clear_503(make_portal):
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        app = make_portal(REDIS_URL=f"redis://127.0.0.1:{closed.getsockname()[1]}/0", CACHE_SECONDS=2)
    client = app.test_client()
    assert client.get("/animals").status_code == 200
    response = client.get("/login")
    assert response.status_code == 503
    assert "Logging in is unavailable" in response.text


def test_a_redis_that_never_answers_slows_no_customer_page(make_portal):
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(64)  # accepts connections, never answers
        app = make_portal(REDIS_URL=f"redis://127.0.0.1:{silent.getsockname()[1]}/0", CACHE_SECONDS=2)
        client = app.test_client()
        started = time.monotonic()
        first = client.get("/animals")
        first_took = time.monotonic() - started
        started = time.monotonic()
        second = client.get("/animals?status=sold")
        second_took = time.monotonic() - started
    assert first.status_code == second.status_code == 200
    assert first_took < 1.5
    assert second_took < 0.5, "after one failure the cache is left alone for a while"


def test_a_refused_redis_costs_one_log_line_not_one_per_page(make_portal, caplog):
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        app = make_portal(REDIS_URL=f"redis://127.0.0.1:{closed.getsockname()[1]}/0", CACHE_SECONDS=2)
    client = app.test_client()
    caplog.clear()
    for _ in range(5):
        assert client.get("/animals").status_code == 200
    cache_lines = [r for r in caplog.records if "page cache" in r.getMessage()]
    assert len(cache_lines) == 1 and not cache_lines[0].exc_info


def test_a_log_line_about_the_database_names_its_cause(make_portal, tmp_path, caplog):
    app = make_portal()
    staff = app.test_client()
    AuthActions(staff).login("staff")
    break_database(app, tmp_path)
    caplog.clear()
    assert staff.get("/animals/new").status_code == 503
    lines = [r.getMessage() for r in caplog.records if r.levelname == "ERROR" and r.name.startswith("petportal")]
    assert lines and all("OperationalError: unable to open database file" in line for line in lines), lines


def test_a_cause_names_the_drivers_message_with_its_password_hidden():
    refused = OperationalError(
        "SELECT 1", {}, Exception("connection to postgresql://portal:hunter2-secret-password@db:5432/portal failed")
    )
    assert cause(refused) == "Exception: connection to postgresql://portal:***@db:5432/portal failed"
    assert cause(OperationalError("SELECT 1", {}, Exception("host=db password=hunter2 user=portal"))).endswith(
        "host=db password=*** user=portal"
    )


def test_the_look_for_unfinished_imports_is_said_failing_once_while_the_database_is_down(make_portal, tmp_path, caplog):
    app = make_portal()
    watcher = Watcher(app, lambda import_id: None)
    break_database(app, tmp_path)
    caplog.clear()
    for _ in range(3):
        assert not watcher.once()
    lines = [r.getMessage() for r in caplog.records if "no look for unfinished bulk imports" in r.getMessage()]
    assert len(lines) == 1, lines
    assert "unable to open database file" in lines[0]
