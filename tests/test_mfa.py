"""The second factor: enrolment with a real TOTP computed from the page's secret, logging in with a code
or a recovery code, each usable once, guessing limited, and admins required to have one."""

import pytest

from petportal.auth import mfa
from petportal.data.models import AuditEntry, User
from petportal.extensions import db

from support.helpers import NEW_PASSWORDS, PASSWORDS, SECRET_PATTERN, AuthActions, at_once, enrol_mfa, post_form, totp
from support.portal import csrf_token


@pytest.fixture
def app(make_portal, clock):
    return make_portal(CLOCK=clock, REQUIRE_ADMIN_MFA=True)


@pytest.fixture
def enrolled(app, clock):
    """The staff account with a second factor: its secret and recovery codes."""
    client = app.test_client()
    AuthActions(client).login("staff")
    secret, codes = enrol_mfa(client, clock)
    clock.advance(seconds=30)  # the code used to enrol is spent; the next step's code is not
    return secret, codes


def actions(app, *names):
    with app.app_context():
        query = db.select(AuditEntry.action).where(AuditEntry.action.in_(names)).order_by(AuditEntry.id)
        return db.session.scalars(query).all()


def logged_in(client):
    return client.get("/animals/new").status_code == 200


# --- enrolment ------------------------------------------------------------------------------------


def test_enrolment_shows_a_qr_code_and_the_secret_and_needs_a_correct_code(app, clock):
    client = app.test_client()
    AuthActions(client).login("staff")
    page = client.get("/account/mfa")
    assert page.status_code == 200
    assert '<svg width="' in page.text and "QR code for your authenticator app" in page.text
    secret = SECRET_PATTERN.search(page.text).group(1)
    assert SECRET_PATTERN.search(client.get("/account/mfa").text).group(1) == secret, "a reload changed the secret"
    wrong = post_form(client, "/account/mfa", "/account/mfa", code=totp(secret, clock, steps=3))
    assert wrong.status_code == 400
    assert "That code does not match" in wrong.text
    with app.app_context():
        assert db.session.scalar(db.select(User).filter_by(username="staff")).mfa_secret is None
    confirmed = post_form(client, "/account/mfa", "/account/mfa", code=totp(secret, clock))
    assert confirmed.headers["Location"] == "/account/mfa"
    shown = client.get("/account/mfa").text
    assert shown.count('<code class="recovery-code">') == 10
    again = client.get("/account/mfa").text
    assert 'class="recovery-code"' not in again, "the recovery codes were shown twice"
    assert "Second factor: on" in again and "<strong>10</strong> unused recovery codes" in again
    assert actions(app, "mfa_enrolled") == ["mfa_enrolled"]


def test_the_secret_is_stored_encrypted_and_the_recovery_codes_hashed(app, enrolled):
    secret, codes = enrolled
    with app.app_context():
        user = db.session.scalar(db.select(User).filter_by(username="staff"))
        stored = user.mfa_secret + " ".join(row.code_hash for row in db.session.scalars(db.select(mfa.RecoveryCode)))
        assert secret not in stored
        assert not any(code.replace("-", "") in stored for code in codes)
        assert mfa.decrypt(user.mfa_secret) == secret


# --- logging in -----------------------------------------------------------------------------------


def test_the_password_alone_does_not_log_in_an_account_with_a_second_factor(app, clock, enrolled):
    secret, _codes = enrolled
    client = app.test_client()
    first = AuthActions(client).login("staff")
    assert first.headers["Location"] == "/login/mfa"
    assert not logged_in(client)
    assert client.get("/login/mfa").status_code == 200
    response = post_form(client, "/login/mfa", "/login/mfa", code=totp(secret, clock))
    assert response.headers["Location"] == "/animals"
    assert logged_in(client)
    assert actions(app, "mfa_succeeded", "mfa_failed") == ["mfa_succeeded"]


