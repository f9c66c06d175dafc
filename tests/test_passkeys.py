"""Passkeys in a real browser: Debian's Chromium with a virtual authenticator (the DevTools protocol's WebAuthn
domain), against the portal served on a real port at http://localhost:PORT, its PETPORTAL_PUBLIC_URL."""

import json
import re

import pytest

from petportal.data.models import AuditEntry, LoginSession, Passkey, User
from petportal.extensions import db

from support.browsers import desktop_page, log_in
from support.servers import listening, serve

pytestmark = pytest.mark.slow


@pytest.fixture
def passkey_portal(make_portal):
    """A portal whose admins must use a second factor, served where its public address says."""
    with listening() as sock:
        port = sock.getsockname()[1]
        app = make_portal(PUBLIC_URL=f"http://localhost:{port}", REQUIRE_ADMIN_MFA=True)
        with serve(app, sock=sock):
            yield app, f"http://localhost:{port}"


@pytest.fixture
def page(browser):
    """A page whose browser has a platform authenticator that holds passkeys and verifies its user."""
    with desktop_page(browser) as page:
        devtools = page.context.new_cdp_session(page)
        devtools.send("WebAuthn.enable", {"enableUI": False})
        authenticator = {
            "protocol": "ctap2",
            "transport": "internal",
            "hasResidentKey": True,
            "hasUserVerification": True,
            "isUserVerified": True,
            "automaticPresenceSimulation": True,
        }
        devtools.send("WebAuthn.addVirtualAuthenticator", {"options": authenticator})
        yield page


def log_out(page, origin):
    page.goto(f"{origin}/animals")
    page.click("text=Log out")
    page.wait_for_selector("text=Logged out.")


def add_passkey(page, origin, name):
    page.goto(f"{origin}/account/passkeys")
    page.fill("#passkey-name", name)
    page.click("#passkey-add")
    page.wait_for_selector(f"text=Your passkey “{name}” is added.")


def staff_with_a_passkey(page, origin, name):
    """Staff logs in with the password, adds a passkey called `name`, and logs out."""
    log_in(page, origin, "staff")
    add_passkey(page, origin, name)
    log_out(page, origin)


def sign_in_with_passkey(page, origin):
    page.goto(f"{origin}/login")
    page.click("#passkey-login")


def assert_passkey_refused(page, origin, words):
    """Signing in with the passkey fails with `words` under the button, and nobody is logged in."""
    sign_in_with_passkey(page, origin)
    page.wait_for_selector(f"#passkey-login-status:has-text('{words}')")
    assert page.locator("text=Log out").count() == 0


def audited(app, action):
    with app.app_context():
        return [entry.actor for entry in db.session.scalars(db.select(AuditEntry).filter_by(action=action))]


def test_register_then_sign_in_with_the_passkey_alone(passkey_portal, page):
    app, origin = passkey_portal
    log_in(page, origin, "staff")
    page.wait_for_selector("text=Logged in as staff.")
    add_passkey(page, origin, "work laptop")
    assert "work laptop" in page.locator("table").inner_text()
    log_out(page, origin)

    sign_in_with_passkey(page, origin)
    page.wait_for_selector("text=Logged in as staff.")
    page.goto(f"{origin}/animals/new")
    assert page.locator("h1").inner_text() == "Add an animal"
    with app.app_context():
        passkey = db.session.scalar(db.select(Passkey))
        assert passkey.last_used_at is not None
        assert passkey.sign_count > 0
    assert audited(app, "passkey_added") == ["staff"]
    assert audited(app, "passkey_used") == ["staff"]


