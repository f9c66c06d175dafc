"""Lock-out without locking out (OWASP's device cookies): a flood of wrong passwords from many addresses never
refuses the owner's browser, the owner's own failures refuse nobody else, and a disabled account answers every
password alike."""

import re

import pytest
import redis
import requests
from itsdangerous import URLSafeTimedSerializer
from requests.adapters import HTTPAdapter

from petportal.data.models import AuditEntry, User
from petportal.extensions import db

from support.helpers import PASSWORDS, REDIS_URL, AuthActions, enrol_mfa, post_form, totp
from support.portal import csrf_token
from support.servers import serve


class FromAddress(HTTPAdapter):
    """Connections made from one loopback address, so the portal sees the browser there, as it sees a real one."""

    def __init__(self, address):
        self.address = address  # before HTTPAdapter's own __init__, which makes the pool
        super().__init__()

    def init_poolmanager(self, *args, **kwargs):
        super().init_poolmanager(*args, source_address=(self.address, 0), **kwargs)


def browser(address):
    """A browser (a requests session, keeping its cookies) whose requests come from `address`."""
    session = requests.Session()
    session.mount("http://", FromAddress(address))
    return session


def log_in(session, origin, username, password):
    """One login through the real form; its status."""
    token = csrf_token(session.get(f"{origin}/login", timeout=10).text)
    data = {"username": username, "password": password, "csrf_token": token}
    return session.post(f"{origin}/login", data=data, allow_redirects=False, timeout=10).status_code


@pytest.mark.parametrize("store", ["database", "redis"])
def test_seven_addresses_times_five_wrong_passwords_leave_the_admin_able_to_log_in_from_its_browser(make_portal, store):
    """The attack: 35 wrong passwords for the admin from 127.0.0.31 to .37 (five each, under the limit of one account
    from one address) fill the account's ceiling of 30 a minute. A new browser is still refused; the admin's own
    browser, where it logged in before, is not."""
    settings = {}
    if store == "redis":
        if not REDIS_URL:
            pytest.skip("PETPORTAL_TEST_REDIS_URL is not set: no Redis to count in")
        with redis.Redis.from_url(REDIS_URL) as server:
            server.flushdb()
        settings["REDIS_URL"] = REDIS_URL
    with serve(make_portal(**settings)) as origin, browser("127.0.0.30") as owner:
        assert log_in(owner, origin, "admin", PASSWORDS["admin"]) == 303
        owner.post(f"{origin}/logout", data={"csrf_token": csrf_token(owner.get(f"{origin}/animals").text)})
        assert owner.cookies.get("device"), "logging out keeps the device cookie"
        statuses = []
        for number in range(7):
            for _ in range(5):
                with browser(f"127.0.0.{31 + number}") as attacker:
                    statuses.append(log_in(attacker, origin, "admin", "not the password"))
        assert statuses == [401] * 30 + [429] * 5
        with browser("127.0.0.40") as new:
            assert log_in(new, origin, "admin", PASSWORDS["admin"]) == 429, "the account's ceiling holds without one"
        assert log_in(owner, origin, "admin", PASSWORDS["admin"]) == 303


def test_wrong_passwords_from_the_owners_browser_count_on_its_device_not_on_the_account(make_portal):
    app = make_portal(LOGIN_LIMIT_PER_ACCOUNT="3 per minute")
    owner = app.test_client()
    assert AuthActions(owner).login("staff").status_code == 303
    AuthActions(owner).logout()
    statuses = [
        AuthActions(owner).login("staff", password="wrong", address=f"198.51.100.{number}").status_code
        for number in range(6)
    ]
    assert statuses == [401] * 5 + [429], "the device's own limit, 5 a minute from any address"
    assert AuthActions(app.test_client()).login("staff", address="192.0.2.1").status_code == 303


def test_a_forged_or_another_accounts_device_cookie_gives_no_exemption(make_portal):
    app = make_portal(LOGIN_LIMIT_PER_ACCOUNT="3 per minute")
    owner, staff_browser, forger = (app.test_client() for _ in range(3))
    assert AuthActions(owner).login("admin").status_code == 303
    assert AuthActions(staff_browser).login("staff").status_code == 303
    forger.set_cookie("device", URLSafeTimedSerializer("not the key", salt="petportal device").dumps(["admin", "x"]))
    for number in range(3):
        refused = AuthActions(app.test_client()).login("admin", password="wrong", address=f"198.51.100.{number}")
        assert refused.status_code == 401
    assert AuthActions(staff_browser).login("admin", address="192.0.2.1").status_code == 429
    assert AuthActions(forger).login("admin", address="192.0.2.2").status_code == 429
    assert AuthActions(owner).login("admin", address="192.0.2.3").status_code == 303


def test_a_login_with_a_second_factor_gets_its_device_cookie_once_the_code_is_right(make_portal, clock):
    app = make_portal(CLOCK=clock)
    enrolling = app.test_client()
    AuthActions(enrolling).login("staff")
    secret, _codes = enrol_mfa(enrolling, clock)
    clock.advance(seconds=30)  # the code used to enrol is spent
    client = app.test_client()
    assert AuthActions(client).login("staff").headers["Location"] == "/login/mfa"
    assert client.get_cookie("device") is None
    assert post_form(client, "/login/mfa", "/login/mfa", code=totp(secret, clock)).status_code == 303
    assert client.get_cookie("device") is not None


def without_token(page):
    """A page without its CSRF token, which is signed with the time, so two answers a second apart differ there."""
    return re.sub(r'name="csrf_token" type="hidden" value="[^"]*"', "", page)


def test_a_disabled_account_answers_the_right_password_as_it_answers_a_wrong_one(make_portal):
    app = make_portal(LOGIN_LIMIT_PER_ACCOUNT_ADDRESS="2 per minute")
    with app.app_context():
        db.session.scalar(db.select(User).filter_by(username="staff")).enabled = False
        db.session.commit()
    client = app.test_client()
    right = AuthActions(client).login("staff")
    wrong = AuthActions(client).login("staff", password="not the password")
    assert right.status_code == wrong.status_code == 401
    assert without_token(right.text) == without_token(wrong.text)
    assert "Unknown user name or wrong password." in right.text
    assert client.get_cookie("device") is None
    assert AuthActions(client).login("staff").status_code == 429, "the right password's attempt stays counted too"
    with app.app_context():
        actions = db.session.scalars(db.select(AuditEntry.action).order_by(AuditEntry.id)).all()
    assert actions[:2] == ["login_refused", "login_failed"], "the audit log still tells them apart"