def test_the_login_goes_on_to_next_after_the_code(app, clock, enrolled):
    secret, _codes = enrolled
    client = app.test_client()
    AuthActions(client).login("staff", next_path="/animals/new")
    response = post_form(client, "/login/mfa", "/login/mfa", code=totp(secret, clock))
    assert response.headers["Location"] == "/animals/new"


def test_a_code_is_accepted_once_even_within_its_step(app, clock, enrolled):
    secret, _codes = enrolled
    code = totp(secret, clock)
    first = app.test_client()
    assert AuthActions(first).login_with_code(code).status_code == 303
    replay = app.test_client()
    refused = AuthActions(replay).login_with_code(code)
    assert refused.status_code == 401
    assert "wrong or has been used already" in refused.text
    assert not logged_in(replay)
    clock.advance(seconds=30)
    assert post_form(replay, "/login/mfa", "/login/mfa", code=totp(secret, clock)).status_code == 303


def test_codes_one_step_either_side_are_accepted_and_two_steps_away_refused(app, clock, enrolled):
    secret, _codes = enrolled
    clock.advance(minutes=5)
    client = app.test_client()
    assert AuthActions(client).login_with_code(totp(secret, clock, steps=-2)).status_code == 401
    assert post_form(client, "/login/mfa", "/login/mfa", code=totp(secret, clock, steps=2)).status_code == 401
    assert post_form(client, "/login/mfa", "/login/mfa", code=totp(secret, clock, steps=-1)).status_code == 303
    late = app.test_client()
    assert AuthActions(late).login_with_code(totp(secret, clock, steps=1)).status_code == 303


def test_the_same_code_sent_twice_at_once_logs_in_once(app, clock, enrolled):
    secret, _codes = enrolled
    code = totp(secret, clock)
    calls = []
    for _ in range(4):
        client = app.test_client()
        AuthActions(client).login("staff")
        calls.append((client, csrf_token(client.get("/login/mfa").text)))

    def send(client, token, start):
        start.wait()
        return client.post("/login/mfa", data={"csrf_token": token, "code": code}).status_code

    statuses = at_once(calls, send)
    assert sorted(statuses) == [303, 401, 401, 401]


def test_recovery_codes_log_in_once_each(app, enrolled):
    _secret, codes = enrolled
    client = app.test_client()
    used = AuthActions(client).login_with_code(codes[0].upper().replace("-", " "))
    assert used.headers["Location"] == "/animals"
    assert "9 are left" in client.get("/animals").text
    AuthActions(client).logout()
    assert AuthActions(client).login_with_code(codes[0]).status_code == 401
    assert post_form(client, "/login/mfa", "/login/mfa", code=codes[1]).status_code == 303
    assert actions(app, "recovery_code_used", "mfa_failed") == [
        "recovery_code_used",
        "mfa_failed",
        "recovery_code_used",
    ]


def test_guessing_codes_is_limited_per_account_from_any_address(app, clock, enrolled):
    secret, _codes = enrolled
    statuses = []
    for attempt in range(6):
        client = app.test_client()
        statuses.append(AuthActions(client).login_with_code("000000", address=f"198.51.100.{attempt}").status_code)
    assert statuses == [401] * 5 + [429]
    right = AuthActions(app.test_client()).login_with_code(totp(secret, clock), address="198.51.100.99")
    assert right.status_code == 429, "a correct code went through while the account's limit was used up"
    # Counted, one entry each for the account and the address (the codes all came from 127.0.0.1), not one each.
    with app.app_context():
        query = db.select(AuditEntry.action, AuditEntry.count).where(
            AuditEntry.action.in_(["mfa_failed", "mfa_limited"])
        )
        assert db.session.execute(query.order_by(AuditEntry.id)).all() == [("mfa_failed", 5), ("mfa_limited", 2)]


def test_the_code_step_expires_after_5_minutes(app, clock, enrolled):
    secret, _codes = enrolled
    client = app.test_client()
    AuthActions(client).login("staff")
    token = csrf_token(client.get("/login/mfa").text)
    clock.advance(minutes=6)
    late = client.post("/login/mfa", data={"csrf_token": token, "code": totp(secret, clock)})
    assert late.headers["Location"] == "/login"
    assert not logged_in(client)


