"""Single sign-on through the company's OpenID Connect provider, with Authlib's Flask client.

Authlib does the protocol: the provider's discovery document, the authorization code flow with PKCE (S256),
`state` and `nonce` kept in the server-side session, and the ID token's signature, issuer, audience, expiry and
nonce. This module adds that a `state` is used once whatever the answer (Authlib keeps it after an `error`), and
that the answer's `iss` is the provider's (RFC 9207). It decides what a checked sign-in means here (`signed_in`): the
account is the one keyed by the issuer and the ID token's `sub`, never by a name, and is made at the first sign-in;
its role is read again from the configured claim at every sign-in; a person with no mapped value, and a
disabled account, are refused.

Authlib, joserfc and requests (about 20 MB a process) are imported only where single sign-on is configured.

Nothing here commits: the callback's request commits the account, its role and the audit entries, once.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from flask import Flask, abort, current_app, request, session, url_for
from flask_babel import gettext as _
from sqlalchemy import func, select
from werkzeug.wrappers import Response

from .. import audit, security
from ..clock import now
from ..config import settings
from ..extensions import db
from ..models import AuditAction, AuditDetail, Role, User
from . import logins
from .accounts import USERNAME_MAX_LENGTH

PROVIDER = "company"
# Where the sign-in keeps the page to go on to, between the redirect and the callback.
DESTINATION_KEY = "sso_destination"
# The `amr` values (RFC 8176) that name a second factor: such a sign-in satisfies PETPORTAL_REQUIRE_ADMIN_MFA.
SECOND_FACTOR_METHODS = frozenset({"mfa", "otp", "hwk", "swk", "sms"})
SCOPE = "openid profile email"
# Sign-ins started in one browser and not finished that are kept (another tab's may still finish).
SIGN_INS_KEPT = 5
# The event a logout token carries (OpenID Connect Back-Channel Logout 1.0, 2.4).
BACKCHANNEL_LOGOUT_EVENT = "http://schemas.openid.net/event/backchannel-logout"
# How long after it was issued a logout token is still taken, and how far the provider's clock may be ahead of ours.
LOGOUT_TOKEN_AGE = timedelta(minutes=5)
TOKEN_LEEWAY = timedelta(minutes=2)
# The longest issuer or `sub` kept (users.sso_issuer, users.sso_subject).
IDENTIFIER_MAX_LENGTH = 255
# What a user name made from the provider's claims may hold (accounts.USERNAME_PATTERN's characters).
NOT_IN_USERNAME = re.compile(r"[^A-Za-z0-9._@-]+")


class SignInFailed(Exception):
    """The sign-in could not be completed (a wrong, missing or used `state`, or a token the checks refuse): 400,
    nobody logged in. The message is for the person signing in."""


class SignInRefused(Exception):
    """The provider signed the person in, but the portal will not (no mapped role, a disabled account): 403."""


class LogoutRefused(Exception):
    """A back-channel logout whose token the checks refuse: 400, nothing ended. The message is the code of the first
    check that failed (`signature`, `iss`, `aud`, `iat`, `exp`, `events`, `sub_or_sid`, `sub`, `nonce`, `no_sub`)."""


class ProviderUnreachable(Exception):
    """The identity provider did not answer (its discovery document, its token endpoint): 503."""


@dataclass(frozen=True)
class SignedIn:
    """A checked sign-in: its account, whether the provider says a second factor was used, and where to go."""

    user: User
    second_factor: bool
    destination: str


def register(app: Flask) -> None:
    """Offer single sign-on when PETPORTAL_OIDC_ISSUER is set (config.py checks the rest)."""
    oidc = settings(app).oidc
    if oidc is None:
        return
    from authlib.integrations.flask_client import OAuth

    oauth = OAuth(app)
    oauth.register(
        PROVIDER,
        client_id=oidc["client_id"],
        client_secret=oidc["client_secret"],
        server_metadata_url=oidc["issuer"].rstrip("/") + "/.well-known/openid-configuration",
        client_kwargs={
            "scope": SCOPE,
            "code_challenge_method": "S256",
            "default_timeout": settings(app).upstream_timeout,
        },
    )


def _provider() -> Mapping[str, Any]:
    """The identity provider's settings, where a sign-in is under way (`register` offers it only then)."""
    oidc = settings().oidc
    assert oidc is not None
    return oidc


