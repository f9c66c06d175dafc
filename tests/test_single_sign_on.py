"""Single sign-on against a real OpenID Provider: the npm package `oidc-provider` (tests/oidc_provider.mjs), on a
real port. The portal's Authlib client reads its discovery document, exchanges codes at its token endpoint and
checks its ID tokens; nothing of the protocol is mocked."""

import base64
import json
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from joserfc import jwt
from joserfc.jwk import RSAKey

from petportal.auth import sso
from petportal.config import EVERY_ENVIRONMENT, ConfigurationError, Environment, from_environment
from petportal.data.models import AuditEntry, LoginSession, User
from petportal.extensions import db

from support.authenticator import Authenticator
from support.helpers import PASSWORDS, AuthActions, csrf_token, enrol_mfa, post_form, totp
from support.openid_provider import BACKCHANNEL_LOGOUT, CALLBACK, MISSING, PEOPLE, PORTAL, sign_in_settings
from support.servers import RecordingMiddleware, free_port, serve


@pytest.fixture(scope="module")
def provider(identity_provider):
    if identity_provider is None:
        pytest.skip(MISSING)
    return identity_provider


def sso_app(make_portal, provider, **settings):
    """A portal whose staff and admins sign in at `provider`."""
    return make_portal(**sign_in_settings(provider), **settings)


@pytest.fixture
def sso_portal(make_portal, provider):
    return sso_app(make_portal, provider)


def at_provider(authorization_url, sub, amr="pwd", browser=None):
    """Sign `sub` in at the provider, from the portal's redirect to its authorization endpoint, and return the
    portal address (path and query) the provider sends the browser back to."""
    browser = browser or requests.Session()
    page = browser.get(authorization_url, allow_redirects=True)
    assert page.status_code == 200, page.text
    action = urlsplit(page.url)._replace(path=urlsplit(page.url).path + "/login").geturl()
    answer = browser.post(action, data={"login": sub, "amr": amr}, allow_redirects=False)
    while answer.status_code in (302, 303) and not answer.headers["Location"].startswith(PORTAL):
        answer = browser.get(requests.compat.urljoin(answer.url, answer.headers["Location"]), allow_redirects=False)
    back = answer.headers["Location"]
    assert back.startswith(CALLBACK), back
    return back[len(PORTAL) :]


def start(client, next_path=None):
    """Press "Sign in with ...": the portal's redirect to the provider."""
    answer = client.get("/login/sso", query_string={"next": next_path} if next_path else None)
    assert answer.status_code == 302, answer.status_code
    return answer.headers["Location"]


def sign_in(client, sub, amr="pwd", next_path=None):
    """The whole sign-in of `sub`; the portal's answer to the callback."""
    return client.get(at_provider(start(client, next_path), sub, amr))


def account(app, sub):
    with app.app_context():
        return db.session.scalar(db.select(User).filter_by(sso_subject=sub))


def audit_actions(app):
    with app.app_context():
        return [
            (entry.action, entry.actor) for entry in db.session.scalars(db.select(AuditEntry).order_by(AuditEntry.id))
        ]


def test_the_login_page_offers_single_sign_on_only_when_configured(sso_portal, client):
    assert "Sign in with Acme sign-in" in sso_portal.test_client().get("/login").text
    assert 'id="sso-login"' not in client.get("/login").text
    assert client.get("/login/sso").status_code == 404


def test_staff_sign_in_makes_the_account_and_goes_on_to_next(sso_portal):
    client = sso_portal.test_client()
    answer = sign_in(client, "kim-0001", next_path="/animals/new")
    assert answer.status_code == 303
    assert answer.headers["Location"] == "/animals/new"
    assert client.get("/animals/new").status_code == 200
    kim = account(sso_portal, "kim-0001")
    assert (kim.username, kim.role, kim.password_hash) == ("kim", "staff", None)
    assert ("user_created", "kim") in audit_actions(sso_portal)
    assert ("login", "kim") in audit_actions(sso_portal)
    # The same person again: the same account, not a second one.
    sign_in(sso_portal.test_client(), "kim-0001")
    with sso_portal.app_context():
        assert db.session.scalar(db.select(db.func.count()).select_from(User).filter_by(sso_subject="kim-0001")) == 1


