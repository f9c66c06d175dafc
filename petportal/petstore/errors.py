"""The one exception tree for everything that can go wrong talking to the pet store.

Every text an error carries is cleaned here, once: a store (or a gateway in front of it) may quote
the request's `Authorization` header back in its error message, so no message, code or URL leaves
this module with a key or anything shaped like a credential in it.
"""

import base64
import functools
import html
import json
import re
import unicodedata
from collections.abc import Iterable
from contextlib import suppress
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar
from urllib.parse import unquote

from confusable_homoglyphs.utils import load as load_confusables

MESSAGE_CHARS = 300
REDACTED = "[redacted]"
# A header that carries a credential, with its value (a scheme and a token, or a bare token).
_CREDENTIAL_HEADER = re.compile(
    r"\b(?:proxy-)?authorization\b[\"']?\s*[:=]\s*[\"']?(?:(?:bearer|basic|token|digest)\s+)?[^\s,;\"']+", re.IGNORECASE
)
# A scheme followed by its token, wherever it stands.
_SCHEME_TOKEN = re.compile(r"\b(?:bearer|basic|token)\s+[^\s,;\"']+", re.IGNORECASE)
# Anything long and token-shaped (API keys, JWTs, hashes), even without a label.
_TOKEN_LIKE = re.compile(r"[A-Za-z0-9_\-+/=.~]{24,}")
_USERINFO = re.compile(r"(?<=://)[^/@\s]+@")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]+")
_API_CODE = re.compile(r"[A-Za-z0-9_.\-]{1,64}")
# The client's own words (logged as they are; a page shows them in the visitor's language, petportal.web.error_pages).
WITHHELD = "The pet store's message was withheld: it quoted a credential."
# A secret counts as quoted when any run this long of it (or of its encodings) can be read back; a secret whose
# normal form is shorter counts when all of it can.
SECRET_RUN = 8
# A JSON escape: \uXXXX, or one of the one-letter escapes (\n, \t, \", ...).
_JSON_ESCAPE = re.compile(r'\\(?:u([0-9a-fA-F]{4})|([nrtbf"/\\]))')
_JSON_LETTERS = {"n": "\n", "r": "\r", "t": "\t", "b": "\b", "f": "\f", '"': '"', "/": "/", "\\": "\\"}
# Escapes inside escapes (a percent sign written as &#37;, say) are undone this many times over, at most.
_DECODING_ROUNDS = 3
# Unicode's tag characters spell ASCII invisibly: U+E0020..U+E007E are the printable ASCII characters plus this.
_TAG_OFFSET = 0xE0000
_TAG_CHARACTERS = {_TAG_OFFSET + code: chr(code) for code in range(0x20, 0x7F)}
_TAGGED = re.compile("[\U000e0020-\U000e007e]")
# Format and control characters and combining marks: what nobody reads.
_UNREAD = ("Cf", "Cc", "Mn", "Me")
# Letters and symbols that show as nothing, though Unicode files them as letters (the Hangul fillers) or symbols
# (the blank Braille pattern): Unicode's Default_Ignorable_Code_Point outside the categories above, and U+2800.
_BLANK = frozenset("\u115f\u1160\u17b4\u17b5\u2800\u3164\uffa0")
# A letter whatever its dress: "LATIN LETTER SMALL CAPITAL P", "NEGATIVE SQUARED LATIN CAPITAL LETTER P", "REGIONAL
# INDICATOR SYMBOL LETTER P" all read as "p" (where Unicode gives no decomposition to follow).
_DRESSED_LETTER = re.compile(
    "(?:LATIN LETTER SMALL CAPITAL|(?:[A-Z -]+ )?(?:LATIN (?:CAPITAL |SMALL )?|SYMBOL )LETTER) ([A-Z])"
)
# The planes that hold such letters and the characters above: the BMP and the Supplementary Multilingual Plane.
_LETTER_PLANES = range(0x80, 0x20000)
# Escapes of one byte or code point as Python's repr writes them (\x80, \U0001f600) and C's octal (\200).
_BYTE_ESCAPE = re.compile(r"\\(?:x([0-9a-fA-F]{2})|U([0-9a-fA-F]{8})|([0-3][0-7]{2}))")


def unread(char: str) -> bool:
    """Whether a person reading a text sees nothing of `char` (a format or control character, a combining mark, a
    filler that shows as blank): the key guard drops it, and a download looks past it for a formula's start."""
    return char in _BLANK or unicodedata.category(char) in _UNREAD


