"""Login limits (petportal/auth/throttle.py): failed logins counted per account and address, per address and per
account, before the password is checked, in the database or in Redis, and for the whole instance.

Lock-out without locking out (OWASP's device cookies): a flood of wrong passwords from many addresses never
refuses the owner's browser, the owner's own failures refuse nobody else, and a disabled account answers every
password alike."""

import re
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis
import requests
import sqlalchemy
from itsdangerous import URLSafeTimedSerializer
from requests.adapters import HTTPAdapter

from petportal.auth import accounts
from petportal.data.models import AuditEntry, LoginCounter, User
from petportal.extensions import db

from support.helpers import (
    NEW_PASSWORDS,
    PASSWORDS,
    REDIS_URL,
    AuthActions,
    enrol_mfa,
    post_form,
    production_variables,
    totp,
    wrong_password,
)
from support.portal import csrf_token
from support.servers import running, serve


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


def login(client, username="staff", **options):
    return AuthActions(client).login(username, **options)


# --- counted per account and address, per address and per account --------------------------------------------------


def test_failed_logins_are_limited_per_username_with_a_friendly_429(client):
    for _ in range(5):
        assert login(client, "staff", password="wrong").status_code == 401
    limited = login(client, "staff", password="wrong")
    assert limited.status_code == 429
    assert "Too many attempts" in limited.text and "Request id" in limited.text
    assert login(client, "staff").status_code == 429, "the right password must wait too"
    assert login(client, "admin").status_code == 303, "another user name is not held up"


def test_failed_logins_are_limited_per_address(make_portal):
    client = make_portal(LOGIN_LIMIT_PER_ADDRESS="8 per minute").test_client()
    for number in range(8):
        assert login(client, f"user{number}", password="wrong").status_code == 401
    assert login(client, "someone-new", password="wrong").status_code == 429


def test_an_account_named_like_an_address_never_uses_up_that_address(make_portal):
    """Each counter has its own name: failures for the user name "10.0.0.7" count against that name, not
    against logins from the address 10.0.0.7."""
    client = make_portal(LOGIN_LIMIT_PER_ADDRESS="3 per minute", LOGIN_LIMIT_PER_ACCOUNT="3 per minute").test_client()
    for number in range(3):
        assert login(client, "10.0.0.7", password="wrong", address=f"192.0.2.{number}").status_code == 401
    assert login(client, "staff", address="10.0.0.7").status_code == 303


def test_successful_logins_do_not_count(client):
    for _ in range(8):
        assert login(client, "staff").status_code == 303


def test_failures_from_five_addresses_do_not_lock_the_real_user_out(client):
    for number in range(5):
        for _ in range(5):
            failed = AuthActions(client).login("staff", password="wrong", address=f"198.51.100.{number}")
            assert failed.status_code == 401
    assert AuthActions(client).login("staff", address="192.0.2.1").status_code == 303


def test_guessing_from_one_address_is_stopped_and_a_flood_at_one_account_too(make_portal):
    client = make_portal(LOGIN_LIMIT_PER_ACCOUNT="12 per minute").test_client()
    for _ in range(5):
        assert AuthActions(client).login("staff", password="wrong", address="198.51.100.1").status_code == 401
    assert AuthActions(client).login("staff", address="198.51.100.1").status_code == 429
    for number in range(2, 9):
        AuthActions(client).login("staff", password="wrong", address=f"198.51.100.{number}")
    assert AuthActions(client).login("staff", address="192.0.2.1").status_code == 429, "the account's ceiling"


def test_refused_attempts_from_one_address_never_fill_the_account_ceiling(make_portal):
    client = make_portal(LOGIN_LIMIT_PER_ACCOUNT="30 per minute; 100 per hour").test_client()
    for _ in range(40):
        AuthActions(client).login("staff", password="wrong", address="198.51.100.66")
    assert AuthActions(client).login("staff", address="192.0.2.7").status_code == 303


def test_simultaneous_wrong_passwords_are_counted_before_they_are_checked(portal_app):
    clients = [portal_app.test_client() for _ in range(32)]
    forms = [csrf_token(c.get("/login").text) for c in clients]
    barrier = threading.Barrier(len(clients))

    def guess(index):
        barrier.wait()
        return (
            clients[index]
            .post("/login", data={"username": "staff", "password": "wrong", "csrf_token": forms[index]})
            .status_code
        )

    with ThreadPoolExecutor(len(clients)) as pool:
        statuses = list(pool.map(guess, range(len(clients))))
    assert statuses.count(401) == 5
    assert statuses.count(429) == 27
    with portal_app.app_context():
        checks = db.session.scalar(db.select(db.func.sum(AuditEntry.count)).where(AuditEntry.action == "login_failed"))
    assert checks == 5


# --- limits that hold for the instance -----------------------------------------------------------------------------