def test_the_authorization_redirect_is_the_one_location_elsewhere(sso_portal, provider):
    client = sso_portal.test_client()
    location = start(client)
    parts = urlsplit(location)
    assert f"{parts.scheme}://{parts.netloc}" == provider.issuer
    query = parse_qs(parts.query)
    assert query["code_challenge_method"] == ["S256"]
    assert {"state", "nonce", "code_challenge"} <= set(query)
    # Any other address elsewhere, even on the provider's host, is still made a path on this site.
    answer = client.get("/login", query_string={"next": f"{provider.issuer}/auth"})
    assert answer.status_code == 200


def test_admin_sign_in_with_a_second_factor_at_the_provider_opens_the_admin_pages(make_portal, provider):
    app = sso_app(make_portal, provider, REQUIRE_ADMIN_MFA=True)
    client = app.test_client()
    assert sign_in(client, "ada-0002", amr="pwd,mfa").status_code == 303
    assert account(app, "ada-0002").role == "admin"
    assert client.get("/admin/users").status_code == 200


def test_an_admin_without_a_second_factor_at_the_provider_is_sent_to_enrol_one(make_portal, provider):
    app = sso_app(make_portal, provider, REQUIRE_ADMIN_MFA=True)
    client = app.test_client()
    sign_in(client, "ada-0002", amr="pwd")
    answer = client.get("/admin/users")
    assert answer.status_code == 303
    assert answer.headers["Location"] == "/account/mfa"


def test_an_admin_with_the_portals_own_second_factor_gives_its_code_after_the_provider(make_portal, provider, clock):
    app = sso_app(make_portal, provider, REQUIRE_ADMIN_MFA=True, CLOCK=clock)
    client = app.test_client()
    sign_in(client, "ada-0002", amr="pwd,mfa")
    secret, _codes = enrol_mfa(client, clock)
    client.post("/logout", data={"csrf_token": csrf(client)})
    answer = sign_in(client, "ada-0002", amr="pwd")
    assert answer.headers["Location"] == "/login/mfa"
    assert client.get("/admin/users").status_code in (302, 303)  # not logged in yet
    clock.advance(seconds=30)
    assert post_form(client, "/login/mfa", "/login/mfa", code=totp(secret, clock)).status_code == 303
    assert client.get("/admin/users").status_code == 200


def test_the_role_is_read_again_at_every_sign_in(sso_portal, provider):
    sign_in(sso_portal.test_client(), "ada-0002")
    assert account(sso_portal, "ada-0002").role == "admin"
    provider.set_groups("ada-0002", ["pet-staff"])
    client = sso_portal.test_client()
    sign_in(client, "ada-0002")
    assert account(sso_portal, "ada-0002").role == "staff"
    assert client.get("/admin/users").status_code == 403
    assert ("role_changed", "ada") in audit_actions(sso_portal)


def test_without_an_environments_claim_an_account_made_by_sign_in_works_on_both(sso_portal):
    sign_in(sso_portal.test_client(), "kim-0001")
    assert account(sso_portal, "kim-0001").environments == EVERY_ENVIRONMENT


def test_the_environments_claim_sets_the_accounts_environments_at_every_sign_in(make_portal, provider):
    settings = sign_in_settings(provider)
    app = make_portal(**{**settings, "OIDC": {**settings["OIDC"], "environments_claim": "groups"}})
    provider.set_groups("kim-0001", ["pet-staff", "staging"])
    client = app.test_client()
    assert sign_in(client, "kim-0001").status_code == 303
    assert account(app, "kim-0001").environments == {Environment.STAGING}
    assert "You work on" in client.get("/animals").text
    provider.set_groups("kim-0001", ["pet-staff", "staging", "production"])
    assert sign_in(app.test_client(), "kim-0001").status_code == 303
    assert account(app, "kim-0001").environments == EVERY_ENVIRONMENT
    assert ("environments_changed", "kim") in audit_actions(app)
    provider.set_groups("kim-0001", ["pet-staff"])
    refused = sign_in(app.test_client(), "kim-0001")
    assert refused.status_code == 403 and "no environment of this portal" in refused.text