# Arabic-Indic and fullwidth digits match Python's \d; written as escapes so the file shows what they are.
@pytest.mark.parametrize(
    "code",
    [
        "\u0668\u0665\u0669\u0662\u0660\u0664",
        "\uff11\uff12\uff13\uff14\uff15\uff16",
        "12345\uff16",
        "x" * 32,
        "' OR 1=1 --",
    ],
)
def test_a_code_that_is_not_six_ascii_digits_is_refused_not_a_server_error(app, enrolled, code):
    client = app.test_client()
    assert AuthActions(client).login_with_code(code).status_code == 401
    assert not logged_in(client)


@pytest.mark.parametrize("change", ["password", "sessions/end"])
def test_a_login_waiting_for_its_code_cannot_finish_after_its_logins_were_ended(app, clock, enrolled, change):
    secret, _codes = enrolled
    waiting = app.test_client()
    AuthActions(waiting).login("staff")
    token = csrf_token(waiting.get("/login/mfa").text)
    clock.advance(seconds=1)
    admin = app.test_client()
    AuthActions(admin).login("admin")
    enrol_mfa(admin, clock)
    fields = {"password": NEW_PASSWORDS[0]} if change == "password" else {}
    assert post_form(admin, "/admin/users/staff", f"/admin/users/staff/{change}", **fields).status_code == 303
    response = waiting.post("/login/mfa", data={"csrf_token": token, "code": totp(secret, clock)})
    assert response.headers["Location"] == "/login"
    assert not logged_in(waiting)


def test_your_own_password_change_cancels_a_login_waiting_for_its_code(app, clock, enrolled):
    secret, _codes = enrolled
    owner = app.test_client()
    AuthActions(owner).login_with_code(totp(secret, clock))
    clock.advance(seconds=30)
    thief = app.test_client()
    AuthActions(thief).login("staff")
    token = csrf_token(thief.get("/login/mfa").text)
    clock.advance(seconds=1)
    post_form(
        owner,
        "/account/password",
        "/account/password",
        current_password=PASSWORDS["staff"],
        new_password=NEW_PASSWORDS[1],
        confirm=NEW_PASSWORDS[1],
    )
    clock.advance(seconds=30)
    refused = thief.post("/login/mfa", data={"csrf_token": token, "code": totp(secret, clock)})
    assert refused.headers["Location"] == "/login"
    assert not logged_in(thief)


def test_a_login_that_is_not_fresh_must_log_in_again_to_enrol(app, clock):
    client = app.test_client()
    AuthActions(client).login("staff", remember=True)
    clock.advance(minutes=45)  # restored from the remember-me cookie: someone holding it is not the owner for sure
    assert client.get("/account/mfa").headers["Location"] == "/login?next=/account/mfa?new%3D1"
    with app.app_context():
        assert db.session.scalar(db.select(User).filter_by(username="staff")).mfa_secret is None


def test_the_code_page_without_a_password_first_sends_to_log_in(app):
    assert app.test_client().get("/login/mfa").headers["Location"] == "/login"


def test_an_unreadable_secret_refuses_codes_but_recovery_codes_still_log_in(app, clock, enrolled, caplog):
    secret, codes = enrolled
    with app.app_context():
        user = db.session.scalar(db.select(User).filter_by(username="staff"))
        user.mfa_secret = user.mfa_secret[:-4] + "AAAA"
        db.session.commit()
    client = app.test_client()
    assert AuthActions(client).login_with_code(totp(secret, clock)).status_code == 401
    assert "cannot be decrypted: was PETPORTAL_SECRET_KEY changed?" in caplog.text
    assert post_form(client, "/login/mfa", "/login/mfa", code=codes[0]).status_code == 303


# --- admins must have one -------------------------------------------------------------------------