def provider_name() -> str | None:
    """The provider's name for the sign-in button, or None when single sign-on is not configured."""
    oidc = settings().oidc
    return None if oidc is None else str(oidc["name"])


def begin(destination: str) -> Response:
    """Send the browser to the provider's authorization endpoint, remembering `destination` for the way back."""
    client = _client()
    endpoint = _metadata(client).get("authorization_endpoint")
    if not isinstance(endpoint, str):
        raise ProviderUnreachable
    security.allow_location(endpoint)
    _forget_older_sign_ins()
    session[DESTINATION_KEY] = destination
    redirect_uri = (settings().public_url or "") + url_for("auth.sso_callback")
    response: Response = client.authorize_redirect(redirect_uri)
    return response


def _forget_older_sign_ins() -> None:
    """Keep the state of this browser's few latest sign-ins only (Authlib keeps each one's for an hour), so that
    starting thousands cannot grow a session without end."""
    prefix = f"_state_{PROVIDER}_"
    started = sorted(
        (key for key in session if key.startswith(prefix)),
        key=lambda key: session[key].get("exp", 0) if isinstance(session[key], dict) else 0,
    )
    for key in started[: max(0, len(started) - (SIGN_INS_KEPT - 1))]:
        session.pop(key, None)


def signed_in() -> SignedIn:
    """The callback: exchange the code and check the ID token (Authlib), then find or make the account and
    read its role. Raises SignInFailed, SignInRefused or ProviderUnreachable; refusals are audited."""
    client = _client()  # first: without single sign-on, a 404 that loads nothing
    import requests
    from authlib.integrations.base_client.errors import MismatchingStateError, OAuthError
    from joserfc.errors import JoseError

    metadata = _metadata(client)
    state = request.args.get("state")
    try:
        if not _from_the_issuer(metadata):
            current_app.logger.warning("single sign-on refused: the answer names another issuer")
            raise SignInFailed(_("The sign-in could not be completed. Start again from the login page."))
        token = client.authorize_access_token()
    except MismatchingStateError as error:
        raise SignInFailed(
            _("This sign-in has expired or was used already. Start again from the login page.")
        ) from error
    except (OAuthError, JoseError, ValueError) as error:
        # The provider's own error (access_denied), a code it would not exchange, or an ID token that fails a
        # check (signature, issuer, audience, expiry, nonce). Its text is the provider's: not shown.
        current_app.logger.warning("single sign-on refused: %s", type(error).__name__)
        raise SignInFailed(_("The sign-in could not be completed. Start again from the login page.")) from error
    except requests.RequestException as error:
        raise ProviderUnreachable from error
    finally:
        # Used once whatever the answer: Authlib keeps the state when the provider answers with an `error`.
        client.framework.clear_state_data(session, state)
    claims = token.get("userinfo")
    if not claims or not _fits(claims.get("sub")) or not _fits(claims.get("iss")):
        raise SignInFailed(_("The sign-in could not be completed. Start again from the login page."))
    claims = _with_userinfo(client, token, claims)
    user = _account(claims, role_for(claims.get(_provider()["role_claim"])))
    methods = claims.get("amr")
    second_factor = isinstance(methods, list) and any(method in SECOND_FACTOR_METHODS for method in methods)
    destination = session.pop(DESTINATION_KEY, None)
    return SignedIn(
        user, second_factor, destination if isinstance(destination, str) else url_for("catalog.list_animals")
    )


def _from_the_issuer(metadata: dict[str, Any]) -> bool:
    """Whether the answer came from this provider (RFC 9207): its `iss` parameter, required where the provider says
    it sends one and checked wherever there is one, is the issuer of its discovery document, character for
    character. Without it, a provider mixed up with another could have this sign-in finish with its code."""
    answered = request.args.get("iss")
    if answered is None:
        return metadata.get("authorization_response_iss_parameter_supported") is not True
    return answered == metadata.get("issuer")