def test_someone_with_no_mapped_group_gets_403_and_no_account(sso_portal):
    client = sso_portal.test_client()
    answer = sign_in(client, "eve-0003")
    assert answer.status_code == 403
    assert "no access to this portal" in answer.text
    assert account(sso_portal, "eve-0003") is None
    assert client.get("/animals/new").status_code == 302  # still anonymous
    assert ("login_refused", "eve") in audit_actions(sso_portal)


def test_an_account_whose_groups_no_longer_map_is_refused_and_stays_signed_out(sso_portal, provider):
    sign_in(sso_portal.test_client(), "kim-0001")
    provider.set_groups("kim-0001", ["everyone"])
    client = sso_portal.test_client()
    assert sign_in(client, "kim-0001").status_code == 403
    assert client.get("/animals/new").status_code == 302
    assert account(sso_portal, "kim-0001").role == "staff"  # unchanged, and unused


def test_a_disabled_account_cannot_sign_in(sso_portal):
    sign_in(sso_portal.test_client(), "kim-0001")
    with sso_portal.app_context():
        db.session.scalar(db.select(User).filter_by(sso_subject="kim-0001")).enabled = False
        db.session.commit()
    client = sso_portal.test_client()
    answer = sign_in(client, "kim-0001")
    assert answer.status_code == 403
    assert "disabled" in answer.text
    assert client.get("/animals/new").status_code == 302


def test_a_provider_name_never_becomes_another_account(sso_portal):
    client = sso_portal.test_client()
    sign_in(client, "mallory-0004")
    mallory = account(sso_portal, "mallory-0004")
    assert mallory.username.startswith("admin-") and mallory.role == "staff"
    with sso_portal.app_context():
        admin = db.session.scalar(db.select(User).filter_by(username="admin"))
        assert admin.sso_subject is None and admin.role == "admin"
    assert client.get("/admin/users").status_code == 403


@pytest.mark.parametrize("name", ["anonymous", "System", "demo"])
def test_a_provider_name_the_audit_log_uses_for_itself_gets_a_name_of_its_own(make_portal, provider, name):
    app = sso_app(make_portal, provider)
    provider.people["anon-0005"] = {"preferred_username": name, "groups": ["pet-staff"]}
    provider.save()
    client = app.test_client()
    assert sign_in(client, "anon-0005").status_code == 303
    person = account(app, "anon-0005")
    assert person.username.lower().startswith(f"{name.lower()}-") and person.role == "staff"
    assert ("user_created", person.username) in audit_actions(app)
    assert all(actor.lower() != name.lower() for _action, actor in audit_actions(app))


@pytest.mark.parametrize("state", ["wrong", "", None])
def test_a_wrong_or_missing_state_is_400_and_nobody_is_logged_in(sso_portal, state):
    client = sso_portal.test_client()
    back = at_provider(start(client), "kim-0001")
    query = parse_qs(urlsplit(back).query)
    if state is None:
        query.pop("state")
    else:
        query["state"] = [state]
    answer = client.get("/login/sso/callback", query_string={k: v[0] for k, v in query.items()})
    assert answer.status_code == 400
    assert client.get("/animals/new").status_code == 302
    assert account(sso_portal, "kim-0001") is None


def test_a_replayed_callback_is_400(sso_portal):
    client = sso_portal.test_client()
    back = at_provider(start(client), "kim-0001")
    assert client.get(back).status_code == 303
    client.post("/logout", data={"csrf_token": csrf(client)})
    assert client.get(back).status_code == 400
    assert client.get("/animals/new").status_code == 302


def test_a_callback_from_another_browsers_sign_in_is_refused(sso_portal):
    """Mix-up: the attacker signs in at the provider and hands the victim the way back; the victim's browser never
    started that sign-in, so its state is unknown there."""
    attacker, victim = sso_portal.test_client(), sso_portal.test_client()
    start(victim)
    back = at_provider(start(attacker), "mallory-0004")
    assert victim.get(back).status_code == 400
    assert victim.get("/animals/new").status_code == 302