@pytest.mark.slow
def test_twelve_wrong_passwords_under_two_workers_without_redis_get_at_most_five_checks(tmp_path, production_store):
    env = production_variables(tmp_path, production_store.url)
    assert "PETPORTAL_REDIS_URL" not in env
    with running("flask serve", env, tmp_path / "out.log") as (origin, _process):
        statuses = []
        for _ in range(12):
            # A new browser and connection each time, so the two workers share the attempts between them.
            browser = requests.Session()
            token = csrf_token(browser.get(f"{origin}/login", headers={"Connection": "close"}, timeout=10).text)
            data = {"username": "kim", "password": "wrong", "csrf_token": token}
            answer = browser.post(f"{origin}/login", data=data, headers={"Connection": "close"}, timeout=10)
            statuses.append(answer.status_code)
    assert statuses == [401] * 5 + [429] * 7
    engine = sqlalchemy.create_engine(f"sqlite:///{tmp_path / 'portal.sqlite'}")
    with engine.connect() as connection:
        checked = connection.execute(
            sqlalchemy.text("SELECT sum(count) FROM audit_log WHERE action = 'login_failed' AND actor = 'kim'")
        ).scalar()
    engine.dispose()
    assert checked == 5


@pytest.mark.parametrize("kind", ["login", "mfa"])
def test_simultaneous_attempts_are_counted_once_each_on_either_database(make_portal, database_url, kind):
    """Two limits of the same attempts (5 a minute): 16 threads at once get exactly 5 through, on SQLite and on
    PostgreSQL (each counts on its own unit of work, with the row locked or the one writer)."""
    from petportal.auth import throttle

    app = make_portal(SQLALCHEMY_DATABASE_URI=database_url)
    barrier = threading.Barrier(16)

    def attempt(_number):
        with app.test_request_context("/login", environ_base={"REMOTE_ADDR": "198.51.100.7"}):
            barrier.wait()
            limit = throttle.attempt("Kim", kind)
            db.session.remove()
            return limit

    with ThreadPoolExecutor(16) as pool:
        limits = list(pool.map(attempt, range(16)))
    expected = throttle.Limit.ACCOUNT_ADDRESS if kind == "login" else throttle.Limit.CODES
    assert limits.count(None) == 5 and limits.count(expected) == 11


def test_a_limit_starts_again_with_its_next_window_and_ended_windows_are_deleted(make_portal, clock):
    app = make_portal(CLOCK=clock)
    client = app.test_client()
    token = csrf_token(client.get("/login").text)
    assert [wrong_password(client, "kim", token=token) for _ in range(6)] == [401] * 5 + [429]
    clock.advance(seconds=61)
    assert wrong_password(client, "kim", token=token) == 401, "a new minute"
    with app.app_context():
        assert db.session.scalar(db.select(db.func.count()).select_from(LoginCounter)) == 6  # 3 counters, 2 windows
    clock.advance(hours=2)
    assert wrong_password(client, "lee") == 401  # with a new form: the session idled out
    with app.app_context():
        keys = db.session.scalars(db.select(LoginCounter.key)).all()
    assert len(keys) == 6 and all("lee" in key or "127.0.0.1" in key for key in keys), keys
    assert not any("kim" in key for key in keys), "kim's ended windows are deleted"


def test_with_redis_the_counters_stay_in_redis(make_portal):
    if not REDIS_URL:
        pytest.skip("PETPORTAL_TEST_REDIS_URL is not set: no Redis to count in")
    with redis.Redis.from_url(REDIS_URL) as server:
        server.flushdb()
    app = make_portal(REDIS_URL=REDIS_URL)
    client = app.test_client()
    token = csrf_token(client.get("/login").text)
    assert [wrong_password(client, "kim", token=token) for _ in range(6)] == [401] * 5 + [429]
    with app.app_context():
        assert db.session.scalar(db.select(db.func.count()).select_from(LoginCounter)) == 0
    with redis.Redis.from_url(REDIS_URL) as server:
        assert any(b"kim" in key for key in server.keys("*"))


# --- lock-out without locking out: the device cookie ---------------------------------------------------------------


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


def test_device_cookies_gathered_before_a_new_password_give_no_exemption_after_it(make_portal):
    """Someone who once knew the password may have logged in from many browsers: once the password is reset, none of
    their cookies outlasts it, and their guesses count on the account's ceiling again."""
    app = make_portal(LOGIN_LIMIT_PER_ACCOUNT="3 per minute")
    gathered = app.test_client()
    assert AuthActions(gathered).login("staff").status_code == 303
    with app.app_context():
        accounts.reset_password(accounts.find("staff"), NEW_PASSWORDS[0])
        db.session.commit()
    for number in range(3):
        refused = AuthActions(app.test_client()).login("staff", password="wrong", address=f"198.51.100.{number}")
        assert refused.status_code == 401
    assert AuthActions(gathered).login("staff", password="wrong", address="192.0.2.4").status_code == 429


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