def logged_out(logout_token: str) -> None:
    """OpenID Connect Back-Channel Logout 1.0: the provider says a person's session with it ended (they logged out
    there, or were removed). Every open login of their account here ends, in every process and instance (the logins
    are rows in the portal's database), audited. Raises LogoutRefused for a token the checks refuse (400), and
    ProviderUnreachable when the provider's keys cannot be read (503)."""
    client = _client()  # first: without single sign-on, a 404 that loads nothing
    metadata = _metadata(client)
    claims = _logout_claims(client, metadata, logout_token)
    subject = claims.get("sub")
    if subject is None:
        # The portal keeps no provider session ids (`sid`), only the account's: a token naming no `sub` ends nothing.
        raise LogoutRefused("no_sub")
    user = db.session.scalar(select(User).filter_by(sso_issuer=str(metadata["issuer"]), sso_subject=subject))
    if user is None:
        return  # nobody here: nothing to end, and the provider is told it is done
    ended = len(logins.open_logins(user.id))
    logins.end_all(user.id)
    audit.record(
        AuditAction.SESSIONS_ENDED,
        actor=user.username,
        target=user.username,
        detail=AuditDetail.SIGN_ON_LOGOUT,
        count=ended,
    )


def _logout_claims(client: Any, metadata: dict[str, Any], logout_token: str) -> dict[str, Any]:
    """The claims of a logout token, once every check of the specification (2.6) holds: signed with a key of the
    provider's JWKS by an algorithm it names (never `none`); `iss` the issuer, `aud` this client, `iat` present
    and recent, `exp` (if any) not past; `events` holding the back-channel logout event as an object; a `sub` or
    a `sid`; no `nonce` (so an ID token is never taken for one)."""
    import requests
    from joserfc import jwt
    from joserfc.errors import InvalidKeyIdError, JoseError
    from joserfc.jwk import KeySet
    from joserfc.jws import JWSRegistry

    algorithms = [name for name in metadata.get("id_token_signing_alg_values_supported", ["RS256"]) if name != "none"]
    registry = JWSRegistry(algorithms=algorithms or ["RS256"], strict_check_header=False)
    try:
        try:
            token = jwt.decode(logout_token, KeySet.import_key_set(client.fetch_jwk_set()), registry=registry)
        except InvalidKeyIdError:  # the provider may have rotated its keys since they were read
            token = jwt.decode(logout_token, KeySet.import_key_set(client.fetch_jwk_set(force=True)), registry=registry)
    except requests.RequestException as error:
        raise ProviderUnreachable from error
    except (JoseError, ValueError, TypeError) as error:
        raise LogoutRefused("signature") from error
    claims: dict[str, Any] = dict(token.claims)
    audience = claims.get("aud")
    audiences = audience if isinstance(audience, list) else [audience]
    issued = claims.get("iat")
    expires = claims.get("exp")
    at = now().timestamp()
    events = claims.get("events")
    failed = {
        "iss": claims.get("iss") != metadata.get("issuer"),
        "aud": _provider()["client_id"] not in audiences,
        "iat": not isinstance(issued, int | float)
        or issued > at + TOKEN_LEEWAY.total_seconds()
        or issued < at - LOGOUT_TOKEN_AGE.total_seconds(),
        "exp": expires is not None
        and (not isinstance(expires, int | float) or expires < at - TOKEN_LEEWAY.total_seconds()),
        "events": not isinstance(events, dict) or not isinstance(events.get(BACKCHANNEL_LOGOUT_EVENT), dict),
        "sub_or_sid": not (_fits(claims.get("sub")) or _fits(claims.get("sid"))),
        "sub": "sub" in claims and not _fits(claims["sub"]),
        "nonce": "nonce" in claims,
    }
    refused = [check for check, fails in failed.items() if fails]
    if refused:
        raise LogoutRefused(refused[0])
    return claims


def role_for(values: Any) -> Role | None:
    """The role that the claim's `values` (a string or a list) give: admin, staff, or None (no mapped value)."""
    if isinstance(values, str):
        values = [values]
    found = {value for value in values if isinstance(value, str)} if isinstance(values, list) else set()
    oidc = _provider()
    if found & oidc["admin_values"]:
        return Role.ADMIN
    if found & oidc["staff_values"]:
        return Role.STAFF
    return None


