"""The portal's only HTTP client of the Pet Store v1 API."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from functools import partial
from types import TracebackType
from typing import Any, Self, TypeVar
from urllib.parse import urlencode, urlsplit

from urllib3 import connection_from_url
from urllib3.connectionpool import ConnectionPool
from urllib3.exceptions import ConnectTimeoutError, DecodeError, MaxRetryError, SSLError, TimeoutError
from urllib3.exceptions import HTTPError as TransportError
from urllib3.response import BaseHTTPResponse
from urllib3.util.retry import Retry
from urllib3.util.timeout import Timeout

from petportal.petstore.bulkhead import Bulkhead
from petportal.petstore.errors import (
    RETRIED,
    Busy,
    Operation,
    Outcome,
    PetStoreError,
    StoreReason,
    Unavailable,
    classify,
)
from petportal.petstore.records import (
    INT64_MAX,
    INT64_MIN,
    LIMIT_DEFAULT,
    LIMIT_MAX,
    LIMIT_MIN,
    PET_STATUSES,
    DescribedOperation,
    Guard,
    Pet,
    ShapeError,
    parse_operations,
    parse_pet,
    parse_pets,
)
from petportal.secret_guard import SecretGuard

log = logging.getLogger(__name__)
T = TypeVar("T")

MAX_BODY_BYTES = 4 * 1024 * 1024
READ_CHUNK_BYTES = 64 * 1024
# A retry is only worth sending when at least this much of the call's deadline is left for it.
MIN_ATTEMPT_SECONDS = 0.2
# The deadline of the call this thread is making: read by the retry policy, which urllib3 shares.
_call = threading.local()


class GetOnlyRetry(Retry):
    """urllib3's Retry, narrowed: only GET is retried, only for the RETRIED statuses, and only while the retry and
    the wait before it fit in what is left of the call's deadline."""

    RETRY_AFTER_STATUS_CODES = RETRIED

    def increment(
        self,
        method: str | None = None,
        url: str | None = None,
        response: BaseHTTPResponse | None = None,
        error: Exception | None = None,
        _pool: ConnectionPool | None = None,
        _stacktrace: TracebackType | None = None,
    ) -> Self:
        """Count one more failure; a POST is never sent twice, not even after a refused connect."""
        failure: dict[str, Any] = {"response": response, "error": error, "_pool": _pool, "_stacktrace": _stacktrace}
        if method is None or self._is_method_retryable(method):
            retry = super().increment(method, url, **failure)
            wait = (retry.get_retry_after(response) if response is not None else None) or retry.get_backoff_time()
            if float(_call.deadline) - time.monotonic() - min(wait, self.retry_after_max) >= MIN_ATTEMPT_SECONDS:
                _call.retries += 1
                return retry
        # urllib3's own count, without this class's rules: with no retries left, it raises MaxRetryError.
        return Retry.increment(self.new(total=0), method, url, **failure)


class DeadlineTimeout(Timeout):
    """Each attempt's connect and read timeouts: the client's timeout, cut to what is left of the deadline."""

    def __init__(self, limit: float, deadline: float) -> None:
        super().__init__(connect=limit, read=limit)
        self._limit, self._deadline = limit, deadline

    def clone(self) -> DeadlineTimeout:
        return DeadlineTimeout(self._limit, self._deadline)

    @property
    def connect_timeout(self) -> float:
        return max(0.001, min(self._limit, self._deadline - time.monotonic()))

    @property
    def read_timeout(self) -> float:
        return self.connect_timeout


RETRY = GetOnlyRetry(
    total=2,
    connect=2,
    read=False,
    other=0,
    status=2,
    allowed_methods=frozenset({"GET"}),
    status_forcelist=RETRIED,
    backoff_factor=0.1,
    retry_after_max=2,
    raise_on_status=False,
)


