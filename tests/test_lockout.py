"""Lock-out without locking out: a disabled account answers every password alike."""

import re

from petportal.data.models import AuditEntry, User
from petportal.extensions import db

from helpers import AuthActions


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
