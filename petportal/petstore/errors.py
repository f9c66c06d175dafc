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
from urllib.parse import unquote

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
# The client's own words (logged as they are; a page shows them in the visitor's language, petportal.errors).
WITHHELD = "The pet store's message was withheld: it quoted a credential."
ANSWERED_WITH_STATUS = "The store answered with status {status}."
# A secret counts as quoted when any run this long of it (or of its encodings) can be read back.
SECRET_RUN = 8
_JSON_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})")


def quotes_secret(text: str, secrets: Iterable[str]) -> bool:
    """Whether any part of a secret can be read back from `text`: the one guard for every text a pet store
    sends, in an answer or an error, before it is shown, written to a log or a file (see `SecretGuard`)."""
    return SecretGuard(tuple(secrets))(text)


class SecretGuard:
    """The guard for one set of secrets (a client keeps one; it is asked for every name on a page).

    Both sides are compared in one normal form (JSON, URL and HTML escapes decoded, Unicode NFKC, case folded,
    everything but letters and digits removed), so a key split, spaced, percent- or JSON-escaped, written in
    full-width letters or in another case is found; so is any run of SECRET_RUN characters of it, and the key
    reversed, in hex or in base64. Letters interleaved with others are not (the README says so).
    """

    def __init__(self, secrets: tuple[str, ...]) -> None:
        self._fragments = _fragments(tuple(secret for secret in secrets if len(secret) >= SECRET_RUN))

    def __call__(self, text: str) -> bool:
        """Whether `text` quotes one of the secrets."""
        if not self._fragments or not text or (len(text) < SECRET_RUN and text.isascii()):
            return False  # a short ASCII text has no run long enough, and no normal form longer than itself
        normal = _normal_form(text)
        runs = (normal[i : i + SECRET_RUN] for i in range(len(normal) - SECRET_RUN + 1))
        return not self._fragments.isdisjoint(runs)


def _normal_form(text: str) -> str:
    # Each step only where it can change something: most names are short plain ASCII, on the busiest page.
    if "\\" in text:
        text = _JSON_ESCAPE.sub(lambda match: chr(int(match[1], 16)), text)
    if "%" in text:
        text = unquote(unquote(text))
    if "&" in text:
        text = html.unescape(text)
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text)
    return "".join(filter(str.isalnum, text.casefold()))


@functools.lru_cache(maxsize=32)
def _fragments(secrets: tuple[str, ...]) -> frozenset[str]:
    """Every run of SECRET_RUN characters of each secret's normal form, reversed, hex and base64 (three alignments,
    and after "Bearer ")."""
    runs: set[str] = set()
    for secret in secrets:
        raw = secret.encode()
        # After "Bearer ", from the first base64 character that depends on the key alone.
        forms = [secret, secret[::-1], raw.hex(), base64.b64encode(b"Bearer " + raw).decode()[12:]]
        forms += [base64.b64encode(b"x" * offset + raw).decode()[4 if offset else 0 :] for offset in range(3)]
        for form in map(_normal_form, forms):
            runs.update(form[i : i + SECRET_RUN] for i in range(len(form) - SECRET_RUN + 1))
    return frozenset(runs)