def _account(claims: Any, role: Role | None) -> User:
    """The account of this issuer and `sub`, made at the first sign-in, with `role`; refused (and audited)
    without a role, or when disabled."""
    issuer, subject = str(claims["iss"]), str(claims["sub"])
    user = db.session.scalar(select(User).filter_by(sso_issuer=issuer, sso_subject=subject))
    name = user.username if user is not None else _username(claims)
    if role is None:
        audit.record(AuditAction.LOGIN_REFUSED, actor=name, detail=AuditDetail.NO_ROLE_CLAIM)
        raise SignInRefused(
            _("Your account at the company's sign-in gives you no access to this portal. Ask an admin.")
        )
    if user is None:
        user = User(username=name, role=role, password_hash=None, sso_issuer=issuer, sso_subject=subject)
        db.session.add(user)
        db.session.flush()
        audit.record(
            AuditAction.USER_CREATED, actor=name, target=name, detail=AuditDetail.CREATED_BY_SIGN_ON, role=role
        )
        return user
    if not user.enabled:
        audit.record(AuditAction.LOGIN_REFUSED, actor=name, detail=AuditDetail.ACCOUNT_DISABLED)
        raise SignInRefused(_("This account is disabled. Ask an admin to enable it."))
    if user.role != role:
        audit.record(
            AuditAction.ROLE_CHANGED,
            actor=name,
            target=name,
            detail=AuditDetail.ROLE_CHANGED_BY_SIGN_ON,
            previous=user.role,
            role=role,
        )
        user.role = role
    return user


def _fits(value: Any) -> bool:
    """An issuer or `sub` the account can be keyed by: text of 1 to 255 characters (OpenID Connect's own limit)."""
    return isinstance(value, str) and 0 < len(value) <= IDENTIFIER_MAX_LENGTH


def _username(claims: Any) -> str:
    """A user name for a new account: the provider's preferred name (else e-mail, else `sub`) in the characters
    a user name may hold; when taken, with a suffix from the `sub`, so it never becomes another account's."""
    for claim in ("preferred_username", "email", "sub"):
        value = claims.get(claim)
        if isinstance(value, str):
            base = NOT_IN_USERNAME.sub("-", value).strip(".-_@")[: USERNAME_MAX_LENGTH - 9]
            if base:
                break
    else:
        base = "sso"
    digest = hashlib.sha256(f"{claims['iss']} {claims['sub']}".encode()).hexdigest()
    # The suffixes can be worked out by anyone who knows the `sub`, and so taken first: the last one is random.
    for name in (base, f"{base}-{digest[:8]}", f"{base[:50]}-{digest[:24]}", f"sso-{secrets.token_hex(12)}"):
        if (
            not audit.is_reserved(name)
            and db.session.scalar(select(User.id).where(func.lower(User.username) == name.lower())) is None
        ):
            return name
    raise SignInFailed(_("The sign-in could not be completed. Start again from the login page."))


def _with_userinfo(client: Any, token: Any, claims: Any) -> dict[str, Any]:
    """The ID token's claims, with the provider's userinfo for the same `sub` beside them (many providers put
    names and groups only there); the ID token's own claims win."""
    import requests
    from authlib.integrations.base_client.errors import OAuthError

    if not _metadata(client).get("userinfo_endpoint"):
        return dict(claims)
    try:
        info = client.userinfo(token=token)
    except (OAuthError, ValueError, requests.RequestException) as error:
        raise ProviderUnreachable from error
    return {**info, **claims} if info.get("sub") == claims["sub"] else dict(claims)


def _client() -> Any:
    oauth = current_app.extensions.get("authlib.integrations.flask_client")
    if oauth is None:
        abort(404)
    return oauth.create_client(PROVIDER)


def _metadata(client: Any) -> dict[str, Any]:
    """The provider's discovery document (read once per process); its issuer must be the configured one."""
    import requests

    try:
        metadata: dict[str, Any] = client.load_server_metadata()
    except (requests.RequestException, ValueError) as error:
        raise ProviderUnreachable from error
    if str(metadata.get("issuer", "")).rstrip("/") != _provider()["issuer"].rstrip("/"):
        current_app.logger.error("single sign-on: the discovery document names another issuer")
        raise ProviderUnreachable
    return metadata