# How confusables.json keeps right-to-left glyphs: between left-to-right marks, which are no part of them.
_DIRECTION_MARKS = str.maketrans("", "", "\u200e\u200f")


def quotes_secret(text: str, secrets: Iterable[str]) -> bool:
    """Whether any part of a secret can be read back from `text`: the one guard for every text a pet store
    sends, in an answer or an error, before it is shown, written to a log or a file (see `SecretGuard`)."""
    return SecretGuard(tuple(secrets))(text)


class SecretGuard:
    """The guard for one set of secrets (a client keeps one; it is asked for every name on a page).

    Both sides are compared as a person reads them (`_normal_form`: escapes decoded, format and tag characters
    and combining marks dropped, look-alike letters folded to their Latin skeleton, case folded, separators
    dropped), so a key in Cyrillic look-alikes, with accents, split, spaced, escaped, in full-width letters or in
    another case is found; so is any run of SECRET_RUN characters of it (all of it when it is shorter), and the
    key reversed, in hex or in base64. What tag characters spell is read too. Letters interleaved with others
    are not (docs/security.md says so).
    """

    def __init__(self, secrets: tuple[str, ...]) -> None:
        pieces = _fragments(tuple(secret for secret in secrets if secret))
        # Pieces by length: runs of SECRET_RUN characters, and of fewer for a secret that is shorter.
        self._pieces = tuple(
            (length, frozenset(piece for piece in pieces if len(piece) == length))
            for length in sorted({len(piece) for piece in pieces})
        )
        if not self._pieces:
            return  # nothing to look for: the look-alike tables need not be read
        self._shortest = self._pieces[0][0]
        folding = _folding()
        # A short ASCII text can reach the shortest piece only if it has a character that grows ("m" is "rn").
        self._ascii_short = (self._shortest - 1) // folding.ascii_growth + 1
        self._grows = folding.growing.search

    def __call__(self, text: str) -> bool:
        """Whether `text` quotes one of the secrets."""
        if not self._pieces or not text:
            return False
        if text.isascii():
            if len(text) < self._ascii_short or (len(text) < self._shortest and not self._grows(text)):
                return False  # a short ASCII text whose normal form is shorter than any piece
            return self._found(_normal_form(text))
        return any(map(self._found, _readings(text)))

    def _found(self, normal: str) -> bool:
        for length, pieces in self._pieces:
            if not pieces.isdisjoint(normal[i : i + length] for i in range(len(normal) - length + 1)):
                return True
        return False


def _normal_form(text: str) -> str:
    """`text` as a person reads it, in the form the guard compares: escapes decoded, then `_folded`."""
    return _folded(_unescaped(text))


def _readings(text: str) -> list[str]:
    """The normal forms of what `text` says: as it shows; and where it has tag characters, with them read as the
    ASCII they spell, in place and on their own."""
    text = _unescaped(text)
    readings = [_folded(text)]
    if not text.isascii() and _TAGGED.search(text):
        readings.append(_normal_form(text.translate(_TAG_CHARACTERS)))
        readings.append(_normal_form("".join(_TAGGED.findall(text)).translate(_TAG_CHARACTERS)))
    return readings


def _unescaped(text: str) -> str:
    # Each step only where it can change something: most names are short plain ASCII, on the busiest page.
    for _ in range(_DECODING_ROUNDS):
        before = text
        if "\\" in text:
            text = _BYTE_ESCAPE.sub(_byte_unescaped, _JSON_ESCAPE.sub(_json_unescaped, text))
            # A character outside the BMP is escaped as two halves (\ud83d\ude00): join them as JSON does.
            text = text.encode("utf-16", "surrogatepass").decode("utf-16", "surrogatepass")
        if "%" in text:
            text = unquote(text)
        if "&" in text:
            text = html.unescape(text)
        if text == before:
            break
    return text


def _json_unescaped(escape: re.Match[str]) -> str:
    return chr(int(escape[1], 16)) if escape[1] else _JSON_LETTERS[escape[2]]


def _byte_unescaped(escape: re.Match[str]) -> str:
    code = int(escape[1] or escape[2], 16) if escape[1] or escape[2] else int(escape[3], 8)
    return chr(code) if code <= 0x10FFFF else escape[0]


