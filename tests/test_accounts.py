"""Accounts: admins create and manage them at /admin/users; everyone changes their own password and
ends their own sessions under /account. Every change reaches the account's next request."""

import re

import pytest

from petportal.auth import accounts
from petportal.data.models import AuditEntry, User
from petportal.extensions import db

from support.helpers import NEW_PASSWORDS, PASSWORDS, AuthActions, at_once, post_form
from support.portal import csrf_token

INITIAL, CHOSEN, LATER = NEW_PASSWORDS


def account(app, name):
    with app.app_context():
        user = db.session.scalar(db.select(User).filter_by(username=name))
        db.session.expunge_all()
        return user


def audited(app, action):
    """(actor, target, details) of every audit entry of `action`, oldest first: the details as kept, a code and
    its values (AuditDetail)."""
    with app.app_context():
        entries = db.session.scalars(db.select(AuditEntry).filter_by(action=action).order_by(AuditEntry.id))
        return [(e.actor, e.target, e.details) for e in entries]


def manage(client, name, change, **fields):
    """An admin's change to account `name`, sent from its page as the browser sends it."""
    return post_form(client, f"/admin/users/{name}", f"/admin/users/{name}/{change}", **fields)


def create(client, username, role="staff", password=INITIAL, environments=("production", "staging")):
    fields = {"username": username, "role": role, "password": password, "environments": list(environments)}
    return post_form(client, "/admin/users/new", "/admin/users/new", **fields)


def change_password(client, current, new, confirm=None):
    return post_form(
        client,
        "/account/password",
        "/account/password",
        current_password=current,
        new_password=new,
        confirm=new if confirm is None else confirm,
    )


def logged_out(client):
    """Whether this browser has been logged out: a staff page sends it to log in."""
    return client.get("/animals/new").status_code == 302


@pytest.fixture
def admin(portal_app):
    client = portal_app.test_client()
    AuthActions(client).login("admin")
    return client


# --- the accounts page ----------------------------------------------------------------------------


def test_the_accounts_page_shows_every_account_with_its_role_state_and_sessions(portal_app, admin):
    staff = portal_app.test_client()
    AuthActions(staff).login("staff")
    AuthActions(portal_app.test_client()).login("staff")
    page = admin.get("/admin/users")
    assert page.status_code == 200
    rows = {
        re.search(r'<a href="/admin/users/(\w+)"', row).group(1): row
        for row in re.findall(r"<tr>(.*?)</tr>", page.text, re.S)
        if "/admin/users/" in row
    }
    assert set(rows) == {"admin", "staff"}
    assert 'data-label="Role">staff<' in rows["staff"] and 'data-label="Role">admin<' in rows["admin"]
    assert 'data-label="Enabled">yes<' in rows["staff"]
    assert 'data-label="Second factor">off<' in rows["staff"]
    assert 'data-label="Open sessions">2<' in rows["staff"]
    assert 'data-label="Open sessions">1<' in rows["admin"]
    assert "<time" in rows["staff"], "the last login is missing"


def test_staff_and_customers_cannot_reach_the_accounts_pages(portal_app):
    anonymous = portal_app.test_client()
    assert anonymous.get("/admin/users").headers["Location"] == "/login?next=/admin/users"
    staff = portal_app.test_client()
    AuthActions(staff).login("staff")
    for path in ("/admin/users", "/admin/users/new", "/admin/users/admin"):
        assert staff.get(path).status_code == 403
    assert manage(staff, "admin", "disable").status_code == 403
    assert account(portal_app, "admin").enabled


def test_an_unknown_account_is_404(admin):
    assert admin.get("/admin/users/nobody").status_code == 404
    assert manage(admin, "nobody", "disable").status_code == 404


# --- creating an account --------------------------------------------------------------------------


