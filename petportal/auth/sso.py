"""Single sign-on through the company's OpenID Connect provider, with Authlib's Flask client.

Authlib does the protocol (discovery, code flow with PKCE, `state` and `nonce`, the ID token's checks). This module
adds that a `state` is used once whatever the answer, that the answer's `iss` is the provider's (RFC 9207), and what
a sign-in means here: the account keyed by issuer and `sub` (never a name), made at the first sign-in, its role read
again from the configured claim each time. Authlib and its dependencies are imported only where SSO is configured.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Protocol, cast

from flask import Flask, abort, current_app, request, session, url_for
from flask_babel import gettext as _
from sqlalchemy import delete, func, select
from werkzeug.wrappers import Response

from petportal.auth import logins
from petportal.auth.accounts import USERNAME_MAX_LENGTH
from petportal.clock import now
from petportal.config import EVERY_ENVIRONMENT, Environment, SingleSignOn, settings
from petportal.data import audit
from petportal.data.database import insert_into
from petportal.data.models import AuditAction, AuditDetail, Role, UsedLogoutToken, User
from petportal.data.payloads import Count, EnvironmentsChange, RoleDetails
from petportal.extensions import db
from petportal.web import security

if TYPE_CHECKING:
    from joserfc.jwk import KeySetSerialization

PROVIDER = "company"
DESTINATION_KEY = "sso_destination"
# The `amr` values (RFC 8176) that name a second factor: such a sign-in satisfies PETPORTAL_REQUIRE_ADMIN_MFA.
SECOND_FACTOR_METHODS = frozenset({"mfa", "otp", "hwk", "swk", "sms"})
SCOPE = "openid profile email"
# Unfinished sign-ins kept per browser (another tab's may still finish).
SIGN_INS_KEPT = 5
BACKCHANNEL_LOGOUT_EVENT = "http://schemas.openid.net/event/backchannel-logout"
# How old a logout token may be, and how far the provider's clock may be ahead of ours.
LOGOUT_TOKEN_AGE = timedelta(minutes=5)
TOKEN_LEEWAY = timedelta(minutes=2)
# The provider's keys (its JWKS) are fetched at most this often per process, for a token naming a key not among them
# too, and given up on after this many seconds: forged tokens naming unknown keys cost neither side anything.
KEYS_REFETCH = timedelta(minutes=1)
KEYS_TIMEOUT = 3.0
# The longest issuer or `sub` kept (users.sso_issuer, users.sso_subject; OpenID Connect's own limit).
IDENTIFIER_MAX_LENGTH = 255
NOT_IN_USERNAME = re.compile(r"[^A-Za-z0-9._@-]+")


class StateStore(Protocol):
    def clear_state_data(self, session: object, state: str | None) -> None: ...


class OAuthClient(Protocol):
    """What the portal calls of Authlib's client (Authlib has no types)."""

    server_metadata: dict[str, object]
    framework: StateStore

    def load_server_metadata(self) -> dict[str, object]: ...
    def fetch_jwk_set(self, force: bool = False) -> KeySetSerialization: ...
    def authorize_redirect(self, redirect_uri: str) -> Response: ...
    def authorize_access_token(self) -> dict[str, object]: ...
    def userinfo(self, *, token: object) -> dict[str, object]: ...


class SignInFailed(Exception):
    """A wrong, missing or used `state`, or a token the checks refuse: 400. The message is for the person."""


class SignInRefused(Exception):
    """The provider signed the person in, but the portal will not (no mapped role, a disabled account): 403."""


class LogoutRefused(Exception):
    """A back-channel logout token the checks refuse: 400. The message is the first failed check's code."""


class ProviderUnreachable(Exception):
    """The identity provider did not answer: 503."""


@dataclass(frozen=True)
class SignedIn:
    user: User
    second_factor: bool
    destination: str


@dataclass
class ProviderKeys:
    """The provider's key set, as Authlib's client keeps it, fetched again at most once a KEYS_REFETCH (one fetch at a
    time): in between, a token naming a key not among them is refused at once, and no thread waits on the provider."""

    fetched_at: datetime | None = None
    fetching: threading.Lock = field(default_factory=threading.Lock)

    def read(self, client: OAuthClient, force: bool) -> KeySetSerialization:
        """Authlib's `fetch_jwk_set`: the keys known, or (none known, or `force`) fetched when allowed."""
        import requests

        known = cast("KeySetSerialization | None", client.server_metadata.get("jwks"))
        if known and not force:
            return known
        if self.fetching.acquire(blocking=False):  # else another thread is fetching them: nobody waits for it
            try:
                at = now()
                if self.fetched_at is None or not self.fetched_at <= at < self.fetched_at + KEYS_REFETCH:
                    self.fetched_at = at
                    answer = requests.get(str(client.load_server_metadata().get("jwks_uri")), timeout=KEYS_TIMEOUT)
                    answer.raise_for_status()
                    known = client.server_metadata["jwks"] = answer.json()
            finally:
                self.fetching.release()
        if not known:
            raise ProviderUnreachable
        return known


