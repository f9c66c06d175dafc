"""The password policy (OWASP ASVS 5.0, V6.2): long enough, any characters, and not a common password.

The common passwords are the 30,000 most frequent ones in zxcvbn's own list (from leaked password
sets), so the refusal list is a well-kept package's, not typed by hand here. Few of those are 12
characters long, so zxcvbn's estimate refuses the rest of the easily guessed ones (sequences,
repeats, keyboard walks, common words with substitutions): no composition rules.

zxcvbn and its lists (13 MB) load with the first password set, not in every worker at start-up: most
requests never set one."""

import secrets
from functools import cache

from flask_babel import gettext as _
from werkzeug.security import check_password_hash, generate_password_hash

from petportal.config import settings

MIN_LENGTH = 12
MAX_LENGTH = 128
# zxcvbn's score runs from 0 (guessed at once) to 4; 3 means "safely unguessable" online.
MIN_SCORE = 3
# zxcvbn refuses to score longer input; a password that long is judged by its first 72 characters.
ZXCVBN_MAX_LENGTH = 72


def problem(password: str) -> str | None:
    """What is wrong with `password` as a new password, in words for its owner (in the request's language), or
    None when it will do. zxcvbn's own feedback is not shown, so nothing here is left in English."""
    if len(password) < MIN_LENGTH:
        return _("Use at least %(count)s characters; a few words in a row make a good password.", count=MIN_LENGTH)
    if len(password) > MAX_LENGTH:
        return _("Use at most %(count)s characters.", count=MAX_LENGTH)
    if password.lower() in _common():
        return _("This password is one of the most common ones; choose another.")
    from zxcvbn import zxcvbn

    if zxcvbn(password[:ZXCVBN_MAX_LENGTH])["score"] < MIN_SCORE:
        return _("This password is easy to guess (a sequence, a repeat or a common word); choose another.")
    return None


@cache
def _common() -> frozenset[str]:
    from zxcvbn.frequency_lists import FREQUENCY_LISTS

    return frozenset(FREQUENCY_LISTS["passwords"])


def hashed(password: str) -> str:
    """A salted hash of `password` to store, made by the app's PASSWORD_HASH (config.py: scrypt)."""
    return generate_password_hash(password, settings().password_hash)


def matches(stored: str | None, password: str) -> bool:
    """Whether `stored` was made from `password`. With none stored (no such account, or a sign-on one) a stand-in is
    checked the same way and the answer is no, so timing tells nobody which kind of name was tried."""
    if stored is None:
        check_password_hash(_stand_in(settings().password_hash), password)
        return False
    return check_password_hash(stored, password)


@cache
def _stand_in(method: str) -> str:
    """A hash of a password nobody knows, made as `hashed` makes every stored one, so it costs as much to check."""
    return generate_password_hash(secrets.token_urlsafe(32), method)
