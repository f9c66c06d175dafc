"""The second factor: TOTP codes (RFC 6238, pyotp), secrets kept encrypted, and single-use recovery codes.

Secrets are encrypted with Fernet under a key derived from `SECRET_KEY` (HKDF), so the database alone gives no codes;
changing the key makes them unreadable (recovery codes or an admin reset then). A code is accepted in its step and
those either side, once only: the account keeps the last accepted step and one conditional UPDATE accepts only later
ones, so two requests racing with the same code cannot both win.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import re
import secrets
from typing import TYPE_CHECKING

import pyotp
from flask import current_app
from flask_babel import gettext
from markupsafe import Markup
from sqlalchemy import delete, func, or_, select, update

from petportal.clock import now
from petportal.data.models import RecoveryCode, SecondFactor, User
from petportal.data.unit_of_work import updated_one
from petportal.extensions import db

if TYPE_CHECKING:
    from cryptography.fernet import Fernet

log = logging.getLogger(__name__)
ISSUER = "Pet Portal"
# Codes from the step before and after the current one are accepted too.
STEP_WINDOW = 1
RECOVERY_CODE_COUNT = 10
# Ten characters of base 32: 50 random bits per recovery code.
RECOVERY_ALPHABET = "abcdefghijklmnopqrstuvwxyz234567"
RECOVERY_LENGTH = 10
# ASCII digits only: other scripts' digits would match \d, and compare_digest refuses non-ASCII text.
TOTP_PATTERN = re.compile(r"[0-9]{6}")


def new_secret() -> str:
    return pyotp.random_base32(32)


def encrypt(secret: str) -> str:
    return _fernet().encrypt(secret.encode()).decode()


def decrypt(token: str) -> str | None:
    """The secret encrypted in `token`, or None when it cannot be read (the secret key has changed)."""
    from cryptography.fernet import InvalidToken

    try:
        return _fernet().decrypt(token.encode()).decode()
    except (InvalidToken, ValueError):
        log.error("a second-factor secret cannot be decrypted: was PETPORTAL_SECRET_KEY changed?")
        return None


def qr_code(user: User, secret: str) -> Markup:
    import segno  # 9 MB, loaded by the first enrolment rather than in every worker at start-up

    uri = pyotp.TOTP(secret).provisioning_uri(name=user.username, issuer_name=ISSUER)
    title = gettext("QR code for your authenticator app")  # segno escapes it
    svg = segno.make(uri, error="m").svg_inline(scale=4, light="#fff", title=title)
    return Markup(svg)  # our own markup: the user name is percent-encoded inside the code's data


def step_of(secret: str, code: str) -> int | None:
    """The time step `code` belongs to, within the window around now, or None when it matches none."""
    code = _digits(code)
    if not TOTP_PATTERN.fullmatch(code):
        return None
    totp = pyotp.TOTP(secret)
    at = now()
    for offset in range(-STEP_WINDOW, STEP_WINDOW + 1):
        if hmac.compare_digest(totp.at(at, counter_offset=offset), code):
            return totp.timecode(at) + offset
    return None


def enrol(user: User, secret: str, code: str) -> list[str] | None:
    """Turn the second factor on with `secret` once `code` proves the app has it; the new recovery codes, or None."""
    step = step_of(secret, code)
    if step is None:
        return None
    user.mfa_secret = encrypt(secret)
    user.mfa_enabled_at = now()
    user.mfa_last_step = step
    db.session.execute(delete(RecoveryCode).where(RecoveryCode.user_id == user.id))
    codes: list[str] = []
    for _ in range(RECOVERY_CODE_COUNT):
        raw = "".join(secrets.choice(RECOVERY_ALPHABET) for _ in range(RECOVERY_LENGTH))
        codes.append(f"{raw[:5]}-{raw[5:]}")
        db.session.add(RecoveryCode(user_id=user.id, code_hash=_hash(raw)))
    return codes


def verify(user: User, code: str) -> SecondFactor | None:
    """Accept `code` for `user` once: the kind accepted (an app's code or a recovery code), None when refused."""
    if TOTP_PATTERN.fullmatch(_digits(code)):
        secret = decrypt(user.mfa_secret) if user.mfa_secret else None
        step = step_of(secret, code) if secret else None
        if step is None:
            return None
        accepted = updated_one(
            update(User)
            .where(User.id == user.id, or_(User.mfa_last_step.is_(None), User.mfa_last_step < step))
            .values(mfa_last_step=step)
        )
        return SecondFactor.TOTP if accepted else None
    used = updated_one(
        update(RecoveryCode)
        .where(RecoveryCode.user_id == user.id, RecoveryCode.code_hash == _hash(code), RecoveryCode.used_at.is_(None))
        .values(used_at=now())
    )
    return SecondFactor.RECOVERY if used else None


def remove(user: User) -> None:
    user.mfa_secret = None
    user.mfa_enabled_at = None
    user.mfa_last_step = None
    db.session.execute(delete(RecoveryCode).where(RecoveryCode.user_id == user.id))


def recovery_codes_left(user: User) -> int:
    unused = select(func.count()).where(RecoveryCode.user_id == user.id, RecoveryCode.used_at.is_(None))
    return db.session.scalar(unused) or 0


def _hash(code: str) -> str:
    """The SHA-256 of a recovery code as typed, ignoring case, spaces and dashes."""
    return hashlib.sha256(re.sub(r"[\s-]", "", code).lower().encode()).hexdigest()


def _digits(code: str) -> str:
    return re.sub(r"\s", "", code)


def _fernet() -> Fernet:
    """The cipher of the secrets (cryptography, 7 MB, imported by the first login that needs it)."""
    from cryptography.fernet import Fernet
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=b"petportal mfa secrets").derive(
        current_app.config["SECRET_KEY"].encode()
    )
    return Fernet(base64.urlsafe_b64encode(key))
