"""Accounts and logins in the request's one unit of work: a request that fails after its change leaves
neither the change nor its audit entry; what must be durable at once (a refused login's audit entry, a
replaced remember token) is."""

import pytest
from sqlalchemy import func, select

from petportal.data.models import AuditEntry, LoginSession, RecoveryCode, User
from petportal.extensions import db

from support.helpers import NEW_PASSWORDS, PASSWORDS, SECRET_PATTERN, AuthActions, totp
from support.portal import csrf_token


def failing_once(app):
    """A switch that makes the app's next request fail after its view has run, before the request's end.

    The hook is registered last, so it runs first of the `after_request` hooks: before the request commits.
    It fails once; the error page then goes through every hook, the commit's included, as in production.
    """
    armed = {"now": False}

    @app.after_request
    def fail_before_the_end(response):
        if armed["now"]:
            armed["now"] = False
            raise RuntimeError("the request fails after the view's change")
        return response

    def arm():
        armed["now"] = True

    return arm


def actions(app, action):
    with app.app_context():
        return db.session.scalars(select(AuditEntry.action).where(AuditEntry.action == action)).all()


def staff_account(app):
    with app.app_context():
        user = db.session.scalar(select(User).filter_by(username="staff"))
        db.session.expunge_all()
        return user


@pytest.mark.parametrize(
    ("change", "fields", "action"),
    [
        ("role", {"role": "admin"}, "role_changed"),
        ("disable", {}, "user_disabled"),
        ("sessions/end", {}, "sessions_ended"),
        ("password", {"password": NEW_PASSWORDS[0]}, "password_reset"),
    ],
)
def test_an_admins_change_in_a_request_that_fails_is_not_kept(make_portal, change, fields, action):
    app = make_portal(PROPAGATE_EXCEPTIONS=False)  # the 500 page, as in production
    fail = failing_once(app)
    staff, admin = app.test_client(), app.test_client()
    AuthActions(staff).login("staff")
    AuthActions(admin).login("admin")
    page = admin.get("/admin/users/staff").text
    fail()
    response = admin.post(f"/admin/users/staff/{change}", data={"csrf_token": csrf_token(page), **fields})
    assert response.status_code == 500
    assert "Something went wrong" in response.text
    assert actions(app, action) == []
    after = staff_account(app)
    assert (after.role, after.enabled, after.must_change_password) == ("staff", True, False)
    assert after.logins_ended_at is None
    assert after.check_password(PASSWORDS["staff"])
    assert staff.get("/animals/new").status_code == 200, "the staff member's session was ended"
    assert admin.get("/admin/users").status_code == 200, "the admin's own login did not survive the failure"


def test_your_password_change_in_a_request_that_fails_is_not_kept(make_portal):
    app = make_portal(PROPAGATE_EXCEPTIONS=False)
    fail = failing_once(app)
    here, there = app.test_client(), app.test_client()
    AuthActions(here).login("staff")
    AuthActions(there).login("staff")
    page = here.get("/account/password").text
    fail()
    fields = {"current_password": PASSWORDS["staff"], "new_password": NEW_PASSWORDS[0], "confirm": NEW_PASSWORDS[0]}
    response = here.post("/account/password", data={"csrf_token": csrf_token(page), **fields})
    assert response.status_code == 500
    assert staff_account(app).check_password(PASSWORDS["staff"])
    assert actions(app, "password_changed") == []
    assert there.get("/animals/new").status_code == 200, "the other session was ended"


def test_a_login_in_a_request_that_fails_leaves_no_login_behind(make_portal):
    app = make_portal(PROPAGATE_EXCEPTIONS=False)
    fail = failing_once(app)
    browser = app.test_client()
    page = browser.get("/login").text
    fail()
    response = browser.post(
        "/login", data={"username": "staff", "password": PASSWORDS["staff"], "csrf_token": csrf_token(page)}
    )
    assert response.status_code == 500
    assert actions(app, "login") == []
    with app.app_context():
        assert db.session.scalar(select(func.count()).select_from(LoginSession)) == 0
        assert db.session.scalar(select(User.last_login_at).filter_by(username="staff")) is None
    assert browser.get("/animals/new").status_code == 302, "the session names a login that was never written"


def test_a_login_refused_by_the_limit_is_audited(portal_app, client):
    auth = AuthActions(client)
    answers = [auth.login("staff", password="not-the-password").status_code for _ in range(6)]
    assert answers == [401] * 5 + [429]
    assert actions(portal_app, "login_limited") == ["login_limited"]


def test_a_remember_token_replaced_in_a_request_that_fails_stays_replaced(make_portal, clock):
    app = make_portal(CLOCK=clock, PROPAGATE_EXCEPTIONS=False)
    fail = failing_once(app)
    browser = app.test_client()
    AuthActions(browser).login("staff", remember=True)
    first = browser.get_cookie("remember").value
    clock.advance(minutes=31)  # the session idles out; the next request restores it from the token
    fail()
    assert browser.get("/animals/new").status_code == 500
    second = browser.get_cookie("remember").value
    assert second != first, "the failing request did not send the replaced token"
    replay = app.test_client()
    replay.set_cookie("remember", first)
    assert replay.get("/animals/new").status_code == 302, "the used token still logs in"
    browser.delete_cookie("session")
    assert browser.get("/animals/new").status_code == 200, "the new token was not kept"


def test_a_second_factor_enrolment_in_a_request_that_fails_is_not_kept(make_portal, clock):
    app = make_portal(CLOCK=clock, PROPAGATE_EXCEPTIONS=False)
    fail = failing_once(app)
    browser = app.test_client()
    AuthActions(browser).login("staff")
    page = browser.get("/account/mfa").text
    fail()
    code = totp(SECRET_PATTERN.search(page).group(1), clock)
    response = browser.post("/account/mfa", data={"csrf_token": csrf_token(page), "code": code})
    assert response.status_code == 500
    with app.app_context():
        assert db.session.scalar(select(func.count()).select_from(RecoveryCode)) == 0
    assert staff_account(app).mfa_secret is None
    assert actions(app, "mfa_enrolled") == []