def test_a_new_account_must_choose_its_own_password_before_any_other_page(portal_app, admin, production_store):
    created = create(admin, "robin")
    assert created.headers["Location"] == "/admin/users/robin"
    assert audited(portal_app, "user_created") == [("admin", "robin", {"code": "created_by_admin", "role": "staff"})]
    robin = portal_app.test_client()
    login = AuthActions(robin).login("robin", INITIAL)
    assert login.status_code == 303
    for path in ("/animals", "/animals/new", "/account/sessions", f"/animals/{production_store.animals()[0]['id']}"):
        assert robin.get(path).headers.get("Location") == "/account/password", path
    page = robin.get("/account/password")
    assert "Choose your own password" in page.text
    assert change_password(robin, INITIAL, CHOSEN).headers["Location"] == "/animals"
    assert robin.get("/animals/new").status_code == 200
    assert not account(portal_app, "robin").must_change_password
    assert audited(portal_app, "password_changed")[0][:2] == ("robin", "robin")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"username": "staff"}, "An account called &#39;staff&#39; already exists."),
        ({"username": "Staff"}, "An account called &#39;Staff&#39; already exists."),
        ({"username": "bad name"}, "only letters, digits and . _ @ -"),
        ({"username": "<script>"}, "only letters, digits and . _ @ -"),
        ({"username": ".."}, "starts with a letter or digit"),
        ({"username": "."}, "starts with a letter or digit"),
        ({"username": "x" * 81}, "A user name is 1 to 80 characters long."),
        ({"password": "short"}, "Use at least 12 characters"),
        ({"password": "password1234"}, "one of the most common"),
        ({"role": "owner"}, "Not a valid choice"),
        ({"environments": []}, "Choose production, staging or both."),
        ({"environments": ["moon"]}, "Choose production, staging or both."),
        ({"environments": ["staging", "moon"]}, "Choose production, staging or both."),
    ],
)
def test_a_new_account_with_a_bad_value_is_refused_next_to_the_field(portal_app, admin, fields, message):
    data = {"username": "casey", "role": "staff", "password": INITIAL, **fields}
    response = create(admin, **data)
    assert response.status_code == 400
    assert message in response.text
    with portal_app.app_context():
        assert db.session.scalar(db.select(db.func.count()).select_from(User)) == 2


def test_a_new_account_given_one_environment_works_on_that_one_alone(portal_app, admin):
    page = admin.get("/admin/users/new").text
    assert len(re.findall(r'type="checkbox" name="environments"[^>]* checked>', page)) == 2  # both, unless unticked
    assert create(admin, "robin", environments=["staging"]).status_code == 303
    assert account(portal_app, "robin").environments == {"staging"}
    robin = portal_app.test_client()
    AuthActions(robin).login("robin", INITIAL)
    assert change_password(robin, INITIAL, CHOSEN).status_code == 303
    listed = robin.get("/animals").text
    assert "Staging Sam" in listed and "Rex" not in listed


# --- your password and your sessions --------------------------------------------------------------


def test_changing_your_password_ends_your_other_sessions_and_keeps_this_one(portal_app):
    here, there = portal_app.test_client(), portal_app.test_client()
    AuthActions(here).login("staff")
    AuthActions(there).login("staff", remember=True)
    response = change_password(here, PASSWORDS["staff"], CHOSEN)
    assert response.status_code == 303
    assert not logged_out(here)
    assert logged_out(there)
    there.delete_cookie("session")
    assert logged_out(there), "the remember-me cookie of the other session still logs in"
    assert AuthActions(portal_app.test_client()).login("staff").status_code == 401
    assert AuthActions(portal_app.test_client()).login("staff", CHOSEN).status_code == 303