def test_a_code_made_for_another_application_is_refused(sso_portal, provider):
    """An ID token for another audience: the code was issued to another client of the same provider, for the
    portal's own state, so only the token exchange can tell."""
    client = sso_portal.test_client()
    portal_url = start(client)
    other_url = portal_url.replace("client_id=portal", "client_id=wiki")
    back = at_provider(other_url, "kim-0001")
    answer = client.get(back)
    assert answer.status_code == 400
    assert client.get("/animals/new").status_code == 302


def test_a_code_from_a_sign_in_with_another_nonce_is_refused(sso_portal):
    """The code of a sign-in started in another session of the same browser carries that sign-in's nonce and
    PKCE challenge: with this session's state, it is refused."""
    client = sso_portal.test_client()
    first = start(client)
    second = start(client)  # the same browser starts again: two states, two nonces
    back_second = at_provider(second, "kim-0001")
    first_state = parse_qs(urlsplit(first).query)["state"][0]
    code = parse_qs(urlsplit(back_second).query)["code"][0]
    answer = client.get("/login/sso/callback", query_string={"code": code, "state": first_state})
    assert answer.status_code == 400
    assert client.get("/animals/new").status_code == 302


def test_an_unreachable_provider_gets_the_503_page(make_portal):
    app = make_portal(
        PUBLIC_URL=PORTAL,
        OIDC={
            "issuer": f"http://127.0.0.1:{free_port()}",
            "client_id": "portal",
            "client_secret": "x",
            "name": "Acme",
            "role_claim": "groups",
            "admin_values": frozenset({"a"}),
            "staff_values": frozenset(),
            "environments_claim": None,
            "session_max_age": None,
        },
    )
    answer = app.test_client().get("/login/sso")
    assert answer.status_code == 503
    assert "could not be reached" in answer.text


def test_password_accounts_keep_working_beside_single_sign_on(sso_portal):
    client = sso_portal.test_client()
    assert AuthActions(client).login("staff", PASSWORDS["staff"]).status_code == 303
    assert client.get("/animals/new").status_code == 200


def test_an_sso_login_records_the_providers_second_factor(sso_portal):
    client = sso_portal.test_client()
    sign_in(client, "ada-0002", amr="pwd,otp")
    with sso_portal.app_context():
        ada = db.session.scalar(db.select(User).filter_by(sso_subject="ada-0002"))
        row = db.session.scalar(db.select(LoginSession).filter_by(user_id=ada.id))
        assert row.second_factor == "provider"


def csrf(client):
    return csrf_token(client.get("/animals").text)


def test_sso_accounts_are_marked_and_have_no_password_to_change_or_reset(sso_portal, auth_for):
    client = sso_portal.test_client()
    sign_in(client, "kim-0001")
    page = client.get("/account/password")
    assert "no password here" in page.text and 'name="new_password"' not in page.text
    refused = post_form(
        client, "/account/password", "/account/password", current_password="x", new_password="a" * 20, confirm="a" * 20
    )
    assert refused.status_code == 400

    admin = auth_for(sso_portal, "admin")
    users = admin.get("/admin/users").text
    assert "company sign-in" in users.split(">kim<", 1)[1].split("</th>", 1)[0]
    manage = admin.get("/admin/users/kim").text
    assert "no password here" in manage and "/admin/users/kim/password" not in manage
    reset = post_form(admin, "/admin/users/kim", "/admin/users/kim/password", password="a new password 123")
    assert reset.status_code == 303
    assert "has no password here" in admin.get("/admin/users/kim").text
    assert account(sso_portal, "kim-0001").password_hash is None


def test_only_the_exact_authorization_endpoint_leaves_the_site(sso_portal, provider):
    from flask import Response

    from petportal.web.security import keep_locations_on_trusted_hosts

    endpoint = urlsplit(start(sso_portal.test_client()))._replace(query="").geturl()
    host = urlsplit(endpoint).netloc
    cases = {
        f"{endpoint}?client_id=portal&state=x": f"{endpoint}?client_id=portal&state=x",
        f"{provider.issuer}/session/end": "/session/end",
        f"http://{host}@evil.example{urlsplit(endpoint).path}": urlsplit(endpoint).path,
        f"https://{host}{urlsplit(endpoint).path}": urlsplit(endpoint).path,  # another scheme
        f"//{host}/elsewhere": "/elsewhere",
    }
    with sso_portal.test_request_context("/"):
        for location, kept in cases.items():
            response = Response(status=302, headers={"Location": location})
            assert keep_locations_on_trusted_hosts(response).headers["Location"] == kept, location


