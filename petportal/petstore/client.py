"""The portal's only HTTP client of the Pet Store v1 API."""

import json
import logging
import time
from dataclasses import dataclass
from http.cookiejar import DefaultCookiePolicy

import requests
from requests.adapters import HTTPAdapter
from urllib3.exceptions import ConnectTimeoutError, DecodeError, MaxRetryError
from urllib3.exceptions import HTTPError as TransportError
from urllib3.util.retry import Retry

from .errors import (
    STATUS_ERRORS,
    OutcomeUnknown,
    PetStoreError,
    Unavailable,
    UnexpectedResponse,
)
from .records import INT64_MAX, INT64_MIN, PET_STATUSES, ShapeError, parse_operations, parse_pet, parse_pets

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 4 * 1024 * 1024
READ_CHUNK_BYTES = 64 * 1024
ERROR_MESSAGE_CHARS = 300


class GetOnlyRetry(Retry):
    """urllib3's Retry, narrowed so that only GET is ever retried, and only for 502, 503 and 504."""

    RETRY_AFTER_STATUS_CODES = frozenset({502, 503, 504})

    def increment(self, method=None, url=None, *args, **kwargs):
        """Count one more failure; a POST is never sent twice, not even after a refused connect."""
        if method is not None and not self._is_method_retryable(method):
            return Retry.increment(self.new(total=0), method, url, *args, **kwargs)
        return super().increment(method, url, *args, **kwargs)


RETRY = GetOnlyRetry(
    total=2,
    connect=2,
    read=False,
    other=0,
    status=2,
    allowed_methods=frozenset({"GET"}),
    status_forcelist=frozenset({502, 503, 504}),
    backoff_factor=0.1,
    retry_after_max=2,
    raise_on_status=False,
)


@dataclass(frozen=True, slots=True)
class DeprecationNotice:
    """The `Deprecation` and `Sunset` headers one operation last answered with."""

    deprecation: str | None
    sunset: str | None
    seen_at: float


class PetStoreClient:
    """Talks to one deployment of the Pet Store v1 API, with that deployment's key and nowhere else."""

    def __init__(
        self,
        base_url,
        api_key,
        *,
        timeout=5.0,
        pool_size=10,
        max_body_bytes=MAX_BODY_BYTES,
        extra_headers=dict,
    ):
        self.base_url = base_url.rstrip("/")
        self.timeout = float(timeout)
        self.max_body_bytes = max_body_bytes
        self.notices = {}
        self.key_rejected = False
        self._extra_headers = extra_headers
        self._session = requests.Session()
        # No proxy variables, no .netrc credentials and no cookies from the store: only what we set.
        self._session.trust_env = False
        self._session.cookies.set_policy(DefaultCookiePolicy(allowed_domains=[]))
        self._session.headers.update({"Accept": "application/json", "Authorization": f"Bearer {api_key}"})
        adapter = HTTPAdapter(pool_connections=1, pool_maxsize=pool_size, max_retries=RETRY)
        self._session.mount("http://", adapter)
        self._session.mount("https://", adapter)

    def __repr__(self):
        return f"PetStoreClient({self.base_url!r})"

    def close(self):
        """Close the pooled connections."""
        self._session.close()

    def list_pets(self, limit=20, status=None):
        """listPets: at most `limit` (1..100) animals, optionally only those with `status`."""
        _check_int(limit, "limit", 1, 100)
        _check_status(status)
        params = {"limit": limit}
        if status is not None:
            params["status"] = status
        return self._call("GET", "/pets", "listPets", parse_pets, params=params)

    def create_pet(self, name, category_id, status=None):
        """createPet: add one animal and return it with its new id. Sent at most once."""
        if not isinstance(name, str) or not name.strip():
            raise ValueError("name must be a non-blank string")
        _check_int(category_id, "category_id", INT64_MIN, INT64_MAX)
        _check_status(status)
        payload = {"name": name, "categoryId": category_id}
        if status is not None:
            payload["status"] = status
        return self._call("POST", "/pets", "createPet", parse_pet, json=payload)

    def get_pet(self, pet_id):
        """getPet (deprecated): one animal by id."""
        _check_int(pet_id, "pet_id", INT64_MIN, INT64_MAX)
        return self._call("GET", f"/pets/{pet_id}", "getPet", parse_pet)

    def describe(self):
        """The operations the store's own OpenAPI description (`<base>/openapi.json`) lists."""
        return self._call("GET", "/openapi.json", "describe", parse_operations)

    def _call(self, method, path, operation, parse, **kwargs):
        url = self.base_url + path
        started = time.monotonic()
        try:
            response = self._session.request(
                method,
                url,
                headers=self._extra_headers(),
                timeout=(self.timeout, self.timeout),
                allow_redirects=False,
                stream=True,
                **kwargs,
            )
        except requests.RequestException as exc:
            error = _transport_error(exc, method, url)
            log.warning("%s %s failed: %s", method, url, error.message)
            raise error from exc
        with response:
            if "Deprecation" in response.headers or "Sunset" in response.headers:
                self.notices[operation] = DeprecationNotice(
                    response.headers.get("Deprecation"), response.headers.get("Sunset"), time.time()
                )
            body = self._read_body(response, method, url, time.monotonic() + self.timeout)
        status = response.status_code
        if status == 401 or 200 <= status < 300:
            self.key_rejected = status == 401
        log.info("%s %s -> %s in %.1f ms", method, url, status, (time.monotonic() - started) * 1000)
        if status >= 300 or status < 200:
            raise _status_error(status, body, operation, method, url)
        try:
            return parse(json.loads(body))
        except ValueError as exc:
            # ShapeError is a ValueError too; both mean the answer is outside the interface.
            reason = str(exc) if isinstance(exc, ShapeError) else "not valid JSON"
            raise UnexpectedResponse(
                f"The store's answer is unusable: {reason}.", status=status, method=method, url=url
            ) from exc

    def _read_body(self, response, method, url, deadline):
        """The whole body, refusing one over `max_body_bytes` or one still arriving at `deadline`."""
        declared = response.headers.get("Content-Length", "")
        if declared.isdigit() and int(declared) > self.max_body_bytes:
            raise _too_large(response.status_code, method, url)
        chunks, size = [], 0
        try:
            while chunk := response.raw.read1(READ_CHUNK_BYTES, decode_content=True):
                size += len(chunk)
                if size > self.max_body_bytes:
                    raise _too_large(response.status_code, method, url)
                if time.monotonic() > deadline:
                    raise _no_answer(method, url, "The store's answer arrived too slowly.")
                chunks.append(chunk)
        except DecodeError as exc:
            raise UnexpectedResponse(
                "The store's answer could not be decoded.", status=response.status_code, method=method, url=url
            ) from exc
        except (TransportError, OSError) as exc:
            raise _no_answer(method, url, "The connection broke while the store was answering.") from exc
        return b"".join(chunks)


