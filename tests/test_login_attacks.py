"""Logins under attack (issue 40): the same work for every kind of name, an audit log a flood cannot fill, and the
audit log's own names kept from accounts (the limits, for the whole instance too: test_login_limits.py)."""

import random
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from petportal.config import settings
from petportal.data.models import AuditEntry, User
from petportal.extensions import db

from support.helpers import (
    NEW_PASSWORDS,
    PASSWORDS,
    AuthActions,
    portal_config,
    post_form,
    wrong_password,
)
from support.portal import csrf_token

# Attempts enough for the timing test: no limit gets in its way.
NO_LIMITS = {name: "1000 per minute" for name in ("ACCOUNT_ADDRESS", "ADDRESS", "ACCOUNT")}


def no_limits():
    return {f"LOGIN_LIMIT_PER_{name}": value for name, value in NO_LIMITS.items()}


def audit_rows(app, *actions):
    """(action, actor, remote address, count) of every entry of `actions`, oldest first."""
    with app.app_context():
        query = db.select(AuditEntry.action, AuditEntry.actor, AuditEntry.remote_addr, AuditEntry.count)
        query = query.where(AuditEntry.action.in_(actions)).order_by(AuditEntry.id)
        return [tuple(row) for row in db.session.execute(query)]


# --- the same work for every kind of name --------------------------------------------------------------------


@pytest.mark.slow
def test_a_wrong_password_takes_as_long_for_an_unknown_a_password_and_a_single_sign_on_name(make_portal):
    """The real hash cost (production's scrypt, for the staff account's hash and the stand-in alike): the medians
    of 20 attempts each, taken in turns so the machine's load falls on all three alike, are within 20% of each
    other. Another test worker on the same two cores can skew one round of medians: up to three rounds are taken,
    and a name whose work differs (the old leak: 10 times faster) is outside the bound in every one."""
    app = make_portal(PASSWORD_HASH=production_hash(), **no_limits())
    with app.app_context():
        db.session.add(User(username="sam", role="staff", sso_issuer="https://sign-in.example", sso_subject="sam-1"))
        db.session.scalar(db.select(User).filter_by(username="staff")).set_password(PASSWORDS["staff"])
        db.session.commit()
    client = app.test_client()
    token = csrf_token(client.get("/login").text)
    names = {"unknown": "nobody-here", "password": "staff", "single sign-on": "sam"}
    wrong_password(client, "nobody-here", token=token)  # the stand-in hash is made once, by a process's first need
    rounds = []
    for _ in range(3):
        took = {kind: [] for kind in names}
        for _ in range(20):
            for kind, name in random.sample(list(names.items()), len(names)):  # no kind always first after a pause
                started = time.perf_counter()
                assert wrong_password(client, name, token=token) == 401
                took[kind].append(time.perf_counter() - started)
        rounds.append({kind: statistics.median(times) for kind, times in took.items()})
        if max(rounds[-1].values()) <= 1.2 * min(rounds[-1].values()):
            break
    else:
        raise AssertionError(f"the medians differ by more than 20% in every round: {rounds}")


def production_hash():
    """The password hash a portal uses unless told otherwise (the tests' portals use a cheap one)."""
    from petportal import config

    return config.defaults("instance")["PASSWORD_HASH"]


def test_production_hashes_with_scrypt_and_checks_an_account_without_a_password_against_one(make_portal, tmp_path):
    """The one test of the hash production uses: every other portal of the tests is given a cheap one."""
    from petportal.data import passwords

    config = portal_config(tmp_path, "http://127.0.0.1:9/v1", None)
    del config["PASSWORD_HASH"]
    app = make_portal.build(config)
    with app.app_context():
        stored = passwords.hashed("a password")
        assert stored.startswith("scrypt:") and "a password" not in stored and passwords.matches(stored, "a password")
        assert not passwords.matches(stored, "another password")
        assert passwords.matches(None, "anything") is False
        stand_in = passwords._stand_in(settings(app).password_hash)
    assert stand_in.split("$")[0] == stored.split("$")[0], "made as stored hashes are"


