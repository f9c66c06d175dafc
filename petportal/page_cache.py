"""The micro-cache of anonymous list and detail pages, their ETags, and no-store for everything else.

Two parts, with one job each:
- `cached_page` (inside Flask) gives an anonymous visitor's page `Cache-Control: no-cache` and an ETag,
  answers a matching If-None-Match with 304, and marks the page as one that may be shared when it used
  nothing of the visitor's own (no flash, no CSRF token).
- `SharedPages` (a WSGI layer just inside ProxyFix) stores a marked page as Flask sent it, every header
  included, and answers the next visitor without a session or remember-me cookie with it, without
  running Flask. Only what differs between any two responses is made anew, by the functions Flask's own
  hooks use: the X-Request-ID and the 304. So a stored page carries exactly the security headers, HSTS
  and cache rules of a fresh one. Neither writes a Date: every server the portal runs under (Werkzeug's,
  gunicorn, granian) writes its own, and Werkzeug's `make_conditional` adding one made two.

A page is keyed by scheme, host, environment, that environment's generation and full path, so it is only
replayed to a request that Flask answered with exactly that page: a plain-HTTP request that the HTTPS rule
redirects, or a host that is not trusted, never finds a stored 200. Only a query of the view's own
parameters, each once, is shared: any other would only fill the cache. Adding an animal bumps its
environment's generation, so every process sharing the cache (Redis) stops serving the old pages at
once; without Redis each process has a cache of its own, and the others show the animal within
PETPORTAL_CACHE_SECONDS. Another environment's pages are never under the same key.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from functools import wraps
from typing import TYPE_CHECKING, ParamSpec, TypedDict, TypeVar
from urllib.parse import parse_qsl

from flask import Flask, current_app, make_response, request, session
from flask_login import current_user
from werkzeug.exceptions import HTTPException
from werkzeug.wrappers import Response

from . import logs, metrics, tracing
from .auth.remember import REMEMBER_COOKIE
from .compression import encoding_for
from .config import settings
from .extensions import cache
from .front_door import unreadable
from .i18n import language_of
from .serving import serving

if TYPE_CHECKING:
    from _typeshed import OptExcInfo
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment
    from cachelib import BaseCache
    from flask.typing import ResponseReturnValue

P = ParamSpec("P")
T = TypeVar("T")

# After a failure, the cache is not asked again for this long (per process).
RETRY_AFTER_FAILURE_SECONDS = 5
# Set in the WSGI environ by `cached_page`: the environment whose page may be shared.
SHAREABLE = "petportal.page_cache.shareable"
# Made anew for every response, never stored.
PER_RESPONSE = frozenset({"date", "x-request-id", "content-length"})
# A request with any of these gets Werkzeug's conditional handling (a 304, a range); the others a plain replay.
CONDITIONS = ("HTTP_IF_NONE_MATCH", "HTTP_IF_MODIFIED_SINCE", "HTTP_IF_MATCH", "HTTP_IF_UNMODIFIED_SINCE", "HTTP_RANGE")
# How many URLs a process remembers the sharing of before it starts again, each at most this long: at most
# about 2 MB, whatever URLs a client makes up.
REMEMBERED_URLS = 4096
REMEMBERED_URL_LENGTH = 512


def cached_page(
    *parameters: str,
) -> Callable[[Callable[P, ResponseReturnValue]], Callable[P, ResponseReturnValue]]:
    """Give this GET view's anonymous pages an ETag and 304s, and let `SharedPages` share those whose query
    holds nothing but `parameters`, each at most once (any other query would only fill the cache)."""

    def decorate(view: Callable[P, ResponseReturnValue]) -> Callable[P, ResponseReturnValue]:
        @wraps(view)
        def serve(*args: P.args, **kwargs: P.kwargs) -> ResponseReturnValue:
            if current_user.is_authenticated:
                return view(*args, **kwargs)
            response = make_response(view(*args, **kwargs))
            if response.status_code == 200:
                response.headers["Cache-Control"] = "no-cache"
                response.add_etag()
                response.make_conditional(request)
                del response.headers["Date"]  # the server writes its own (see the module)
                if not session:
                    request.environ[SHAREABLE] = serving().environment.name
            return response

        serve.shared_parameters = frozenset(parameters)  # type: ignore[attr-defined]  # read by SharedPages
        return serve

    return decorate


class _Answer(TypedDict, total=False):
    """What Flask started its response with."""

    status: str
    headers: list[tuple[str, str]]


class SharedPages:
    """The WSGI layer that stores and replays shared pages (see the module's description)."""

    def __init__(self, app: Flask, wsgi_app: WSGIApplication) -> None:
        self.app = app
        self.wsgi_app = wsgi_app
        self.seconds = math.ceil(settings(app).cache_seconds)
        self.cookies = (app.config["SESSION_COOKIE_NAME"], REMEMBER_COOKIE)
        # (path, query) -> the endpoint whose page may be shared, or None: what the URL map and the view's
        # parameters say of a URL never changes while the process runs. Bounded: emptied when full.
        self.endpoints: dict[tuple[str, str], str | None] = {}

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        started = time.perf_counter()
        endpoint = self._shared_endpoint(environ)
        if endpoint is None:
            return self.wsgi_app(environ, start_response)
        # No app context: the cache's backend and the environments are the app's own objects, read directly.
        backend = self.app.extensions["cache"][cache]
        environment = self.app.extensions["petportal.environments"].active().name
        key = _page_key(self.app, backend, environment, environ)
        stored = _safely(self.app, backend.get, key)
        if stored is None:
            metrics.PAGE_CACHE_MISSES.inc()
            return self._answer_and_store(environ, start_response, key, environment)
        metrics.PAGE_CACHE_HITS.inc()
        tracing.describe_request(environ["REQUEST_METHOD"], None, environment)  # nothing when tracing is off
        body, headers = stored
        request_id = logs.assigned_request_id(environ)
        if any(name in environ for name in CONDITIONS):
            response = Response(body, headers=headers)
            response.headers["X-Request-ID"] = request_id
            response.make_conditional(environ)
            del response.headers["Date"]
            metrics.count(endpoint, environ["REQUEST_METHOD"], response.status_code, started)
            return response(environ, start_response)
        # Unconditional, the common case: the headers Werkzeug's Response gives the same page, in its order
        # (test_caching compares them header for header), without building one.
        start_response(
            "200 OK",
            [*headers, ("Content-Length", str(len(body))), ("X-Request-ID", request_id)],
        )
        metrics.count(endpoint, environ["REQUEST_METHOD"], 200, started)
        return [] if environ["REQUEST_METHOD"] == "HEAD" else [body]

    def _shared_endpoint(self, environ: WSGIEnvironment) -> str | None:
        """The endpoint of a GET or HEAD that a shared page may answer, else None."""
        if environ["REQUEST_METHOD"] not in ("GET", "HEAD") or unreadable(environ) is not None:
            return None  # not a page to share, or one Flask answers with its 400 page
        # Any cookie whose name contains the session's or remember-me's is Flask's to read (a few false alarms
        # cost a fresh page; reading the header as text is what makes this cheap).
        cookie = environ.get("HTTP_COOKIE", "")
        if cookie and any(name in cookie for name in self.cookies):
            return None
        url = (environ.get("PATH_INFO", ""), environ.get("QUERY_STRING", ""))
        if len(url[0]) + len(url[1]) > REMEMBERED_URL_LENGTH:
            return self._endpoint_sharing(environ)  # a long URL is worked out each time, never kept
        if url not in self.endpoints:
            if len(self.endpoints) >= REMEMBERED_URLS:
                self.endpoints.clear()
            self.endpoints[url] = self._endpoint_sharing(environ)
        return self.endpoints[url]

    def _endpoint_sharing(self, environ: WSGIEnvironment) -> str | None:
        """The endpoint of this URL when its page may be shared: a view marked `cached_page` whose query holds
        only that view's parameters, each once."""
        try:
            endpoint, _ = self.app.url_map.bind_to_environ(environ).match()
        except HTTPException:
            return None
        allowed = getattr(self.app.view_functions.get(endpoint), "shared_parameters", None)
        names = [name for name, _ in parse_qsl(environ.get("QUERY_STRING", ""), keep_blank_values=True)]
        if allowed is None or not set(names) <= allowed or len(set(names)) < len(names):
            return None
        return str(endpoint)

    def _answer_and_store(
        self, environ: WSGIEnvironment, start_response: StartResponse, key: str, environment: str
    ) -> list[bytes]:
        """Let Flask answer; keep its page when it marked it shareable for the environment of `key`."""
        answer: _Answer = {}

        def remember(
            status: str, headers: list[tuple[str, str]], exc_info: OptExcInfo | None = None
        ) -> Callable[[bytes], object]:
            answer.update({"status": status, "headers": headers})
            return start_response(status, headers, exc_info)

        chunks = self.wsgi_app(environ, remember)
        try:
            body = b"".join(chunks)
        finally:
            if hasattr(chunks, "close"):
                chunks.close()
        headers = answer.get("headers", [])
        if (
            environ.get(SHAREABLE) == environment
            and environ["REQUEST_METHOD"] == "GET"
            and answer.get("status", "").startswith("200 ")
            and not any(name.lower() == "set-cookie" for name, _ in headers)
        ):
            kept = [(name, value) for name, value in headers if name.lower() not in PER_RESPONSE]
            _safely(self.app, self.app.extensions["cache"][cache].set, key, (body, kept), timeout=self.seconds)
        return [body]


def invalidate(environment_name: str) -> None:
    """Forget every cached page of one environment, in every process that shares the cache."""
    if _caching():
        _safely(current_app, cache.cache.inc, _generation_key(environment_name))


# Pages, an import's progress and its results: what a browser or a proxy must not keep unless a view says so.
PERSONAL_TYPES = frozenset({"text/html", "application/json", "text/csv"})


def register(app: Flask) -> None:
    """Bind the cache (Redis when configured; see config.derived), put the shared pages in front of Flask
    when caching is on, and mark every other page, JSON or CSV answer as never to be stored."""
    cache.init_app(app)
    app.extensions["petportal.page_cache"] = {"down_until": 0.0}
    if settings(app).cache_seconds > 0:
        app.wsgi_app = SharedPages(app, app.wsgi_app)  # type: ignore[method-assign]  # Flask's own WSGI hook

    @app.after_request
    def never_store_personal_pages(response: Response) -> Response:
        if "Cache-Control" not in response.headers and response.mimetype in PERSONAL_TYPES:
            response.headers["Cache-Control"] = "no-store"
        return response


def _caching() -> bool:
    return bool(settings().cache_seconds > 0)


def _generation_key(environment_name: str) -> str:
    return f"generation:{environment_name}"


def _page_key(app: Flask, backend: BaseCache, environment: str, environ: WSGIEnvironment) -> str:
    """The key of a page: its environment and that environment's generation, the language and the encoding it is
    served in, the scheme and host the request came to (after ProxyFix, when proxies are trusted) and its path and
    query as they came."""
    generation = _safely(app, backend.get, _generation_key(environment)) or 0
    host = environ.get("HTTP_HOST") or f"{environ.get('SERVER_NAME', '')}:{environ.get('SERVER_PORT', '')}"
    # Each part quoted on its own (repr), so no Host header can pass itself off as part of a path.
    where = (environ["wsgi.url_scheme"], host, environ.get("PATH_INFO", ""), environ.get("QUERY_STRING", ""))
    encoding = encoding_for(environ.get("HTTP_ACCEPT_ENCODING", ""))
    return f"page:{environment}:{generation}:{language_of(environ)}:{encoding}:{where!r}"


def _safely(app: Flask, operation: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T | None:
    """A cache that is down is a cache miss, never an error page: one log line, then left alone a while."""
    state = app.extensions["petportal.page_cache"]
    if time.monotonic() < state["down_until"]:
        return None
    try:
        return operation(*args, **kwargs)
    except Exception as error:  # noqa: BLE001 - any failure of the cache backend
        state["down_until"] = time.monotonic() + RETRY_AFTER_FAILURE_SECONDS
        app.logger.warning(
            "the page cache is unavailable (%s); pages are served uncached for %d s",
            type(error).__name__,
            RETRY_AFTER_FAILURE_SECONDS,
        )
        return None