def test_the_provider_decides_an_sso_accounts_access_a_passkey_is_only_its_second_step(make_portal, provider):
    """A passkey alone would let someone the provider has since refused back in, with their old role."""
    app = sso_app(make_portal, provider, REQUIRE_ADMIN_MFA=True)
    client = app.test_client()
    sign_in(client, "ada-0002", amr="pwd,mfa")
    key = Authenticator(PORTAL)
    token = csrf(client)
    options = client.post("/account/passkeys/options", headers={"X-CSRFToken": token}).get_json()
    added = client.post("/account/passkeys", json={"credential": key.register(options)}, headers={"X-CSRFToken": token})
    assert added.status_code == 200

    provider.set_groups("ada-0002", [])
    alone = app.test_client()
    token = csrf_token(alone.get("/login").text)
    options = alone.post("/login/passkey/options", headers={"X-CSRFToken": token}).get_json()
    refused = alone.post("/login/passkey", json={"credential": key.sign_in(options)}, headers={"X-CSRFToken": token})
    assert refused.status_code == 401 and "company" in refused.get_json()["error"]
    assert alone.get("/admin/users").status_code == 302

    # With a mapped group again, and no second factor from the provider, the passkey is the second step.
    provider.set_groups("ada-0002", ["pet-admins"])
    second = app.test_client()
    assert sign_in(second, "ada-0002", amr="pwd").headers["Location"] == "/login/mfa"
    token = csrf_token(second.get("/login").text)
    options = second.post("/login/passkey/options", headers={"X-CSRFToken": token}).get_json()
    answer = second.post("/login/passkey", json={"credential": key.sign_in(options)}, headers={"X-CSRFToken": token})
    assert answer.status_code == 200
    assert second.get("/admin/users").status_code == 200


def test_a_name_taken_in_advance_never_locks_someone_out(sso_portal, provider):
    """The suffix a taken name gets can be worked out from the `sub`: someone who takes it first only pushes the
    next person to another name."""
    import hashlib

    suffix = hashlib.sha256(f"{provider.issuer} victim-0009".encode()).hexdigest()[:8]
    provider.people["squat-0008"] = {"preferred_username": f"admin-{suffix}", "groups": ["pet-staff"]}
    provider.people["victim-0009"] = {"preferred_username": "admin", "groups": ["pet-staff"]}
    provider.save()
    assert sign_in(sso_portal.test_client(), "squat-0008").status_code == 303
    victim = sso_portal.test_client()
    assert sign_in(victim, "victim-0009").status_code == 303
    assert victim.get("/animals/new").status_code == 200
    assert account(sso_portal, "victim-0009").username not in ("admin", f"admin-{suffix}")


def test_a_browser_keeps_only_its_latest_sign_ins(sso_portal):
    """Each start keeps state in the session; thousands of starts must not grow it without end."""
    client = sso_portal.test_client()
    oldest = at_provider(start(client), "kim-0001")
    for _ in range(sso.SIGN_INS_KEPT):
        start(client)
    latest = at_provider(start(client), "kim-0001")
    assert client.get(oldest).status_code == 400
    assert client.get(latest).status_code == 303


def test_after_an_error_answer_the_same_state_never_completes(sso_portal, provider):
    """The provider's own `error` answer (here `login_required`, asked for with prompt=none) uses the sign-in up:
    the code a later sign-in at the provider brings back with the same state is refused."""
    client = sso_portal.test_client()
    url = start(client)
    refused = requests.get(f"{url}&prompt=none", allow_redirects=False, timeout=10)
    back = refused.headers["Location"]
    assert back.startswith(CALLBACK) and "error=login_required" in back, back
    assert client.get(back[len(PORTAL) :]).status_code == 400
    answer = client.get(at_provider(url, "kim-0001"))
    assert answer.status_code == 400
    assert "expired or was used already" in answer.text
    assert client.get("/animals/new").status_code == 302
    assert account(sso_portal, "kim-0001") is None


