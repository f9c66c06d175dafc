"""Passkey answers sent as a browser sends them, from a software authenticator (tests/support/authenticator.py), and
hostile ones: what the portal accepts, what it refuses, and that a refusal is a JSON answer, never a 500."""

import cbor2
import pytest

from petportal.data.models import AuditEntry, Passkey, User
from petportal.extensions import db

from support.authenticator import Authenticator
from support.helpers import AuthActions, csrf_token

ORIGIN = "http://localhost"


@pytest.fixture
def app(make_portal):
    return make_portal(PUBLIC_URL=ORIGIN, REQUIRE_ADMIN_MFA=True)


def post_json(client, path, body, page="/login"):
    """A JSON POST with the CSRF header (read off `page`), as static/js/passkeys.js sends it; a string `body` is
    sent as it is, as JSON."""
    headers = {"X-CSRFToken": csrf_token(client.get(page).text)}
    if isinstance(body, str):
        return client.post(path, data=body, content_type="application/json", headers=headers)
    return client.post(path, json=body, headers=headers)


def register(client, authenticator, name="laptop"):
    options = post_json(client, "/account/passkeys/options", {}, page="/animals").get_json()
    return post_json(
        client, "/account/passkeys", {"credential": authenticator.register(options), "name": name}, "/animals"
    )


def sign_in(client, authenticator):
    options = post_json(client, "/login/passkey/options", {}).get_json()
    return post_json(client, "/login/passkey", {"credential": authenticator.sign_in(options)})


def test_a_passkey_alone_must_verify_its_user_but_a_second_step_need_not(app, auth_for):
    key = Authenticator(ORIGIN, verifies_user=False)  # a security key without a PIN
    assert register(auth_for(app, "staff"), key).status_code == 200
    alone = app.test_client()
    assert sign_in(alone, key).status_code == 401
    assert alone.get("/animals/new").status_code == 302

    # After the password, its presence is the second factor.
    second = app.test_client()
    assert AuthActions(second).login("staff").headers["Location"] == "/login/mfa"
    options = post_json(second, "/login/passkey/options", {}).get_json()
    assert post_json(second, "/login/passkey", {"credential": key.sign_in(options)}).status_code == 200
    assert second.get("/animals/new").status_code == 200


def test_a_verified_passkey_signs_in_alone_and_keeps_its_counter(app, auth_for):
    key = Authenticator(ORIGIN)
    register(auth_for(app, "staff"), key)
    client = app.test_client()
    answer = sign_in(client, key)
    assert answer.status_code == 200 and answer.get_json() == {"redirect": "/animals"}
    assert client.get("/animals/new").status_code == 200
    with app.app_context():
        assert db.session.scalar(db.select(Passkey.sign_count)) == key.count


@pytest.mark.parametrize(
    "body",
    [
        "[" * 50_000,
        {"credential": "[" * 50_000},
        {"credential": {"id": "\ud800"}},
        {"credential": {"id": "AAAA\u0000"}},
        {"credential": {"id": ["AAAA"]}},
        {"credential": 7},
        {"credential": {"id": "A" * 5000}},
        [],
    ],
)
def test_a_hostile_sign_in_answer_is_refused_as_json(app, body):
    client = app.test_client()
    post_json(client, "/login/passkey/options", {})
    token = csrf_token(client.get("/login").text)
    if isinstance(body, str):
        answer = client.post(
            "/login/passkey", data=body, content_type="application/json", headers={"X-CSRFToken": token}
        )
    else:
        answer = client.post("/login/passkey", json=body, headers={"X-CSRFToken": token})
    assert answer.status_code == 401
    assert "error" in answer.get_json()


def test_a_hostile_registration_is_refused_as_json_and_a_name_is_kept_readable(app, auth_for):
    staff = auth_for(app, "staff")
    token = csrf_token(staff.get("/animals").text)
    deep = staff.post(
        "/account/passkeys", data="[" * 50_000, content_type="application/json", headers={"X-CSRFToken": token}
    )
    assert deep.status_code == 400 and "error" in deep.get_json()
    too_long = Authenticator(ORIGIN, credential_id=bytes(1100))
    assert register(staff, too_long).status_code == 400
    for not_a_key in ([1, 2], b"x", "x"):  # a public key that is no COSE key map
        assert register(staff, Authenticator(ORIGIN, public_key=cbor2.dumps(not_a_key))).status_code == 400
    assert register(staff, Authenticator(ORIGIN), name="desk\ud800\u202e\u0000 key").status_code == 200
    with app.app_context():
        assert db.session.scalars(db.select(Passkey.name)).all() == ["desk key"]


def test_an_unsigned_answer_does_not_say_that_an_account_is_disabled(app, auth_for):
    key = Authenticator(ORIGIN)
    register(auth_for(app, "staff"), key)
    with app.app_context():
        db.session.scalar(db.select(User).filter_by(username="staff")).enabled = False
        db.session.commit()
    client = app.test_client()
    post_json(client, "/login/passkey/options", {})
    unsigned = post_json(client, "/login/passkey", {"credential": {"id": key.sign_in({"challenge": "x"})["id"]}})
    assert unsigned.status_code == 401 and "disabled" not in unsigned.get_json()["error"]
    signed = sign_in(client, key)
    assert signed.status_code == 401 and "disabled" in signed.get_json()["error"]
    with app.app_context():
        refusals = db.session.scalars(db.select(AuditEntry.actor).filter_by(action="passkey_refused")).all()
        assert refusals == ["staff"]  # the unsigned one named nobody, and was not audited


def test_an_admins_reset_removes_the_accounts_passkeys_and_ends_its_logins(app, auth_for):
    staff = auth_for(app, "staff")
    register(staff, Authenticator(ORIGIN))
    admin = auth_for(app, "admin")
    register(admin, Authenticator(ORIGIN))  # the admin's own second factor, for the admin pages
    admin_key = Authenticator(ORIGIN)
    register(admin, admin_key)
    admin = app.test_client()
    assert sign_in(admin, admin_key).status_code == 200
    page = admin.get("/admin/users/staff")
    assert "Reset the second factor" in page.text
    token = csrf_token(page.text)
    assert admin.post("/admin/users/staff/mfa/reset", data={"csrf_token": token}).status_code == 303
    with app.app_context():
        account = db.session.scalar(db.select(User).filter_by(username="staff"))
        assert db.session.scalars(db.select(Passkey).filter_by(user_id=account.id)).all() == []
    assert staff.get("/account/passkeys").status_code == 302  # logged out


def test_removing_a_passkey_by_an_id_beyond_64_bits_is_not_found(app, auth_for):
    staff = auth_for(app, "staff")
    token = csrf_token(staff.get("/account/passkeys").text)
    answer = staff.post(f"/account/passkeys/{10**40}/remove", data={"csrf_token": token}, follow_redirects=True)
    assert answer.status_code == 404  # no id beyond 64 bits: the int converter refuses it before any view