def register(app: Flask) -> None:
    oidc = settings(app).single_sign_on
    if oidc is None:
        return
    from authlib.integrations.flask_client import FlaskOAuth2App, OAuth

    keys = ProviderKeys()

    class Client(FlaskOAuth2App):  # type: ignore[misc]  # Authlib has no types
        """Authlib's client, its ID tokens' and logout tokens' keys read through `keys`."""

        def fetch_jwk_set(self, force: bool = False) -> KeySetSerialization:
            return keys.read(self, force)

    timeout = settings(app).upstream_timeout
    OAuth(app).register(
        PROVIDER,
        client_cls=Client,
        client_id=oidc.client_id,
        client_secret=oidc.client_secret,
        server_metadata_url=oidc.issuer.rstrip("/") + "/.well-known/openid-configuration",
        client_kwargs={"scope": SCOPE, "code_challenge_method": "S256", "default_timeout": timeout},
    )


def _provider() -> SingleSignOn:
    """The identity provider's settings, where a sign-in is under way (`register` offers it only then)."""
    oidc = settings().single_sign_on
    assert oidc is not None
    return oidc


def provider_name() -> str | None:
    oidc = settings().single_sign_on
    return None if oidc is None else oidc.name


def begin(destination: str) -> Response:
    client = _client()
    endpoint = _metadata(client).get("authorization_endpoint")
    if not isinstance(endpoint, str):
        raise ProviderUnreachable
    security.allow_location(endpoint)
    _forget_older_sign_ins()
    session[DESTINATION_KEY] = destination
    return client.authorize_redirect((settings().public_url or "") + url_for("auth.sso_callback"))


def _forget_older_sign_ins() -> None:
    """Keep only this browser's latest sign-ins' state (Authlib keeps each an hour), so no session grows unbounded."""
    prefix = f"_state_{PROVIDER}_"
    started = sorted(
        (key for key in session if key.startswith(prefix)),
        key=lambda key: session[key].get("exp", 0) if isinstance(session[key], dict) else 0,
    )
    for key in started[: max(0, len(started) - (SIGN_INS_KEPT - 1))]:
        session.pop(key, None)


def signed_in() -> SignedIn:
    """The callback: exchange the code, check the ID token, find or make the account and read its role."""
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
        # The provider's error, a code it would not exchange, or an ID token that fails a check: its text not shown.
        current_app.logger.warning("single sign-on refused: %s", type(error).__name__)
        raise SignInFailed(_("The sign-in could not be completed. Start again from the login page.")) from error
    except requests.RequestException as error:
        raise ProviderUnreachable from error
    finally:
        # Used once whatever the answer: Authlib keeps the state when the provider answers with an `error`.
        client.framework.clear_state_data(session, state)
    claims = token.get("userinfo")
    if not isinstance(claims, dict) or not _fits(claims.get("sub")) or not _fits(claims.get("iss")):
        raise SignInFailed(_("The sign-in could not be completed. Start again from the login page."))
    claims = _with_userinfo(client, token, claims)
    oidc = _provider()
    user = _account(claims, role_for(claims.get(oidc.role_claim)), environments_for(claims, oidc))
    methods = claims.get("amr")
    second_factor = isinstance(methods, list) and any(method in SECOND_FACTOR_METHODS for method in methods)
    destination = session.pop(DESTINATION_KEY, None)
    return SignedIn(
        user, second_factor, destination if isinstance(destination, str) else url_for("catalog.list_animals")
    )


def _from_the_issuer(metadata: dict[str, object]) -> bool:
    """Whether the answer's `iss` (RFC 9207; required where the provider says it sends one) is the provider's."""
    answered = request.args.get("iss")
    if answered is None:
        return metadata.get("authorization_response_iss_parameter_supported") is not True
    return answered == metadata.get("issuer")