@pytest.mark.parametrize("iss", ["http://127.0.0.1:1", "", None, "issuer with a trailing slash"])
def test_an_answer_that_names_another_issuer_or_none_is_refused_and_uses_the_sign_in_up(sso_portal, provider, iss):
    """RFC 9207: the provider says it sends `iss`, so the answer must carry its issuer, exactly."""
    client = sso_portal.test_client()
    back = at_provider(start(client), "kim-0001")
    query = {name: values[0] for name, values in parse_qs(urlsplit(back).query).items()}
    assert query["iss"] == provider.issuer
    if iss is None:
        query.pop("iss")
    else:
        query["iss"] = provider.issuer + "/" if iss == "issuer with a trailing slash" else iss
    assert client.get("/login/sso/callback", query_string=query).status_code == 400
    assert client.get("/animals/new").status_code == 302
    assert client.get(back).status_code == 400  # the state was used by the refused answer
    assert account(sso_portal, "kim-0001") is None


def test_the_maximum_age_of_single_sign_on_sessions_comes_from_the_environment():
    issuer = {"PETPORTAL_OIDC_ISSUER": "https://id.example"}
    assert from_environment(issuer, read_dotenv=False)["OIDC"].session_max_age is None
    config = from_environment({**issuer, "PETPORTAL_OIDC_SESSION_MAX_AGE": "900"}, read_dotenv=False)
    assert config["OIDC"].session_max_age == timedelta(minutes=15)
    with pytest.raises(ConfigurationError, match="PETPORTAL_OIDC_SESSION_MAX_AGE must be at least 60"):
        from_environment({**issuer, "PETPORTAL_OIDC_SESSION_MAX_AGE": "5"}, read_dotenv=False)


def test_a_single_sign_on_session_ends_at_its_maximum_age_and_the_person_signs_in_again(
    make_portal, provider, clock, auth_for
):
    """In use all along, the login through the provider ends after the operator's maximum age; a password login of
    the same moment goes on (its limit is 12 hours), and signing in again opens a new one."""
    settings = sign_in_settings(provider)
    settings["OIDC"] = {**settings["OIDC"], "session_max_age": timedelta(minutes=10)}
    app = make_portal(**settings, CLOCK=clock)
    client, staff = app.test_client(), auth_for(app, "staff")
    assert sign_in(client, "kim-0001").status_code == 303
    for _ in range(2):
        clock.advance(minutes=5)
        assert client.get("/animals/new").status_code == 200
    clock.advance(seconds=1)
    ended = client.get("/animals/new")
    assert ended.status_code == 302 and ended.headers["Location"].startswith("/login")
    assert "Your session has ended. Please log in again." in client.get("/login").text
    assert staff.get("/animals/new").status_code == 200
    with app.app_context():
        kim = db.session.scalar(db.select(User).filter_by(sso_subject="kim-0001"))
        assert db.session.scalar(db.select(LoginSession).filter_by(user_id=kim.id)).ended_at is not None
    assert sign_in(client, "kim-0001").status_code == 303
    assert client.get("/animals/new").status_code == 200


def open_logins_of(app, sub):
    with app.app_context():
        user = db.session.scalar(db.select(User).filter_by(sso_subject=sub))
        return db.session.scalar(
            db.select(db.func.count()).select_from(LoginSession).filter_by(user_id=user.id, ended_at=None)
        )