def _check_int(value, name, low, high):
    if type(value) is not int or not low <= value <= high:
        raise ValueError(f"{name} must be an integer from {low} to {high}")


def _check_status(status):
    if status is not None and status not in PET_STATUSES:
        raise ValueError(f"status must be one of {', '.join(PET_STATUSES)}")


def _no_answer(method, url, message):
    """The store stopped answering: for a POST it may have acted, so the outcome is unknown."""
    error_class = OutcomeUnknown if method == "POST" else Unavailable
    return error_class(message, method=method, url=url)


def _too_large(status, method, url):
    return UnexpectedResponse(
        "The store's answer is larger than the portal accepts.", status=status, method=method, url=url
    )


def _transport_error(exc, method, url):
    """The typed error for a request that got no answer at all."""
    reason = exc.args[0].reason if exc.args and isinstance(exc.args[0], MaxRetryError) else exc
    if isinstance(exc, requests.ConnectTimeout) or isinstance(reason, ConnectTimeoutError):
        # Covers refused connections too (NewConnectionError): nothing reached the store.
        return Unavailable("The pet store could not be reached.", method=method, url=url)
    if isinstance(exc, requests.Timeout):
        return _no_answer(method, url, "The pet store did not answer in time.")
    return _no_answer(method, url, "The connection to the pet store failed.")


def _status_error(status, body, operation, method, url):
    """The typed error for a non-2xx answer, with the API's own code and message when it sent an Error."""
    code, message = None, f"The store answered with status {status}."
    try:
        record = json.loads(body)
        if isinstance(record, dict) and isinstance(record.get("message"), str):
            code = record.get("code") if isinstance(record.get("code"), str) else None
            message = record["message"][:ERROR_MESSAGE_CHARS]
    except ValueError:
        pass
    if status == 404 and operation != "getPet":
        error_class = UnexpectedResponse
    elif status in STATUS_ERRORS:
        error_class = STATUS_ERRORS[status]
    elif status in (429, 503):
        # Refused before any work: safe to say nothing happened.
        error_class = Unavailable
    elif status >= 500:
        error_class = OutcomeUnknown if method == "POST" else Unavailable
    else:
        error_class = UnexpectedResponse
    return error_class(message, status=status, code=code, method=method, url=url)


__all__ = ["PetStoreClient", "PetStoreError", "DeprecationNotice"]