@pytest.mark.parametrize(
    ("current", "new", "confirm", "message"),
    [
        ("wrong password", CHOSEN, CHOSEN, "This is not your current password."),
        (None, CHOSEN, LATER, "The two new passwords differ"),
        (None, "short", "short", "Use at least 12 characters"),
        (None, "qwertyuiopasdf", "qwertyuiopasdf", "easy to guess"),
    ],
)
def test_a_bad_password_change_is_refused_and_changes_nothing(portal_app, current, new, confirm, message):
    client = portal_app.test_client()
    AuthActions(client).login("staff")
    response = change_password(client, current or PASSWORDS["staff"], new, confirm)
    assert response.status_code == 400
    assert message in response.text
    assert account(portal_app, "staff").check_password(PASSWORDS["staff"])


def test_a_long_password_from_a_password_manager_is_accepted(portal_app):
    client = portal_app.test_client()
    AuthActions(client).login("staff")
    long_password = ((CHOSEN + " ") * 5)[:127] + "!"  # 128 characters: the policy's maximum
    assert change_password(client, PASSWORDS["staff"], long_password).status_code == 303
    assert AuthActions(portal_app.test_client()).login("staff", long_password).status_code == 303


def test_your_new_password_must_differ_from_the_current_one(portal_app):
    client = portal_app.test_client()
    AuthActions(client).login("admin")
    post_form(client, "/account/password", "/account/password")  # nothing sent: the form asks again
    change_password(client, PASSWORDS["admin"], CHOSEN)
    response = change_password(client, CHOSEN, CHOSEN)
    assert response.status_code == 400
    assert "different from the current one" in response.text


def test_your_sessions_page_lists_each_browser_and_ends_all_but_this_one(portal_app):
    here, phone = portal_app.test_client(), portal_app.test_client()
    AuthActions(here).login("staff")
    phone.environ_base["HTTP_USER_AGENT"] = (
        "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
        "Version/17.0 Mobile/15E148 Safari/604.1"
    )
    AuthActions(phone).login("staff", address="203.0.113.9")
    page = here.get("/account/sessions").text
    assert "Mobile Safari on iOS" in page and "203.0.113.9" in page
    assert page.count("this one") == 1
    response = post_form(here, "/account/sessions", "/account/sessions/end-others")
    assert response.headers["Location"] == "/account/sessions"
    assert logged_out(phone) and not logged_out(here)
    assert "This is your only session." in here.get("/account/sessions").text
    assert audited(portal_app, "other_sessions_ended") == [("staff", "staff", None)]


# --- an admin's changes ---------------------------------------------------------------------------


def test_disabling_logs_the_account_out_and_keeps_it_out_until_enabled(portal_app, admin):
    staff = portal_app.test_client()
    AuthActions(staff).login("staff", remember=True)
    assert manage(admin, "staff", "disable").headers["Location"] == "/admin/users/staff"
    assert logged_out(staff)
    staff.delete_cookie("session")
    assert logged_out(staff), "the remember-me cookie still logs a disabled account in"
    refused = AuthActions(portal_app.test_client()).login("staff")
    assert refused.status_code == 401, "answered as a wrong password is (test_login_limits.py)"
    assert "disabled" in admin.get("/admin/users").text
    manage(admin, "staff", "enable")
    assert AuthActions(portal_app.test_client()).login("staff").status_code == 303
    assert audited(portal_app, "user_disabled") == [("admin", "staff", {"code": "every_session_ended"})]
    assert audited(portal_app, "user_enabled") == [("admin", "staff", None)]


def test_ending_an_accounts_sessions_logs_every_browser_out_on_its_next_request(portal_app, admin):
    browsers = [portal_app.test_client() for _ in range(3)]
    for number, browser in enumerate(browsers):
        AuthActions(browser).login("staff", remember=number == 0)
    response = manage(admin, "staff", "sessions/end")
    assert response.status_code == 303
    assert "Every session of staff has ended (3 were open)." in admin.get("/admin/users/staff").text
    assert all(logged_out(browser) for browser in browsers)
    browsers[0].delete_cookie("session")
    assert logged_out(browsers[0])
    assert audited(portal_app, "sessions_ended") == [("admin", "staff", {"code": "sessions_ended", "count": 3})]