def test_a_person_the_provider_removes_is_logged_out_of_every_browser_by_back_channel_logout(sso_portal, provider):
    """The provider sends its signed logout token to the portal over a real socket; every open login of that account
    ends (they are rows of the portal's database, checked by every process of every instance on each request), and
    nobody else's."""
    assert requests.get(f"{provider.issuer}/.well-known/openid-configuration", timeout=10).json()[
        "backchannel_logout_supported"
    ]
    browsers = [sso_portal.test_client(), sso_portal.test_client()]
    for browser in browsers:
        assert sign_in(browser, "kim-0001").status_code == 303
    other = sso_portal.test_client()
    sign_in(other, "ada-0002")
    recorder = RecordingMiddleware(sso_portal)
    with serve(recorder) as origin:
        assert provider.remove("kim-0001", origin).status_code == 204
    [delivered] = recorder.received
    assert delivered.method == "POST" and delivered.target == BACKCHANNEL_LOGOUT
    for browser in browsers:
        assert browser.get("/animals/new").status_code == 302
    assert open_logins_of(sso_portal, "kim-0001") == 0
    assert other.get("/animals/new").status_code == 200
    assert ("sessions_ended", "kim") in audit_actions(sso_portal)
    # Removed at the provider, kim cannot sign in again either.
    assert sso_portal.test_client().get("/login/sso").status_code == 302


def test_a_logout_token_the_checks_refuse_ends_nothing(make_portal, provider, clock, caplog):
    """Another client's token (its `aud`), one signed with a key not the provider's, one without a signature, and
    the provider's own token once it is too old: each 400, and the login stays open."""
    clock.now = datetime.now(UTC)
    app = sso_app(make_portal, provider, CLOCK=clock)
    browser = app.test_client()
    sign_in(browser, "kim-0001")
    recorder = RecordingMiddleware(app)
    with serve(recorder) as origin:
        refused = provider.remove("kim-0001", origin, client_id="wiki")
        assert refused.status_code == 502 and "400" in refused.text
        provider.people = json.loads(json.dumps(PEOPLE))
        provider.save()
        [wiki_token] = [request.body for request in recorder.received]
        assert b"logout_token=" in wiki_token
        claims = {
            "iss": provider.issuer,
            "aud": "portal",
            "iat": int(time.time()),
            "jti": "x",
            "sub": "kim-0001",
            "events": {sso.BACKCHANNEL_LOGOUT_EVENT: {}},
        }
        forged = jwt.encode({"alg": "RS256"}, claims, RSAKey.generate_key(2048))
        parts = ({"alg": "none"}, claims)
        unsigned = ".".join(base64.urlsafe_b64encode(json.dumps(part).encode()).decode().rstrip("=") for part in parts)
        unsigned += "."
        for token in (forged, unsigned, "", "not.a.token"):
            answer = requests.post(f"{origin}{BACKCHANNEL_LOGOUT}", data={"logout_token": token}, timeout=10)
            assert answer.status_code == 400, token
            assert answer.json()["error"] == "invalid_request"
        assert browser.get("/animals/new").status_code == 200
        clock.advance(minutes=6)
        late = provider.remove("kim-0001", origin)
        assert late.status_code == 502 and "400" in late.text
        assert open_logins_of(app, "kim-0001") == 1
        refusals = [record.getMessage() for record in caplog.records if "back-channel logout refused" in record.message]
        assert [refusal.rsplit(": ", 1)[1] for refusal in refusals] == ["aud", *["signature"] * 4, "iat"]
        clock.now = datetime.now(UTC)
        assert provider.remove("kim-0001", origin).status_code == 204
    assert browser.get("/animals/new").status_code == 302


def test_a_logout_token_is_taken_once_and_its_replay_ends_nothing(sso_portal, provider):
    """The same token again (its `jti`) is refused as an invalid one is, and ends no login opened since."""
    sign_in(sso_portal.test_client(), "kim-0001")
    recorder = RecordingMiddleware(sso_portal)
    with serve(recorder) as origin:
        assert provider.remove("kim-0001", origin).status_code == 204
        [delivered] = recorder.received
        provider.people = json.loads(json.dumps(PEOPLE))
        provider.save()
        browser = sso_portal.test_client()
        assert sign_in(browser, "kim-0001").status_code == 303
        form = {"Content-Type": "application/x-www-form-urlencoded"}
        replay = requests.post(f"{origin}{BACKCHANNEL_LOGOUT}", data=delivered.body, headers=form, timeout=10)
    assert replay.status_code == 400 and replay.json()["error_description"] == "replayed"
    assert browser.get("/animals/new").status_code == 200
    assert audit_actions(sso_portal).count(("sessions_ended", "kim")) == 1


