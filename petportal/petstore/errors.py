"""The one exception tree for everything that can go wrong talking to the pet store.

Every text an error carries is cleaned here, once: a store (or a gateway in front of it) may quote
the request's `Authorization` header back in its error message, so no message, code or URL leaves
this module with a key or anything shaped like a credential in it.
"""

import json
import re
from collections.abc import Iterable
from contextlib import suppress
from enum import StrEnum
from typing import Any, ClassVar

from petportal.secret_guard import quotes_secret

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


def clean(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with every secret and credential-shaped part replaced, control characters removed, cut short; a text
    that quotes a secret (`secret_guard`: a run of it, in any form the guard reads) is withheld whole. Safe to show to
    people and to write to a log line; never rely on it to keep the text's meaning."""
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
    into words only where a page shows it (petportal.petstore.words.store_words)."""

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


class Operation(StrEnum):
    """A call to the pet store: an operationId of the API, or its description (`describe`)."""

    LIST_PETS = "listPets"
    GET_PET = "getPet"
    CREATE_PET = "createPet"
    DESCRIBE = "describe"


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


def classify(operation: Operation, status: int | None, *, usable: bool = True) -> Outcome:
    """What the end of a call to `operation` means: the one place that decides it. `status` is the answer's (None:
    none came once the request was sent), `usable` whether its body could be read as the interface defines.

    A change (createPet) is certain only for the answers the interface defines for it: 201, and 400 and 401 saying
    nothing was added. Any other end (no answer, 5xx, 429, a 418 from a gateway, an unreadable 201) may come after
    the store acted, so its outcome is unknown. A read's outcome never matters: 429 and 5xx only say to try again.
    """
    if operation == Operation.CREATE_PET:
        if status in (400, 401):
            return STATUS_OUTCOMES[status]
        return Outcome.OK if status == 201 and usable else Outcome.UNKNOWN
    if status is None:
        return Outcome.UNAVAILABLE
    if not usable or (status == 404 and operation != Operation.GET_PET):
        return Outcome.UNUSABLE
    if 200 <= status < 300:
        return Outcome.OK
    if status in STATUS_OUTCOMES:
        return STATUS_OUTCOMES[status]
    return Outcome.UNAVAILABLE if status == 429 or status >= 500 else Outcome.UNUSABLE


class PetStoreError(Exception):
    """Base class: a pet store call did not give a usable answer, for a `reason`. Carries what an operator needs
    (status, the API's code, method and URL), and `message`: the store's own words or the client's detail, cleaned
    by `clean` with the calling client's secrets, so it never holds a key."""

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
    def of(operation: Operation, reason: StoreReason, message: str = "", **details: Any) -> "PetStoreError":
        """The typed error for a call to `operation` that ended for `reason` (and `status`), as `classify` reads it."""
        usable = reason not in (StoreReason.UNUSABLE, StoreReason.TOO_LARGE, StoreReason.UNDECODABLE)
        outcome = classify(operation, details.get("status"), usable=usable)
        return ERRORS[outcome](reason, message, **details)

    @staticmethod
    def from_status(
        status: int, body: bytes, *, operation: Operation, method: str, url: str, secrets: Iterable[str] = ()
    ) -> "PetStoreError":
        """The typed error for an answer that is no success, with the API's code and message if it sent an Error."""
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
    """A change reached the store, or may have, and no answer the interface defines came back (a timeout or reset
    after sending, a status it does not define, an unreadable 201): it may have happened, so it is never sent again."""

    outcome = Outcome.UNKNOWN


class UnexpectedResponse(PetStoreError):
    """The store answered something outside the interface: bad JSON, wrong shape, too large, a redirect."""

    outcome = Outcome.UNUSABLE


ERRORS: dict[Outcome, type[PetStoreError]] = {
    error.outcome: error
    for error in (InvalidRequest, Unauthorized, NotFound, Gone, Unavailable, Busy, OutcomeUnknown, UnexpectedResponse)
}