def test_a_role_change_applies_from_the_accounts_next_request(portal_app, admin):
    staff = portal_app.test_client()
    AuthActions(staff).login("staff")
    assert staff.get("/admin/environment").status_code == 403
    manage(admin, "staff", "role", role="admin")
    assert staff.get("/admin/environment").status_code == 200
    manage(admin, "staff", "role", role="staff")
    assert staff.get("/admin/environment").status_code == 403
    assert audited(portal_app, "role_changed") == [
        ("admin", "staff", {"code": "role_changed", "previous": "staff", "role": "admin"}),
        ("admin", "staff", {"code": "role_changed", "previous": "admin", "role": "staff"}),
    ]


def test_a_password_reset_ends_the_sessions_and_forces_a_change(portal_app, admin):
    staff = portal_app.test_client()
    AuthActions(staff).login("staff")
    assert manage(admin, "staff", "password", password=LATER).status_code == 303
    assert logged_out(staff)
    assert AuthActions(staff).login("staff").status_code == 401
    AuthActions(staff).login("staff", LATER)
    assert staff.get("/animals").headers["Location"] == "/account/password"
    assert audited(portal_app, "password_reset")[0][:2] == ("admin", "staff")


def test_a_weak_reset_password_is_refused_next_to_the_field(portal_app, admin):
    response = manage(admin, "staff", "password", password="staffstaff12")
    assert response.status_code == 400
    assert "easy to guess" in response.text or "most common" in response.text
    assert account(portal_app, "staff").check_password(PASSWORDS["staff"])


@pytest.mark.parametrize(
    ("change", "fields", "message"),
    [
        ("role", {"role": "staff"}, "You cannot change your own role"),
        ("disable", {}, "You cannot disable your own account"),
        ("password", {"password": LATER}, "Change your own password under Your account."),
    ],
)
def test_an_admin_cannot_change_their_own_role_or_disable_themselves(portal_app, admin, change, fields, message):
    response = manage(admin, "admin", change, **fields)
    assert response.headers["Location"] == "/admin/users/admin"
    assert message in admin.get("/admin/users/admin").text
    me = account(portal_app, "admin")
    assert me.role == "admin" and me.enabled and me.check_password(PASSWORDS["admin"])


def test_the_last_enabled_admin_can_be_neither_demoted_nor_disabled(portal_app):
    with portal_app.app_context():
        staff, admin = (db.session.scalar(db.select(User).filter_by(username=n)) for n in ("staff", "admin"))
        with pytest.raises(accounts.AccountError, match="admin is the last enabled admin"):
            accounts.change_role(staff, admin, "staff")
        with pytest.raises(accounts.AccountError, match="admin is the last enabled admin"):
            accounts.set_enabled(staff, admin, enabled=False)
        db.session.expire_all()
        assert admin.role == "admin" and admin.enabled


def demote(client, name, start):
    """Demote `name` as soon as the other thread is ready too."""
    token = csrf_token(client.get(f"/admin/users/{name}").text)
    start.wait()
    return client.post(f"/admin/users/{name}/role", data={"csrf_token": token, "role": "staff"})


def test_two_admins_demoting_each_other_at_once_leave_one_admin(make_portal, database_url):
    app = make_portal(SQLALCHEMY_DATABASE_URI=database_url)
    with app.app_context():
        db.session.add(User(username="boss", role="admin", password_hash=account(app, "admin").password_hash))
        db.session.commit()
    ann, boss = app.test_client(), app.test_client()
    AuthActions(ann).login("admin")
    AuthActions(boss).login("boss", PASSWORDS["admin"])
    for _round in range(5):
        answers = at_once([(ann, "boss"), (boss, "admin")], demote)
        with app.app_context():
            admins = db.session.scalars(db.select(User.username).filter_by(role="admin", enabled=True)).all()
        assert len(admins) == 1, f"round {_round}: admins left {admins}"
        # The loser is refused by the rule (303 with a message), or, arriving after the winner's change,
        # is no longer an admin at all (403); neither changed anything.
        assert sorted(answer.status_code for answer in answers) in ([303, 303], [303, 403])
        survivor = ann if admins == ["admin"] else boss
        demoted = "boss" if admins == ["admin"] else "admin"
        manage(survivor, demoted, "role", role="admin")
    refusals = [
        e
        for e in audited(app, "role_changed")
        if e[2] == {"code": "role_changed", "previous": "admin", "role": "staff"}
    ]
    assert len(refusals) == 5