def test_a_logout_token_whose_time_is_no_number_is_refused_and_ends_nothing(sso_portal, provider):
    """A token the provider signed, but whose `iat` or `exp` is NaN (JSON as Python writes it) or infinite: 400,
    naming the claim, and the login stays open; the same token with real times ends it. (A NaN `iat` passed both
    bounds, and keeping its `jti` then failed: a 500.)"""
    browser = sso_portal.test_client()
    sign_in(browser, "kim-0001")
    portal = sso_portal.test_client()
    claims = {"iss": provider.issuer, "aud": "portal", "sub": "kim-0001", "events": {sso.BACKCHANNEL_LOGOUT_EVENT: {}}}
    for number, (claim, odd) in enumerate([("iat", float("nan")), ("iat", float("inf")), ("exp", float("nan"))]):
        times = {"iat": int(time.time()), "exp": int(time.time()) + 60, claim: odd}
        token = provider.sign({**claims, **times, "jti": f"odd-{number}"})
        answer = portal.post(BACKCHANNEL_LOGOUT, data={"logout_token": token})
        assert (answer.status_code, (answer.json or {}).get("error_description")) == (400, claim), (claim, odd)
        assert browser.get("/animals/new").status_code == 200
    token = provider.sign({**claims, "iat": int(time.time()), "exp": int(time.time()) + 60, "jti": "real"})
    assert portal.post(BACKCHANNEL_LOGOUT, data={"logout_token": token}).status_code == 200
    assert browser.get("/animals/new").status_code == 302


def forged_with_an_unknown_key(provider):
    claims = {"iss": provider.issuer, "aud": "portal", "iat": int(time.time()), "jti": "forged", "sub": "kim-0001"}
    claims["events"] = {sso.BACKCHANNEL_LOGOUT_EVENT: {}}
    return jwt.encode({"alg": "RS256", "kid": "not-the-providers"}, claims, RSAKey.generate_key(2048))


def test_tokens_naming_an_unknown_key_fetch_the_providers_keys_at_most_once_a_minute(make_portal, provider, clock):
    """50 forged logout tokens: one fetch of the keys (the provider counts them), each refused at once."""
    clock.now = datetime.now(UTC)
    portal = sso_app(make_portal, provider, CLOCK=clock).test_client()
    forged, before, started = forged_with_an_unknown_key(provider), provider.jwks_requests(), time.monotonic()
    for _ in range(50):
        assert portal.post(BACKCHANNEL_LOGOUT, data={"logout_token": forged}).status_code == 400
    assert time.monotonic() - started < 5
    assert provider.jwks_requests() - before == 1
    clock.advance(minutes=1)
    assert portal.post(BACKCHANNEL_LOGOUT, data={"logout_token": forged}).status_code == 400
    assert provider.jwks_requests() - before == 2


def test_a_slow_provider_holds_one_request_for_at_most_the_keys_timeout(make_portal, provider):
    """20 forged tokens at once while the provider's keys take 10 s: one request waits for them, given up after
    KEYS_TIMEOUT; the others are answered at once, and none of them asks the provider again."""
    app, forged = sso_app(make_portal, provider), forged_with_an_unknown_key(provider)
    provider.jwks_delay = 10
    provider.save()
    before = provider.jwks_requests()
    try:
        with serve(app) as origin, ThreadPoolExecutor(20) as pool:
            url = f"{origin}{BACKCHANNEL_LOGOUT}"
            posts = [pool.submit(requests.post, url, data={"logout_token": forged}, timeout=20) for _ in range(20)]
            answers = [post.result() for post in posts]
    finally:
        provider.jwks_delay = 0
        provider.save()
    assert [answer.status_code for answer in answers] == [503] * 20
    took = sorted(answer.elapsed.total_seconds() for answer in answers)
    assert took[-2] < 1 and took[-1] < sso.KEYS_TIMEOUT + 1
    assert provider.jwks_requests() - before == 1


def test_back_channel_logout_needs_no_csrf_token_and_is_404_without_single_sign_on(client):
    assert client.post(BACKCHANNEL_LOGOUT, data={"logout_token": "x"}).status_code == 404