def _folded(text: str) -> str:
    """The letters and digits of `text` as a person reads them: compatibility forms decomposed (NFKD), format
    characters (tags too) and combining marks dropped, look-alikes folded to their Latin skeleton (Unicode TR39)
    and case folded, until the text settles (twice at most: a Cyrillic capital em is "m", which reads as "rn")."""
    folding = _folding()
    if not text.isascii():
        text = unicodedata.normalize("NFKD", text)
        for _ in range(2):
            if text.isascii():
                break
            text = _fold_once(text, folding.lookalikes)
        else:
            text = "".join(filter(str.isalnum, text))
    return text.translate(folding.ascii)


@dataclass(frozen=True)
class _Folding:
    """Unicode's look-alikes, as `_folded` applies them."""

    # Each look-alike to its skeleton, and every other ASCII character to itself (which translates faster than
    # a character the table does not hold).
    lookalikes: dict[int, str]
    ascii: dict[int, str]  # each ASCII character to its settled form ("" for a separator)
    growing: re.Pattern[str]  # the ASCII characters whose settled form is longer than one character
    ascii_growth: int  # how many characters one ASCII character can become


def _fold_once(text: str, lookalikes: dict[int, str]) -> str:
    """`text` with each look-alike replaced by its skeleton, case folded, decomposed."""
    return unicodedata.normalize("NFKD", text.translate(lookalikes).casefold())


@functools.cache
def _folding() -> _Folding:
    """The look-alike tables, read from confusable-homoglyphs' copy of Unicode's confusables.txt once a process,
    when the first text is compared."""
    linked: dict[str, set[str]] = {}
    for glyph, confusables in load_confusables("confusables.json").items():
        partners = linked.setdefault(glyph.translate(_DIRECTION_MARKS), set())
        partners.update(confusable["c"].translate(_DIRECTION_MARKS) for confusable in confusables)
    # The library keeps each line of confusables.txt (a character and its prototype) in both directions. A
    # character with several partners is a prototype; one with one partner maps to it, unless that partner has
    # no other: then either may be the prototype, and the pair reads as the ASCII one or the lower code point.
    lookalikes: dict[int, str] = {code: chr(code) for code in range(128)}
    for glyph, partners in linked.items():
        if len(glyph) != 1 or len(partners) != 1:
            continue
        (partner,) = partners
        if len(partner) == 1 and linked.get(partner) == {glyph}:
            partner = min(glyph, partner, key=lambda char: (not char.isascii(), char))
        # ASCII punctuation ("|", "%") stays a separator, as a person reads it.
        if not (glyph.isascii() and not glyph.isalnum()):
            lookalikes[ord(glyph)] = partner
    # Small capitals, which the table keeps apart, read as their letters. Nobody reads format characters (zero-width
    # ones, tags) or combining marks: dropped in the same step, which is also faster than leaving them to the end.
    for code in (*_LETTER_PLANES, *range(_TAG_OFFSET, _TAG_OFFSET + 0x80)):
        if unread(chr(code)):
            lookalikes[code] = ""  # a combining letter too: it sits on another, which is what a person reads
        elif (name := unicodedata.name(chr(code), ""))[-2:-1] == " " and (found := _DRESSED_LETTER.fullmatch(name)):
            lookalikes[code] = found[1].lower()  # (only a name that ends in a lone letter is matched: 40 times faster)
        elif code not in lookalikes and (digit := unicodedata.digit(chr(code), None)) is not None:
            lookalikes[code] = str(digit)  # a digit of any script or dress ("❶") reads as its value
    for code, prototype in lookalikes.items():
        lookalikes[code] = prototype.translate(lookalikes)  # a prototype's own characters fold too
    settled: dict[int, str] = {}
    for code in range(128):
        text = chr(code)
        while (folded := _fold_once(text, lookalikes)) != text:
            text = folded
        settled[code] = "".join(filter(str.isalnum, text))
    growing = "".join(chr(code) for code, text in settled.items() if len(text) > 1)  # "m" reads as "rn"
    growth = max(map(len, settled.values()))
    return _Folding(lookalikes, settled, re.compile(f"[{re.escape(growing)}]"), growth)


