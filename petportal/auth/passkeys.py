"""Passkeys (WebAuthn), with the `webauthn` package: registering one, signing in with one, removing one.

The relying party is PETPORTAL_PUBLIC_URL's host and origin. Passkeys are discoverable and prefer user verification.
A ceremony's challenge lives in the session for CHALLENGE_SECONDS and is taken out when its answer arrives (used at
most once). The package (about 13 MB with its dependencies) is imported by the first ceremony, never at start-up.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from flask import current_app, session
from flask_babel import gettext as _
from sqlalchemy import exists, func, select

from petportal.clock import now
from petportal.config import settings
from petportal.data.models import Passkey, User
from petportal.extensions import db

if TYPE_CHECKING:
    from webauthn.helpers.structs import (
        PublicKeyCredentialCreationOptions,
        PublicKeyCredentialDescriptor,
        PublicKeyCredentialRequestOptions,
    )

CHALLENGE_KEY = "passkey_challenge"
# The largest row id a database gives a passkey (a 32-bit integer column).
PASSKEY_ID_MAX = 2**31 - 1
# A credential id as the browser sends it: base64url of at most 1023 bytes (WebAuthn's limit).
CREDENTIAL_ID_MAX_BYTES = 1023
CREDENTIAL_ID = re.compile(r"[A-Za-z0-9_-]{1,1364}", re.ASCII)
CHALLENGE_SECONDS = 300
NAME_MAX_LENGTH = 80
# How long a browser may take over a ceremony (the person finds their authenticator), in milliseconds.
CEREMONY_MILLISECONDS = 120_000


class PasskeyError(Exception):
    """A refused ceremony; the message is for the person. `account`: whose passkey, once a signature showed it."""

    def __init__(self, message: str, account: str | None = None) -> None:
        super().__init__(message)
        self.account = account


def relying_party() -> tuple[str, str]:
    public_url = settings().public_url
    if not public_url:
        raise PasskeyError(_("Passkeys are not set up on this portal (PETPORTAL_PUBLIC_URL)."))
    return str(urlsplit(public_url).hostname), public_url


def registration_options(user: User) -> str:
    rp_id, _origin = relying_party()  # first: where passkeys are not set up, a refusal that loads nothing
    from webauthn import generate_registration_options
    from webauthn.helpers import structs

    options = generate_registration_options(
        rp_id=rp_id,
        rp_name="Pet Portal",
        user_name=user.username,
        user_id=_handle(user),
        timeout=CEREMONY_MILLISECONDS,
        authenticator_selection=structs.AuthenticatorSelectionCriteria(
            resident_key=structs.ResidentKeyRequirement.REQUIRED,
            user_verification=structs.UserVerificationRequirement.PREFERRED,
        ),
        exclude_credentials=_descriptors(user),
    )
    return _issued(options, "register", user)


def register(user: User, credential: object, name: str) -> Passkey:
    from webauthn import verify_registration_response
    from webauthn.helpers import bytes_to_base64url

    name = _readable(name)
    if len(name) > NAME_MAX_LENGTH:  # refused, never cut: the name kept is the name typed
        raise PasskeyError(too_long_name())
    name = name or _("Passkey")
    challenge = _take("register", user)
    rp_id, origin = relying_party()
    try:
        verified = verify_registration_response(
            credential=_as_json(credential), expected_challenge=challenge, expected_rp_id=rp_id, expected_origin=origin
        )
    except _unreadable() as error:
        current_app.logger.info("passkey registration refused: %s", type(error).__name__)
        raise PasskeyError(_("That passkey could not be added. Try again.")) from error
    if len(verified.credential_id) > CREDENTIAL_ID_MAX_BYTES:
        raise PasskeyError(_("That passkey could not be added. Try again."))
    credential_id = bytes_to_base64url(verified.credential_id)
    if db.session.scalar(select(exists().where(Passkey.credential_id == credential_id))):
        raise PasskeyError(_("That passkey is registered already."))
    passkey = Passkey(
        user_id=user.id,
        credential_id=credential_id,
        public_key=verified.credential_public_key,
        sign_count=verified.sign_count,
        name=name,
        backup_eligible=verified.credential_device_type == "multi_device",
        backed_up=verified.credential_backed_up,
    )
    db.session.add(passkey)
    return passkey


def authentication_options(user: User | None = None) -> str:
    """The options for signing in with any passkey, or, as `user`'s second step, one of theirs."""
    rp_id, _origin = relying_party()  # as above
    from webauthn import generate_authentication_options
    from webauthn.helpers.structs import UserVerificationRequirement

    options = generate_authentication_options(
        rp_id=rp_id,
        timeout=CEREMONY_MILLISECONDS,
        allow_credentials=_descriptors(user) if user is not None else None,
        user_verification=UserVerificationRequirement.PREFERRED,
    )
    return _issued(options, "sign_in", user)