def clean(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with every secret and credential-shaped part replaced, control characters removed, cut short.

    A text from which any part of a secret could be read back is withheld whole. Safe to show to people
    and to write to a log line; never rely on it to keep the text's meaning.
    """
    if not text:
        return text
    if quotes_secret(text, secrets):
        return WITHHELD
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    text = _CREDENTIAL_HEADER.sub(f"Authorization: {REDACTED}", text)
    text = _SCHEME_TOKEN.sub(REDACTED, text)
    text = _USERINFO.sub("", text)
    text = _TOKEN_LIKE.sub(REDACTED, text)
    text = " ".join(_CONTROL.sub(" ", text).split())
    return text if len(text) <= MESSAGE_CHARS else text[: MESSAGE_CHARS - 1] + "…"


class PetStoreError(Exception):
    """Base class: a pet store call did not give a usable answer.

    Carries what an operator needs (status, the API's code, method and URL), every text cleaned by
    `clean` with the calling client's secrets, so it never holds a key.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: object = None,
        method: str | None = None,
        url: str | None = None,
        secrets: Iterable[str] = (),
    ) -> None:
        message = clean(message, secrets)
        super().__init__(message)
        self.message = message
        self.status = status
        self.code: str | None
        self.code = (
            code if isinstance(code, str) and _API_CODE.fullmatch(code) and clean(code, secrets) == code else None
        )
        self.method = method
        self.url = _USERINFO.sub("", url) if url else url

    def __str__(self) -> str:
        where = f" ({self.method} {self.url})" if self.method else ""
        status = f" [{self.status}{' ' + self.code if self.code else ''}]" if self.status else ""
        return f"{self.message}{status}{where}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, status={self.status!r}, code={self.code!r})"

    @staticmethod
    def from_status(
        status: int, body: bytes, *, operation: str, method: str, url: str, secrets: Iterable[str] = ()
    ) -> "PetStoreError":
        """The typed error for a non-2xx answer, with the API's own code and message when it sent an Error."""
        code, message = None, ANSWERED_WITH_STATUS.format(status=status)
        try:
            record = json.loads(body)
            if isinstance(record, dict) and isinstance(record.get("message"), str):
                code = record.get("code")
                message = record["message"]
        except (ValueError, RecursionError):
            pass
        error_class = classify(operation, status)
        return error_class(message, status=status, code=code, method=method, url=url, secrets=secrets)


def classify(operation: str, status: int) -> type[PetStoreError]:
    """What a non-2xx answer to `operation` means: the one place that decides it.

    A change (createPet) is certain only for the answers the interface defines for it: 400 and 401 say
    nothing was added. Any other answer (5xx, 429, a 418 from a gateway) may come after the store acted,
    so its outcome is unknown. A read's outcome never matters: 429 and 5xx only say to try again.
    """
    if status in CERTAIN_REFUSALS.get(operation, ()):
        return STATUS_ERRORS[status]
    if operation in CHANGES:
        return OutcomeUnknown
    if status == 404 and operation != "getPet":
        return UnexpectedResponse
    if status in STATUS_ERRORS:
        return STATUS_ERRORS[status]
    if status == 429 or status >= 500:
        return Unavailable
    return UnexpectedResponse


class InvalidRequest(PetStoreError):
    """400: the store refused the request's values; `message` is the store's own explanation, cleaned."""


class Unauthorized(PetStoreError):
    """401: the store rejected this environment's key."""


class NotFound(PetStoreError):
    """404: no animal has this id."""


class Gone(PetStoreError):
    """410: the store no longer offers this operation."""


class Unavailable(PetStoreError):
    """No usable answer, and nothing changed: a read that failed (refused, reset, timed out, rate-limited, a 5xx),
    or a change that never reached the store (refused connection, unknown host, TLS failure, no time left)."""


class Busy(Unavailable):
    """Not sent: so many pages already wait on the pet store that this one would only queue."""


class OutcomeUnknown(PetStoreError):
    """A change reached the store, or may have, and no answer the interface defines came back: a timeout or
    reset after sending, a status it does not define (5xx, 429, ...) or an unreadable 201. It may or may not
    have happened, so it is never sent again."""


class UnexpectedResponse(PetStoreError):
    """The store answered something outside the interface: bad JSON, wrong shape, too large, a redirect."""


STATUS_ERRORS: dict[int, type[PetStoreError]] = {400: InvalidRequest, 401: Unauthorized, 404: NotFound, 410: Gone}
# The operations that change the store, with the one success the interface defines for each.
CHANGES = {"createPet": 201}
# The error answers the interface defines for each change: certain to have changed nothing.
CERTAIN_REFUSALS = {"createPet": (400, 401)}