@functools.lru_cache(maxsize=32)
def _fragments(secrets: tuple[str, ...]) -> frozenset[str]:
    """The pieces of the secrets to look for: every run of SECRET_RUN characters of each secret's normal form,
    reversed, hex and base64 (three alignments, and after "Bearer "); of a secret whose normal form is shorter,
    runs as long as that."""
    pieces: set[str] = set()
    for secret in secrets:
        length = min(SECRET_RUN, len(_normal_form(secret)))
        if not length:
            continue
        raw = secret.encode()
        # After "Bearer ", from the first base64 character that depends on the key alone.
        forms = [secret, secret[::-1], raw.hex(), base64.b64encode(b"Bearer " + raw).decode()[12:]]
        forms += [base64.b64encode(b"x" * offset + raw).decode()[4 if offset else 0 :] for offset in range(3)]
        for form in map(_normal_form, forms):
            pieces.update(form[i : i + length] for i in range(len(form) - length + 1))
    return frozenset(pieces)


def clean(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with every secret and credential-shaped part replaced, control characters removed, cut short.

    A text from which any part of a secret could be read back is withheld whole. Safe to show to people
    and to write to a log line; never rely on it to keep the text's meaning.
    """
    if not text:
        return text
    if quotes_secret(text, secrets):
        return WITHHELD
    text = _CREDENTIAL_HEADER.sub(f"Authorization: {REDACTED}", text)
    text = _SCHEME_TOKEN.sub(REDACTED, text)
    text = _USERINFO.sub("", text)
    text = _TOKEN_LIKE.sub(REDACTED, text)
    text = " ".join(_CONTROL.sub(" ", text).split())
    return text if len(text) <= MESSAGE_CHARS else text[: MESSAGE_CHARS - 1] + "…"


class StoreReason(StrEnum):
    """Why a pet store call gave no usable answer: a code with its values (`PetStoreError.message`, `.status`), put
    into words only where a page shows it (petportal.web.error_pages.store_words)."""

    STORE_SAID = "store_said"  # the store's own message (`message`, cleaned)
    WITHHELD = "withheld"  # the store's message quoted a credential
    STATUS = "status"  # an error status with no message of the API's
    UNUSABLE = "unusable"  # an answer outside the interface (`message`: the client's detail of what was wrong)
    TOO_LARGE = "too_large"
    TOO_SLOW = "too_slow"
    UNDECODABLE = "undecodable"
    CONNECTION_BROKE = "connection_broke"
    NO_ANSWER_IN_TIME = "no_answer_in_time"
    CONNECTION_FAILED = "connection_failed"
    NOT_REACHED = "not_reached"
    NO_TIME_LEFT = "no_time_left"
    TOO_BUSY = "too_busy"


class Outcome(StrEnum):
    """What a call's end means (`classify`): the error the client raises, what health and metrics count."""

    OK = "ok"
    REFUSED = "refused"  # 400: the values were refused
    KEY_REJECTED = "key_rejected"  # 401
    NOT_FOUND = "not_found"  # 404 to getPet
    GONE = "gone"  # 410: the operation is no longer offered
    UNAVAILABLE = "unavailable"  # nothing changed: try again
    BUSY = "busy"  # not sent: too many pages wait on the store already
    UNKNOWN = "unknown"  # a change may or may not have happened: never sent again
    UNUSABLE = "unusable"  # an answer outside the interface


# A read answered with one of these is sent again while time allows (the client's retry policy reads this).
RETRIED = frozenset({502, 503, 504})
STATUS_OUTCOMES = {400: Outcome.REFUSED, 401: Outcome.KEY_REJECTED, 404: Outcome.NOT_FOUND, 410: Outcome.GONE}


def classify(operation: str, status: int | None, *, usable: bool = True) -> Outcome:
    """What the end of a call to `operation` means: the one place that decides it. `status` is the answer's (None:
    none came once the request was sent), `usable` whether its body could be read as the interface defines.

    A change (createPet) is certain only for the answers the interface defines for it: 201, and 400 and 401 saying
    nothing was added. Any other end (no answer, 5xx, 429, a 418 from a gateway, an unreadable 201) may come after
    the store acted, so its outcome is unknown. A read's outcome never matters: 429 and 5xx only say to try again.
    """
    if operation == "createPet":
        if status in (400, 401):
            return STATUS_OUTCOMES[status]
        return Outcome.OK if status == 201 and usable else Outcome.UNKNOWN
    if status is None:
        return Outcome.UNAVAILABLE
    if not usable or (status == 404 and operation != "getPet"):
        return Outcome.UNUSABLE
    if 200 <= status < 300:
        return Outcome.OK
    if status in STATUS_OUTCOMES:
        return STATUS_OUTCOMES[status]
    return Outcome.UNAVAILABLE if status == 429 or status >= 500 else Outcome.UNUSABLE


class PetStoreError(Exception):
    """Base class: a pet store call did not give a usable answer, for a `reason`.

    Carries what an operator needs (status, the API's code, method and URL), and `message`: the store's own words
    or the client's detail, cleaned by `clean` with the calling client's secrets, so it never holds a key.
    """

    outcome: ClassVar[Outcome]

    def __init__(
        self,
        reason: StoreReason,
        message: str = "",
        *,
        status: int | None = None,
        code: object = None,
        method: str | None = None,
        url: str | None = None,
        secrets: Iterable[str] = (),
    ) -> None:
        message = clean(message, secrets)
        if message == WITHHELD:
            reason, message = StoreReason.WITHHELD, ""
        super().__init__(reason, message)
        self.reason = reason
        self.message = message
        self.status = status
        self.code = (
            code if isinstance(code, str) and _API_CODE.fullmatch(code) and clean(code, secrets) == code else None
        )
        self.method = method
        self.url = _USERINFO.sub("", url) if url else url

    def __str__(self) -> str:
        where = f" ({self.method} {self.url})" if self.method else ""
        status = f" [{self.status}{' ' + self.code if self.code else ''}]" if self.status else ""
        return f"{self.reason}{': ' + self.message if self.message else ''}{status}{where}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.reason!r}, {self.message!r}, status={self.status!r}, code={self.code!r})"

    @staticmethod
    def of(operation: str, reason: StoreReason, message: str = "", **details: Any) -> "PetStoreError":
        """The typed error for a call to `operation` that ended for `reason` (with the answer's `status` if one
        came), as `classify` reads it."""
        usable = reason not in (StoreReason.UNUSABLE, StoreReason.TOO_LARGE, StoreReason.UNDECODABLE)
        outcome = classify(operation, details.get("status"), usable=usable)
        return ERRORS[outcome](reason, message, **details)

    @staticmethod
    def from_status(
        status: int, body: bytes, *, operation: str, method: str, url: str, secrets: Iterable[str] = ()
    ) -> "PetStoreError":
        """The typed error for an answer that is no success, with the API's own code and message when it sent
        an Error."""
        code, reason, message = None, StoreReason.STATUS, ""
        with suppress(ValueError, RecursionError):
            record = json.loads(body)
            if isinstance(record, dict) and isinstance(record.get("message"), str):
                code, reason, message = record.get("code"), StoreReason.STORE_SAID, record["message"]
        details = {"status": status, "code": code, "method": method, "url": url, "secrets": secrets}
        return PetStoreError.of(operation, reason, message, **details)


class InvalidRequest(PetStoreError):
    """400: the store refused the request's values; `message` is the store's own explanation, cleaned."""

    outcome = Outcome.REFUSED


class Unauthorized(PetStoreError):
    """401: the store rejected this environment's key."""

    outcome = Outcome.KEY_REJECTED


class NotFound(PetStoreError):
    """404: no animal has this id."""

    outcome = Outcome.NOT_FOUND


class Gone(PetStoreError):
    """410: the store no longer offers this operation."""

    outcome = Outcome.GONE


class Unavailable(PetStoreError):
    """No usable answer, and nothing changed: a read that failed (refused, reset, timed out, rate-limited, a 5xx),
    or a change that never reached the store (refused connection, unknown host, TLS failure, no time left)."""

    outcome = Outcome.UNAVAILABLE


class Busy(Unavailable):
    """Not sent: so many pages already wait on the pet store that this one would only queue."""

    outcome = Outcome.BUSY


class OutcomeUnknown(PetStoreError):
    """A change reached the store, or may have, and no answer the interface defines came back: a timeout or
    reset after sending, a status it does not define (5xx, 429, ...) or an unreadable 201. It may or may not
    have happened, so it is never sent again."""

    outcome = Outcome.UNKNOWN


class UnexpectedResponse(PetStoreError):
    """The store answered something outside the interface: bad JSON, wrong shape, too large, a redirect."""

    outcome = Outcome.UNUSABLE


ERRORS: dict[Outcome, type[PetStoreError]] = {
    error.outcome: error
    for error in (InvalidRequest, Unauthorized, NotFound, Gone, Unavailable, Busy, OutcomeUnknown, UnexpectedResponse)
}