class PetStoreClient:
    """Talks to one deployment of the Pet Store v1 API, with that deployment's key and nowhere else."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 5.0,
        pool_size: int = 10,
        extra_headers: Callable[[], dict[str, str]] = dict,
        deadline: Callable[[], float | None] = lambda: None,
        gate: Bulkhead | None = None,
        observe: Callable[[Operation, Outcome, float, int], None] = lambda *call: None,
        on_answer: Callable[[Operation, Outcome, Mapping[str, str]], None] = lambda *answer: None,
        trace: Callable[[Operation], AbstractContextManager[Mapping[str, str]]] | None = None,
    ) -> None:
        """`deadline()` may give the `time.monotonic()` by which a call and its retries must end (else `timeout` from
        its start); `gate` bounds the calls waiting at once; `observe` hears of every call, `on_answer` of every
        answer; `trace(operation)` wraps a call in a span and gives the headers that carry it. The client only does
        HTTP: what answers mean for an environment's health is the caller's to keep."""
        self.base_url = base_url.rstrip("/")
        self.timeout = float(timeout)
        self._extra_headers = extra_headers
        self._deadline = deadline
        self._gate = gate
        self._secrets = (api_key,)
        # Whether a text quotes this client's key: the guard every text it parses passes, also for a text the caller
        # puts together from them (a list's names, read one after another). Its own key alone: a page is guarded
        # against the key of the store it shows (what it withholds can be seen; egress guards logs against all).
        self.quotes_secret = SecretGuard(self._secrets)
        self._observe = observe
        self._on_answer = on_answer
        self._trace = trace
        # One connection pool, bound to this deployment's host: the key cannot be sent anywhere else, not
        # even by a redirect (never followed). urllib3 alone: no proxy variables, no .netrc, no cookies.
        self._path = urlsplit(self.base_url).path
        self._headers = {"Accept": "application/json", "Authorization": f"Bearer {api_key}"}
        self._pool = connection_from_url(self.base_url, maxsize=pool_size, retries=RETRY)

    def __repr__(self) -> str:
        return f"PetStoreClient({self.base_url!r})"

    def close(self) -> None:
        """Close the pooled connections."""
        self._pool.close()

    def list_pets(
        self, limit: int = LIMIT_DEFAULT, status: str | None = None, deadline: float | None = None
    ) -> list[Pet]:
        """listPets: at most `limit` (LIMIT_MIN..LIMIT_MAX) animals, optionally only those with `status`."""
        _check_int(limit, "limit", LIMIT_MIN, LIMIT_MAX)
        _check_status(status)
        query = urlencode({"limit": limit} if status is None else {"limit": limit, "status": status})
        return self._call("GET", "/pets?" + query, Operation.LIST_PETS, parse_pets, deadline)

    def create_pet(self, name: str, category_id: int, status: str | None = None, deadline: float | None = None) -> Pet:
        """createPet: add one animal and return it with its new id. Sent at most once."""
        if not isinstance(name, str) or not name.strip():
            raise ValueError("name must be a non-blank string")
        _check_int(category_id, "category_id", INT64_MIN, INT64_MAX)
        _check_status(status)
        payload = {"name": name, "categoryId": category_id}
        if status is not None:
            payload["status"] = status
        return self._call("POST", "/pets", Operation.CREATE_PET, parse_pet, deadline, json=payload)

    def get_pet(self, pet_id: int, deadline: float | None = None) -> Pet:
        """getPet (deprecated): one animal by id."""
        _check_int(pet_id, "pet_id", INT64_MIN, INT64_MAX)
        return self._call("GET", f"/pets/{pet_id}", Operation.GET_PET, parse_pet, deadline)

    def describe(self, deadline: float | None = None) -> dict[str, DescribedOperation]:
        """The operations the store's own OpenAPI description (`<base>/openapi.json`) lists."""
        return self._call("GET", "/openapi.json", Operation.DESCRIBE, parse_operations, deadline)

    def _call(
        self,
        method: str,
        path: str,
        operation: Operation,
        parse: Callable[[Any, Guard], T],
        deadline: float | None,
        **kwargs: Any,
    ) -> T:
        """One operation, ended by `deadline` (a `time.monotonic()`) when given, else by the client's own."""
        started = time.monotonic()
        _call.retries = 0
        try:
            with nullcontext({}) if self._trace is None else self._trace(operation) as carried:
                result = self._call_once(method, path, operation, parse, started, deadline, carried, **kwargs)
        except PetStoreError as error:
            self._observe(operation, error.outcome, time.monotonic() - started, _call.retries)
            raise
        self._observe(operation, Outcome.OK, time.monotonic() - started, _call.retries)
        return result

    def _call_once(
        self,
        method: str,
        path: str,
        operation: Operation,
        parse: Callable[[Any, Guard], T],
        started: float,
        deadline: float | None,
        carried: Mapping[str, str],
        **kwargs: Any,
    ) -> T:
        url = self.base_url + path
        deadline = deadline or self._deadline() or started + self.timeout
        if deadline - started < MIN_ATTEMPT_SECONDS:
            raise Unavailable(StoreReason.NO_TIME_LEFT, method=method, url=url)
        if self._gate is not None and not self._gate.enter(deadline):
            raise Busy(StoreReason.TOO_BUSY, method=method, url=url)
        _call.deadline = deadline
        try:
            response = self._pool.request(
                method,
                self._path + path,
                headers={**self._headers, **self._extra_headers(), **carried},
                timeout=DeadlineTimeout(self.timeout, deadline),
                redirect=False,
                preload_content=False,
                **kwargs,
            )
        except (TransportError, OSError) as exc:
            error = _transport_error(exc, operation, method, url)
            log.warning("%s %s failed: %s", method, url, error.reason)
            raise error from exc
        else:
            body = self._read_body(response, operation, method, url, deadline)
        finally:
            if self._gate is not None:
                self._gate.leave()
        status = response.status
        outcome = classify(operation, status)
        self._on_answer(operation, outcome, response.headers)
        log.debug("%s %s -> %s in %.1f ms", method, url, status, (time.monotonic() - started) * 1000)
        if outcome is not Outcome.OK:
            raise PetStoreError.from_status(
                status, body, operation=operation, method=method, url=url, secrets=self._secrets
            )
        try:
            # An animal named after the key would put it on a customer's page: the one guard withholds that text.
            return parse(json.loads(body), self.quotes_secret)
        except (ValueError, RecursionError) as exc:
            # ShapeError is a ValueError too; all mean the answer is outside the interface.
            detail = str(exc) if isinstance(exc, ShapeError) else "not valid JSON"
            raise PetStoreError.of(
                operation, StoreReason.UNUSABLE, detail, status=status, method=method, url=url
            ) from exc

    def _read_body(
        self, response: BaseHTTPResponse, operation: Operation, method: str, url: str, deadline: float
    ) -> bytes:
        """The whole body, refusing one over MAX_BODY_BYTES or one still arriving at `deadline`; the connection then
        goes back to the pool, unless it still holds part of the answer."""
        answered = partial(PetStoreError.of, operation, status=response.status, method=method, url=url)
        declared = response.headers.get("Content-Length", "")
        chunks, size = [], 0
        try:
            if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
                raise answered(StoreReason.TOO_LARGE)
            while chunk := response.read1(READ_CHUNK_BYTES, decode_content=True):
                size += len(chunk)
                if size > MAX_BODY_BYTES:
                    raise answered(StoreReason.TOO_LARGE)
                if time.monotonic() > deadline:
                    raise PetStoreError.of(operation, StoreReason.TOO_SLOW, method=method, url=url)
                chunks.append(chunk)
        except BaseException as exc:
            response.close()  # a connection holding the rest of an answer is never reused
            if isinstance(exc, DecodeError):
                raise answered(StoreReason.UNDECODABLE) from exc
            if isinstance(exc, TransportError | OSError):
                raise PetStoreError.of(operation, StoreReason.CONNECTION_BROKE, method=method, url=url) from exc
            raise
        finally:
            response.release_conn()
        return b"".join(chunks)


def _check_int(value: object, name: str, low: int, high: int) -> None:
    if type(value) is not int or not low <= value <= high:
        raise ValueError(f"{name} must be an integer from {low} to {high}")


def _check_status(status: str | None) -> None:
    if status is not None and status not in PET_STATUSES:
        raise ValueError(f"status must be one of {', '.join(PET_STATUSES)}")


def _transport_error(exc: Exception, operation: Operation, method: str, url: str) -> PetStoreError:
    """The typed error for a request that got no answer at all."""
    reason = exc.reason if isinstance(exc, MaxRetryError) else exc
    if isinstance(reason, ConnectTimeoutError | SSLError):
        # Nothing reached the store: a refused connection or an unknown host (NewConnectionError and
        # NameResolutionError are ConnectTimeoutErrors), a connect timeout, or a TLS handshake that failed.
        return Unavailable(StoreReason.NOT_REACHED, method=method, url=url)
    failure = StoreReason.NO_ANSWER_IN_TIME if isinstance(reason, TimeoutError) else StoreReason.CONNECTION_FAILED
    return PetStoreError.of(operation, failure, method=method, url=url)
