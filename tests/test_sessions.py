"""Sessions kept on the server: logging out ends the browser's session and every copy of its cookies, a remember
token changes at every use and restores one login however many requests carry it, an account's sessions end in one
call, and two instances sharing Redis see a logout at once."""

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from petportal import create_app
from petportal.extensions import db

from support.helpers import REDIS_URL, AuthActions, portal_config


def copy_cookies(source, target):
    """Give `target` every cookie `source` holds, as an attacker who copied them would."""
    for cookie in source._cookies.values():
        target.set_cookie(cookie.key, cookie.value, domain=cookie.domain, path=cookie.path)


@pytest.mark.parametrize("remember", [False, True])
def test_after_logout_the_browser_and_every_copy_of_its_cookies_are_logged_out(make_portal, remember):
    app = make_portal()
    browser, thief = app.test_client(), app.test_client()
    AuthActions(browser).login("staff", remember=remember)
    copy_cookies(browser, thief)
    assert thief.get("/animals/new").status_code == 200, "the copy works while the login is open"
    stolen_remember = browser.get_cookie("remember")
    AuthActions(browser).logout()
    assert browser.get_cookie("remember") is None
    assert browser.get("/animals/new").status_code == 302
    assert thief.get("/animals/new").status_code == 302
    if remember:
        alone = app.test_client()
        alone.set_cookie("remember", stolen_remember.value)
        assert alone.get("/animals/new").status_code == 302, "the remember cookie outlived the logout"


def test_the_remember_token_changes_at_every_use_and_an_old_one_is_refused(make_portal, clock):
    app = make_portal(CLOCK=clock)
    browser = app.test_client()
    AuthActions(browser).login("staff", remember=True)
    first = browser.get_cookie("remember").value
    clock.advance(minutes=31)  # the session idles out; the token restores the login
    assert browser.get("/animals/new").status_code == 200
    second = browser.get_cookie("remember").value
    assert second != first
    replay = app.test_client()
    replay.set_cookie("remember", first)
    assert replay.get("/animals/new").status_code == 302
    AuthActions(app.test_client()).login("staff", remember=True)
    assert first.split(".")[1] not in app.test_client().get("/animals").text


def test_a_remember_token_used_by_many_requests_at_once_restores_one_login(make_portal, clock):
    app = make_portal(CLOCK=clock)
    browser = app.test_client()
    AuthActions(browser).login("staff", remember=True)
    token = browser.get_cookie("remember").value
    clock.advance(minutes=31)
    clients = [app.test_client() for _ in range(12)]
    for copy in clients:
        copy.set_cookie("remember", token)
    barrier = threading.Barrier(len(clients))

    def use(copy):
        barrier.wait()
        return copy.get("/animals/new").status_code

    with ThreadPoolExecutor(len(clients)) as pool:
        statuses = list(pool.map(use, clients))
    assert statuses.count(200) == 1


def test_ending_every_session_of_an_account_is_one_call(make_portal):
    from petportal.auth import logins
    from petportal.data.models import User

    app = make_portal()
    laptop, phone, admin = app.test_client(), app.test_client(), app.test_client()
    AuthActions(laptop).login("staff")
    AuthActions(phone).login("staff", remember=True)
    AuthActions(admin).login("admin")
    with app.test_request_context():
        logins.end_all(db.session.scalar(db.select(User).filter_by(username="staff")).id)
        db.session.commit()  # end_all only adds to the unit of work; outside a request, its owner commits
    assert laptop.get("/animals/new").status_code == 302
    assert phone.get("/animals/new").status_code == 302
    assert admin.get("/animals/new").status_code == 200, "other accounts keep their sessions"


def test_the_session_cookie_holds_only_a_random_id(client):
    AuthActions(client).login("staff")
    value = client.get_cookie("session").value
    assert "." not in value and len(value) >= 40
    assert "staff" not in value


def test_two_instances_sharing_redis_see_a_logout_at_once(tmp_path, make_portal, production_store, staging_store):
    if not REDIS_URL:
        pytest.skip("PETPORTAL_TEST_REDIS_URL is not set: no Redis to share sessions through")
    shared = {"REDIS_URL": REDIS_URL, "SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path / 'shared.sqlite'}"}
    first = make_portal(**shared)
    second = create_app(portal_config(tmp_path, production_store.url, staging_store.url, **shared))
    browser, other = first.test_client(), second.test_client()
    AuthActions(browser).login("staff")
    copy_cookies(browser, other)
    assert other.get("/animals/new").status_code == 200, "the second instance serves the same session"
    AuthActions(browser).logout()
    assert other.get("/animals/new").status_code == 302
    second.extensions["petportal.petstore.environments"].close()
    with second.app_context():
        db.engine.dispose()