def test_a_passkey_is_an_admins_second_factor_alone_and_after_the_password(passkey_portal, page):
    app, origin = passkey_portal
    log_in(page, origin, "admin")
    page.goto(f"{origin}/admin/users")
    page.wait_for_url(re.compile(r"/account/mfa$"))  # no second factor yet: set one up first
    add_passkey(page, origin, "security key")
    log_out(page, origin)

    # The password, then the passkey as the second step.
    log_in(page, origin, "admin")
    page.wait_for_url(re.compile(r"/login/mfa$"))
    page.click("#passkey-second")
    page.wait_for_selector("text=Logged in as admin.")
    page.goto(f"{origin}/admin/users")
    assert page.locator("h1").inner_text() == "Accounts"
    log_out(page, origin)

    # The passkey alone.
    sign_in_with_passkey(page, origin)
    page.wait_for_selector("text=Logged in as admin.")
    page.goto(f"{origin}/admin/users")
    assert page.locator("h1").inner_text() == "Accounts"
    with app.app_context():
        logins = db.session.scalars(db.select(LoginSession).order_by(LoginSession.started_at)).all()
        assert [login.second_factor for login in logins[-2:]] == ["passkey", "passkey"]

    # Its last second factor stays while admins must have one.
    page.goto(f"{origin}/account/passkeys")
    page.click("text=Remove security key")
    page.wait_for_selector("text=This is your only second factor")
    assert "security key" in page.locator("table").inner_text()


def test_a_removed_passkey_no_longer_signs_in(passkey_portal, page):
    app, origin = passkey_portal
    log_in(page, origin, "staff")
    add_passkey(page, origin, "old phone")
    page.click("text=Remove old phone")
    page.wait_for_selector("text=Your passkey “old phone” is removed.")
    assert audited(app, "passkey_removed") == ["staff"]
    log_out(page, origin)

    assert_passkey_refused(page, origin, "not accepted")


def test_a_disabled_accounts_passkey_is_refused(passkey_portal, page):
    app, origin = passkey_portal
    staff_with_a_passkey(page, origin, "desk")
    with app.app_context():
        db.session.scalar(db.select(User).filter_by(username="staff")).enabled = False
        db.session.commit()

    assert_passkey_refused(page, origin, "disabled")


def test_a_replayed_assertion_is_refused(passkey_portal, page):
    _app, origin = passkey_portal
    staff_with_a_passkey(page, origin, "tablet")

    sent = []
    page.on("request", lambda request: sent.append(request) if request.url.endswith("/login/passkey") else None)
    sign_in_with_passkey(page, origin)
    page.wait_for_selector("text=Logged in as staff.")
    log_out(page, origin)

    # The same signed answer again, from the same browser, with a valid CSRF token: its challenge is spent.
    page.goto(f"{origin}/login")
    csrf = page.get_attribute("#passkey-login", "data-csrf")
    replay = page.request.post(
        f"{origin}/login/passkey",
        data=sent[-1].post_data,
        headers={"Content-Type": "application/json", "X-CSRFToken": csrf},
    )
    assert replay.status == 401
    assert "not accepted" in json.loads(replay.text())["error"] or "too long" in json.loads(replay.text())["error"]
    page.goto(f"{origin}/animals")
    assert page.locator("text=Log out").count() == 0


def test_a_passkey_name_too_long_is_refused_with_a_message_not_cut(passkey_portal, page):
    """The name field has no maxlength: 81 characters typed are said to be too many, and no passkey is added."""
    app, origin = passkey_portal
    log_in(page, origin, "staff")
    page.wait_for_selector("text=Logged in as staff.")
    page.goto(f"{origin}/account/passkeys")
    page.locator("#passkey-name").press_sequentially("k" * 81)
    assert len(page.input_value("#passkey-name")) == 81
    page.click("#passkey-add")
    page.wait_for_selector("#passkey-add-status:has-text('Name the passkey in at most 80 characters.')")
    with app.app_context():
        assert db.session.scalar(db.select(db.func.count()).select_from(Passkey)) == 0
    add_passkey(page, origin, "k" * 80)  # the longest name, kept whole
    with app.app_context():
        assert db.session.scalar(db.select(Passkey.name)) == "k" * 80