def test_every_change_needs_a_fresh_login(make_portal, clock):
    app = make_portal(CLOCK=clock)
    client = app.test_client()
    AuthActions(client).login("admin", remember=True)
    clock.advance(minutes=45)  # the session idles out; the remember-me cookie restores a login that is not fresh
    page = client.get("/admin/users/staff")
    assert "You will be asked to log in again" in page.text
    response = manage(client, "staff", "disable")
    assert response.headers["Location"] == "/login?next=/admin/users/staff"
    assert account(app, "staff").enabled
    assert create(client, "late").headers["Location"] == "/login?next=/admin/users/new"
    assert account(app, "late") is None


def test_the_audit_page_names_the_account_changed(portal_app, admin):
    manage(admin, "staff", "role", role="admin")
    page = admin.get("/admin/audit").text
    row = (
        r'<td class="text-free" data-label="Who">admin</td>\s*<td data-label="What">role changed</td>\s*'
        r'<td class="text-free" data-label="Account">staff</td>'
    )
    assert re.search(row, page)


def test_two_admins_adding_one_name_at_once_get_one_account_and_an_honest_answer(portal_app, auth_for, caplog):
    admins = [auth_for(portal_app, "admin"), auth_for(portal_app, "admin")]
    tokens = [csrf_token(admin.get("/admin/users/new").text) for admin in admins]

    def add_at_once(client, token, start):
        start.wait()
        fields = {
            "csrf_token": token,
            "username": "twin",
            "role": "staff",
            "environments": "staging",
            "password": INITIAL,
        }
        return client.post("/admin/users/new", data=fields)

    for _ in range(5):
        answers = at_once(list(zip(admins, tokens, strict=True)), add_at_once)
        statuses = sorted(answer.status_code for answer in answers)
        assert statuses in ([303, 400], [303, 409]), statuses  # the loser saw the winner's account, or lost the race
        for answer in answers:
            if answer.status_code == 409:
                assert "Someone else made the same change at the same moment" in answer.text
        with portal_app.app_context():
            twin = db.session.scalar(db.select(User).filter_by(username="twin"))
            db.session.delete(twin)
            db.session.commit()
    assert "Traceback" not in caplog.text and "scrypt" not in caplog.text


def test_every_error_of_the_new_account_form_is_shown_at_once(portal_app, admin):
    """An invalid user name is not hidden behind a short password's error until the next try."""
    response = create(admin, "bad name", password="short", environments=[])
    assert response.status_code == 400
    assert "only letters, digits and . _ @ -" in response.text
    assert "Use at least 12 characters" in response.text
    assert "Choose production, staging or both." in response.text
    assert account(portal_app, "bad name") is None


@pytest.mark.parametrize("password", ["password1234", "short", "aaaaaaaaaaaaaaaa", "correct horse battery staple"])
def test_the_form_and_the_command_line_share_one_password_rule(portal_app, admin, runner, password):
    """`flask user create` and the admins' form give the same verdict on a password: both ask passwords.problem."""
    by_form = create(admin, "formuser", password=password).status_code == 303
    command = runner.invoke(
        args=["user", "create", "lineuser", "--role", "staff", "--password-stdin"], input=password + "\n"
    )
    assert by_form == (command.exit_code == 0), command.output
    assert (account(portal_app, "formuser") is not None) == (account(portal_app, "lineuser") is not None)