def logged_out(logout_token: str) -> None:
    """Back-Channel Logout 1.0: the person's session at the provider ended, so every open login of theirs ends."""
    client = _client()  # first: without single sign-on, a 404 that loads nothing
    metadata = _metadata(client)
    claims = _logout_claims(client, metadata, logout_token)
    jti, issued = claims["jti"], claims["iat"]
    assert isinstance(jti, str) and isinstance(issued, int | float)  # as _logout_claims checked
    if not _first_use(jti, issued):
        raise LogoutRefused("replayed")
    subject = claims.get("sub")
    if subject is None:
        # The portal keeps no provider session ids (`sid`), only the account's: a token naming no `sub` ends nothing.
        raise LogoutRefused("no_sub")
    user = db.session.scalar(select(User).filter_by(sso_issuer=str(metadata["issuer"]), sso_subject=subject))
    if user is None:
        return  # nobody here: nothing to end, and the provider is told it is done
    ended = Count(code=AuditDetail.SIGN_ON_LOGOUT, count=len(logins.open_logins(user.id)))
    logins.end_all(user.id)
    audit.record(AuditAction.SESSIONS_ENDED, actor=user.username, target=user.username, detail=ended)


def _logout_claims(client: OAuthClient, metadata: dict[str, object], logout_token: str) -> dict[str, object]:
    """The claims of a logout token once every check of the specification (2.6) holds."""
    import requests
    from joserfc import jwt
    from joserfc.errors import InvalidKeyIdError, JoseError
    from joserfc.jwk import KeySet
    from joserfc.jws import JWSRegistry

    supported = metadata.get("id_token_signing_alg_values_supported")
    algorithms = [name for name in supported if name != "none"] if isinstance(supported, list) else ["RS256"]
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
    claims: dict[str, object] = dict(token.claims)
    audience = claims.get("aud")
    audiences = audience if isinstance(audience, list) else [audience]
    issued, expires, events = claims.get("iat"), claims.get("exp"), claims.get("events")
    at, leeway, oldest = now().timestamp(), TOKEN_LEEWAY.total_seconds(), LOGOUT_TOKEN_AGE.total_seconds()
    failed = {
        "iss": claims.get("iss") != metadata.get("issuer"),
        "aud": _provider().client_id not in audiences,
        # Each bound written as what holds, so that a time that is no number (NaN) fails it.
        "iat": not isinstance(issued, int | float) or not at - oldest <= issued <= at + leeway,
        "exp": expires is not None and (not isinstance(expires, int | float) or not expires >= at - leeway),
        "events": not isinstance(events, dict) or not isinstance(events.get(BACKCHANNEL_LOGOUT_EVENT), dict),
        "jti": not _fits(claims.get("jti")),
        "sub_or_sid": not (_fits(claims.get("sub")) or _fits(claims.get("sid"))),
        "sub": "sub" in claims and not _fits(claims["sub"]),
        "nonce": "nonce" in claims,
    }
    if refused := next((check for check, fails in failed.items() if fails), None):
        raise LogoutRefused(refused)
    return claims


def _first_use(jti: str, issued: float) -> bool:
    """Whether a logout token's `jti` is new here: then kept (with the request's commit) until the token's `iat` is too
    old for it to be taken, so its replay to any process or instance is refused. Expired ones are deleted first."""
    db.session.execute(delete(UsedLogoutToken).where(UsedLogoutToken.expires_at < now()))
    kept_until = datetime.fromtimestamp(issued, UTC) + LOGOUT_TOKEN_AGE
    new = insert_into(UsedLogoutToken).values(jti=jti, expires_at=kept_until).on_conflict_do_nothing()
    return db.session.execute(new.returning(UsedLogoutToken.jti)).first() is not None


def role_for(values: object) -> Role | None:
    """The role that the claim's `values` (a string or a list) give: admin, staff, or None (no mapped value)."""
    listed = [values] if isinstance(values, str) else values if isinstance(values, list) else []
    found = {value for value in listed if isinstance(value, str)}
    oidc = _provider()
    if found & oidc.admin_values:
        return Role.ADMIN
    if found & oidc.staff_values:
        return Role.STAFF
    return None


def environments_for(claims: dict[str, object], oidc: SingleSignOn) -> frozenset[Environment] | None:
    """The environments the claim PETPORTAL_OIDC_ENVIRONMENTS_CLAIM gives: both when no claim is configured; None
    when it names neither."""
    if oidc.environments_claim is None:
        return EVERY_ENVIRONMENT
    values = claims.get(oidc.environments_claim)
    found = [values] if isinstance(values, str) else values if isinstance(values, list) else []
    return frozenset(name for name in Environment if name in found) or None