def authenticate(credential: object, user: User | None = None) -> tuple[Passkey, User]:
    """The passkey that signed this session's challenge (for `user`'s second step, one of theirs), updated; its owner.
    Alone it must have verified its user (it is then both factors); after a password, presence is enough. Refused:
    a disabled account's, and, alone, a single sign-on account's (the provider decides its access)."""
    from webauthn import verify_authentication_response
    from webauthn.helpers import bytes_to_base64url

    challenge = _take("sign_in", user)
    refused = PasskeyError(_("That passkey was not accepted. Try again, or log in another way."))
    try:
        answer = json.loads(_as_json(credential))
        credential_id = answer["id"]
    except (ValueError, TypeError, KeyError, RecursionError) as error:
        raise refused from error
    if not isinstance(credential_id, str) or not CREDENTIAL_ID.fullmatch(credential_id):
        raise refused
    passkey = db.session.scalar(select(Passkey).where(Passkey.credential_id == credential_id))
    if passkey is None or (user is not None and passkey.user_id != user.id):
        raise refused
    handle = answer.get("response", {}).get("userHandle") if isinstance(answer.get("response"), dict) else None
    owner = db.session.get(User, passkey.user_id)
    if owner is None or (handle and handle != bytes_to_base64url(_handle(owner))):
        raise refused
    rp_id, origin = relying_party()
    try:
        verified = verify_authentication_response(
            credential=_as_json(credential),
            expected_challenge=challenge,
            expected_rp_id=rp_id,
            expected_origin=origin,
            credential_public_key=passkey.public_key,
            credential_current_sign_count=passkey.sign_count,
            require_user_verification=user is None,
        )
    except _unreadable() as error:
        current_app.logger.info("passkey sign-in refused: %s", type(error).__name__)
        raise refused from error
    # Only now, with its signature checked, does the answer say whose passkey it is.
    if not owner.enabled:
        raise PasskeyError(_("This account is disabled. Ask an admin to enable it."), owner.username)
    if user is None and owner.is_sso:
        raise PasskeyError(
            _("Your account signs in with the company's sign-in; use your passkey after it."), owner.username
        )
    passkey.sign_count = verified.new_sign_count
    passkey.backed_up = verified.credential_backed_up
    passkey.last_used_at = now()
    return passkey, owner


def of_account(user: User) -> list[Passkey]:
    return list(db.session.scalars(select(Passkey).where(Passkey.user_id == user.id).order_by(Passkey.id)))


def count(user: User) -> int:
    return int(db.session.scalar(select(func.count()).where(Passkey.user_id == user.id)) or 0)


def has_second_factor(user: User) -> bool:
    """Whether the account has a second factor of the portal's own: an app's codes, or a passkey."""
    return user.mfa_enabled or count(user) > 0


def remove(user: User, passkey_id: int, second_factor_required: bool) -> Passkey:
    """Remove one of `user`'s passkeys; the last second factor is refused when one is required."""
    mine = select(Passkey).where(Passkey.id == passkey_id, Passkey.user_id == user.id)
    passkey = db.session.scalar(mine) if passkey_id <= PASSKEY_ID_MAX else None  # a path's id: any number of digits
    if passkey is None:
        raise PasskeyError(_("There is no such passkey on your account."))
    if second_factor_required and not user.mfa_enabled and count(user) <= 1:
        raise PasskeyError(
            _("This is your only second factor, which admins must have. Add another passkey or an app first.")
        )
    db.session.delete(passkey)
    return passkey


def accounts_with_passkeys() -> set[int]:
    return set(db.session.scalars(select(Passkey.user_id).distinct()))


def too_long_name() -> str:
    """What a passkey's name longer than NAME_MAX_LENGTH is told (the page's script says it before the ceremony)."""
    return _("Name the passkey in at most %(count)s characters.", count=NAME_MAX_LENGTH)


def _unreadable() -> tuple[type[BaseException], ...]:
    """The errors of a malformed answer: the package's own, and its parser's."""
    from webauthn.helpers.exceptions import WebAuthnException

    return (WebAuthnException, ValueError, TypeError, LookupError, RecursionError)


def _readable(name: object) -> str:
    """A passkey's name on one line, without control characters, lone surrogates or direction overrides."""
    text = " ".join(str(name or "").split())
    return "".join(char for char in text if unicodedata.category(char) not in ("Cc", "Cf", "Cs", "Co", "Cn"))


def _handle(user: User) -> bytes:
    return str(user.id).encode()


def _descriptors(user: User) -> list[PublicKeyCredentialDescriptor]:
    from webauthn.helpers import base64url_to_bytes
    from webauthn.helpers.structs import PublicKeyCredentialDescriptor

    return [PublicKeyCredentialDescriptor(id=base64url_to_bytes(passkey.credential_id)) for passkey in of_account(user)]


def _issued(
    options: PublicKeyCredentialCreationOptions | PublicKeyCredentialRequestOptions, purpose: str, user: User | None
) -> str:
    """`options` as JSON for the browser, their challenge kept in the session for `purpose` (and `user`)."""
    from webauthn import options_to_json
    from webauthn.helpers import bytes_to_base64url

    challenge, user_id = bytes_to_base64url(options.challenge), user.id if user is not None else None
    session[CHALLENGE_KEY] = {"challenge": challenge, "purpose": purpose, "user_id": user_id, "at": now().timestamp()}
    return str(options_to_json(options))


def _take(purpose: str, user: User | None) -> bytes:
    kept = session.pop(CHALLENGE_KEY, None)
    if (
        not isinstance(kept, dict)
        or kept.get("purpose") != purpose
        or kept.get("user_id") != (user.id if user is not None else None)
        or now().timestamp() - float(kept.get("at", 0)) > CHALLENGE_SECONDS
    ):
        raise PasskeyError(_("That took too long, or was started in another tab. Try again."))
    from webauthn.helpers import base64url_to_bytes

    return base64url_to_bytes(str(kept["challenge"]))


def _as_json(credential: object) -> str:
    if isinstance(credential, str):
        return credential
    if not isinstance(credential, dict):
        raise TypeError("a credential is a JSON object")
    return json.dumps(credential)