def test_an_admin_without_a_second_factor_is_sent_to_enrol_before_any_admin_page(app, clock):
    client = app.test_client()
    AuthActions(client).login("admin")
    for path in ("/admin/environment", "/admin/users", "/admin/audit", "/admin/status"):
        assert client.get(path).headers["Location"] == "/account/mfa", path
    assert client.get("/animals/new").status_code == 200, "staff pages need no second factor"
    secret, _codes = enrol_mfa(client, clock)
    assert client.get("/admin/environment").status_code == 200
    assert secret


def test_without_the_requirement_admins_reach_admin_pages_with_a_password(make_portal):
    client = make_portal(REQUIRE_ADMIN_MFA=False).test_client()
    AuthActions(client).login("admin")
    assert client.get("/admin/environment").status_code == 200


def test_an_admin_resets_a_lost_second_factor_and_the_password_alone_logs_in_again(app, clock, enrolled):
    admin = app.test_client()
    AuthActions(admin).login("admin")
    enrol_mfa(admin, clock)
    response = post_form(admin, "/admin/users/staff", "/admin/users/staff/mfa/reset")
    assert response.headers["Location"] == "/admin/users/staff"
    staff = app.test_client()
    assert AuthActions(staff).login("staff").headers["Location"] == "/animals"
    with app.app_context():
        assert db.session.scalar(db.select(db.func.count()).select_from(mfa.RecoveryCode)) == 10, "admin's codes only"
        entry = db.session.scalars(db.select(AuditEntry).filter_by(action="mfa_reset")).one()
        assert (entry.actor, entry.target) == ("admin", "staff")


def test_the_command_line_resets_the_last_admins_second_factor(app, clock):
    client = app.test_client()
    AuthActions(client).login("admin")
    enrol_mfa(client, clock)
    result = app.test_cli_runner().invoke(args=["user", "reset-mfa", "admin"])
    assert result.exit_code == 0, result.output
    assert "Removed 'admin'" in result.output
    assert AuthActions(app.test_client()).login("admin").headers["Location"] == "/animals"
    again = app.test_cli_runner().invoke(args=["user", "reset-mfa", "admin"])
    assert again.exit_code == 1 and "has no second factor to reset" in again.output
    unknown = app.test_cli_runner().invoke(args=["user", "reset-mfa", "nobody"])
    assert unknown.exit_code == 1 and "There is no account called 'nobody'" in unknown.output


def test_a_new_device_needs_a_fresh_login_and_retires_the_old_secret_and_codes(app, clock, enrolled):
    old_secret, old_codes = enrolled
    client = app.test_client()
    AuthActions(client).login_with_code(totp(old_secret, clock), remember=True)
    clock.advance(minutes=45)  # restored from the remember-me cookie: not a fresh login
    assert client.get("/account/mfa?new=1").headers["Location"] == "/login?next=/account/mfa?new%3D1"
    clock.advance(seconds=30)
    AuthActions(client).login_with_code(totp(old_secret, clock))
    new_secret, _new_codes = enrol_mfa(client, clock, "/account/mfa?new=1")
    assert new_secret != old_secret
    clock.advance(seconds=30)
    assert AuthActions(app.test_client()).login_with_code(totp(old_secret, clock)).status_code == 401
    assert AuthActions(app.test_client()).login_with_code(old_codes[5]).status_code == 401
    assert AuthActions(app.test_client()).login_with_code(totp(new_secret, clock)).status_code == 303


def test_a_disabled_account_cannot_finish_a_login_begun_before(app, clock, enrolled):
    secret, _codes = enrolled
    client = app.test_client()
    AuthActions(client).login("staff")
    token = csrf_token(client.get("/login/mfa").text)
    with app.app_context():
        db.session.scalar(db.select(User).filter_by(username="staff")).enabled = False
        db.session.commit()
    response = client.post("/login/mfa", data={"csrf_token": token, "code": totp(secret, clock)})
    assert response.headers["Location"] == "/login"
    assert not logged_in(client)