def _account(claims: dict[str, object], role: Role | None, environments: frozenset[Environment] | None) -> User:
    """The account of this issuer and `sub`, made at the first sign-in, with `role` and `environments`; refused
    (and audited) without a role or an environment, or when disabled."""
    issuer, subject = str(claims["iss"]), str(claims["sub"])
    user = db.session.scalar(select(User).filter_by(sso_issuer=issuer, sso_subject=subject))
    name = user.username if user is not None else _username(claims)
    if role is None:
        audit.record(AuditAction.LOGIN_REFUSED, actor=name, detail=AuditDetail.NO_ROLE_CLAIM)
        raise SignInRefused(
            _("Your account at the company's sign-in gives you no access to this portal. Ask an admin.")
        )
    if environments is None:
        audit.record(AuditAction.LOGIN_REFUSED, actor=name, detail=AuditDetail.NO_ENVIRONMENT_CLAIM)
        raise SignInRefused(
            _("Your account at the company's sign-in gives you no environment of this portal. Ask an admin.")
        )
    if user is None:
        user = User(
            username=name,
            role=role,
            environments=environments,
            password_hash=None,
            sso_issuer=issuer,
            sso_subject=subject,
        )
        db.session.add(user)
        db.session.flush()
        created = RoleDetails(code=AuditDetail.CREATED_BY_SIGN_ON, role=role)
        audit.record(AuditAction.USER_CREATED, actor=name, target=name, detail=created)
        return user

    if not user.enabled:
        audit.record(AuditAction.LOGIN_REFUSED, actor=name, detail=AuditDetail.ACCOUNT_DISABLED)
        raise SignInRefused(_("This account is disabled. Ask an admin to enable it."))
    # What the claims say now wins, audited: the role, and the environments.
    if user.role != role:
        changed = RoleDetails(code=AuditDetail.ROLE_CHANGED_BY_SIGN_ON, previous=user.role, role=role)
        audit.record(AuditAction.ROLE_CHANGED, actor=name, target=name, detail=changed)
        user.role = role
    if user.environments != environments:
        moved = EnvironmentsChange(
            code=AuditDetail.ENVIRONMENTS_BY_SIGN_ON, previous=user.environments, environments=environments
        )
        audit.record(AuditAction.ENVIRONMENTS_CHANGED, actor=name, target=name, detail=moved)
        user.environments = environments
    return user


def _fits(value: object) -> bool:
    return isinstance(value, str) and 0 < len(value) <= IDENTIFIER_MAX_LENGTH


def _username(claims: dict[str, object]) -> str:
    """A new account's name from the preferred name, e-mail or `sub`; when taken, with a suffix from the `sub`."""
    texts = [text for claim in ("preferred_username", "email", "sub") if isinstance(text := claims.get(claim), str)]
    bases = [NOT_IN_USERNAME.sub("-", text).strip(".-_@")[: USERNAME_MAX_LENGTH - 9] for text in texts]
    base = next((base for base in bases if base), "sso")
    digest = hashlib.sha256(f"{claims['iss']} {claims['sub']}".encode()).hexdigest()
    # The suffixes can be worked out by anyone who knows the `sub`, and so taken first: the last one is random.
    for name in (base, f"{base}-{digest[:8]}", f"{base[:50]}-{digest[:24]}", f"sso-{secrets.token_hex(12)}"):
        if (
            not audit.is_reserved(name)
            and db.session.scalar(select(User.id).where(func.lower(User.username) == name.lower())) is None
        ):
            return name
    raise SignInFailed(_("The sign-in could not be completed. Start again from the login page."))


def _with_userinfo(client: OAuthClient, token: object, claims: dict[str, object]) -> dict[str, object]:
    """The ID token's claims over the provider's userinfo for the same `sub` (many put groups only there)."""
    import requests
    from authlib.integrations.base_client.errors import OAuthError

    if not _metadata(client).get("userinfo_endpoint"):
        return dict(claims)
    try:
        info = client.userinfo(token=token)
    except (OAuthError, ValueError, requests.RequestException) as error:
        raise ProviderUnreachable from error
    return {**info, **claims} if info.get("sub") == claims["sub"] else dict(claims)


def _client() -> OAuthClient:
    oauth = current_app.extensions.get("authlib.integrations.flask_client")
    if oauth is None:
        abort(404)
    return cast(OAuthClient, oauth.create_client(PROVIDER))


def _metadata(client: OAuthClient) -> dict[str, object]:
    import requests

    try:
        metadata: dict[str, object] = client.load_server_metadata()
    except (requests.RequestException, ValueError) as error:
        raise ProviderUnreachable from error
    if str(metadata.get("issuer", "")).rstrip("/") != _provider().issuer.rstrip("/"):
        current_app.logger.error("single sign-on: the discovery document names another issuer")
        raise ProviderUnreachable
    return metadata