# --- an audit log a flood cannot fill ------------------------------------------------------------------------


@pytest.mark.slow
def test_four_hundred_refused_logins_add_a_handful_of_audit_entries(make_portal, database_url, clock):
    """Sent 4 at a time, as a flood comes: two requests may open a window's entry at the same moment, so a few
    entries, and every attempt counted on one of them. In one minute of the portal's clock, however long a busy
    machine takes to send them."""
    app = make_portal(SQLALCHEMY_DATABASE_URI=database_url, CLOCK=clock)
    name = "x" * 80

    def hundred_attempts(_browser):
        client = app.test_client()
        token = csrf_token(client.get("/login").text)
        return [wrong_password(client, name, address="203.0.113.5", token=token) for _ in range(100)]

    with ThreadPoolExecutor(4) as pool:
        statuses = [status for browser in pool.map(hundred_attempts, range(4)) for status in browser]
    assert statuses.count(401) == 5 and statuses.count(429) == 395
    rows = audit_rows(app, "login_failed", "login_limited")
    assert len(rows) <= 4, rows
    assert {(action, actor, address) for action, actor, address, _ in rows} == {
        ("login_failed", name, "203.0.113.5"),
        ("login_limited", name, "203.0.113.5"),
    }
    counts = {action: sum(count for entry, _, _, count in rows if entry == action) for action, _, _, _ in rows}
    assert counts == {"login_failed": 5, "login_limited": 395}
    admin = app.test_client()
    AuthActions(admin).login("admin")
    page = admin.get("/admin/audit").text
    assert " attempts</td>" in page
    assert " attempts" in admin.get("/admin/audit.csv").text


def test_a_new_name_for_every_attempt_adds_no_entry_once_the_address_is_refused(make_portal):
    app = make_portal(LOGIN_LIMIT_PER_ADDRESS="5 per minute")
    client = app.test_client()
    token = csrf_token(client.get("/login").text)
    statuses = [wrong_password(client, f"guess-{number}", token=token) for number in range(100)]
    assert statuses == [401] * 5 + [429] * 95
    failed = audit_rows(app, "login_failed")
    limited = audit_rows(app, "login_limited")
    assert [actor for _, actor, _, _ in failed] == [f"guess-{number}" for number in range(5)]
    assert limited == [("login_limited", "anonymous", "127.0.0.1", 95)]


def test_a_name_from_outside_is_kept_as_it_reads(make_portal):
    app = make_portal()
    client = app.test_client()
    # A right-to-left override and a line break would make the entry read as something else.
    assert wrong_password(client, "kim\u202e\nadmin logged in") == 401
    [(_, actor, _, _)] = audit_rows(app, "login_failed")
    assert actor == "kim\ufffd\ufffdadmin logged in"


# --- the audit log's own names -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["anonymous", "Anonymous", "system", "demo"])
def test_the_admins_form_refuses_a_name_the_audit_log_uses(portal_app, client, name):
    AuthActions(client).login("admin")
    data = {"username": name, "role": "staff", "environments": "staging", "password": NEW_PASSWORDS[0]}
    answer = post_form(client, "/admin/users/new", "/admin/users/new", **data)
    assert answer.status_code == 400
    assert "is a name the audit log uses for itself" in answer.text
    with portal_app.app_context():
        assert db.session.scalar(db.select(User).where(db.func.lower(User.username) == name.lower())) is None


@pytest.mark.parametrize("name", ["anonymous", "SYSTEM"])
def test_flask_user_create_refuses_a_name_the_audit_log_uses_before_asking_for_a_password(portal_app, runner, name):
    result = runner.invoke(args=["user", "create", name, "--role", "staff"])
    assert result.exit_code != 0
    assert "is a name the audit log uses for itself" in result.output
    assert "Password" not in result.output
    with portal_app.app_context():
        assert db.session.scalar(db.select(User).where(db.func.lower(User.username) == name.lower())) is None
