"""The micro-cache of anonymous list and detail pages, their ETags, and no-store for everything else.

`cached_page` (in Flask) gives an anonymous page an ETag and 304s, and marks it shareable when it used nothing of the
visitor's; `SharedPages` (WSGI, inside ProxyFix) stores such a page whole and replays it without Flask to visitors
with no session or remember-me cookie, remaking only X-Request-ID and 304s. A page's key holds scheme, environment
and its generation (bumped when an animal is added), language, encoding, path and the query as the page reads it
(`cached_page`'s `query`, which Flask is handed too), so it is replayed only where Flask would answer exactly that
page, and junk in a URL makes no page that is not kept. No host: a page names none, and a host the portal does not
answer to goes to Flask for its 400 page. Neither writes a Date: every server writes its own.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from functools import wraps
from typing import TYPE_CHECKING, Any, ParamSpec, Self, TypeVar
from urllib.parse import parse_qsl

from flask import Flask, current_app, make_response, request, session
from flask import Response as FlaskResponse
from flask_login import current_user
from werkzeug.datastructures import MultiDict
from werkzeug.exceptions import HTTPException
from werkzeug.sansio.utils import host_is_trusted
from werkzeug.wrappers import Response

from petportal.config import REMEMBER_COOKIE, settings
from petportal.extensions import cache
from petportal.i18n.languages import language_of
from petportal.serving import stand_in
from petportal.serving.request import serving
from petportal.telemetry import logs, metrics, tracing
from petportal.web.compression import encoding_for
from petportal.web.front_door import unreadable

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
SHAREABLE = "petportal.web.page_cache.shareable"
# Made anew for every response, never stored.
PER_RESPONSE = frozenset({"date", "x-request-id", "content-length"})
# A request with any of these gets Werkzeug's conditional handling (a 304, a range); the others a plain replay.
CONDITIONS = ("HTTP_IF_NONE_MATCH", "HTTP_IF_MODIFIED_SINCE", "HTTP_IF_MATCH", "HTTP_IF_UNMODIFIED_SINCE", "HTTP_RANGE")
# How many URLs a process remembers the sharing of before it starts again, each at most this long: at most
# about 2 MB, whatever URLs a client makes up.
# docs/performance.md, "the request path's memos" (this, the plain replay below, metrics._REQUEST_SERIES,
# encoding_for's cache, front_door.PROCESS_ONLY, measured together).
REMEMBERED_URLS = 4096
REMEMBERED_URL_LENGTH = 512
# Pages, an import's progress and its results: what a browser or a proxy must not keep unless a view says so.
PERSONAL_TYPES = frozenset({"text/html", "application/json", "text/csv"})


def cached_page(
    query: Callable[[MultiDict[str, str]], str | None],
) -> Callable[[Callable[P, ResponseReturnValue]], Callable[P, ResponseReturnValue]]:
    """Give this GET view's anonymous pages an ETag and 304s, and let `SharedPages` share them by `query(args)`: the
    query as the view reads it, one way for every spelling, or None when the view cannot read it (not shared)."""

    def decorate(view: Callable[P, ResponseReturnValue]) -> Callable[P, ResponseReturnValue]:
        @wraps(view)
        def serve(*args: P.args, **kwargs: P.kwargs) -> ResponseReturnValue:
            if current_user.is_authenticated:
                return view(*args, **kwargs)
            response = make_response(view(*args, **kwargs))
            if response.status_code == 200 and not stand_in.stood_in():
                response.headers["Cache-Control"] = "no-cache"
                response.add_etag()
                response.make_conditional(request)
                if not session:
                    request.environ[SHAREABLE] = serving().environment.name
            return response

        serve.shared_query = query  # type: ignore[attr-defined]  # read by SharedPages
        return serve

    return decorate


class SharedPages:
    def __init__(self, app: Flask, wsgi_app: WSGIApplication) -> None:
        self.app = app
        self.wsgi_app = wsgi_app
        self.seconds = math.ceil(settings(app).cache_seconds)
        self.cookies = (app.config["SESSION_COOKIE_NAME"], REMEMBER_COOKIE)
        self.trusted_hosts = settings(app).trusted_hosts
        # (path, query) -> the endpoint whose page may be shared and the query it reads, or None: fixed per process.
        self.endpoints: dict[tuple[str, str], tuple[str, str] | None] = {}

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        started = time.perf_counter()
        shared = self._shared_endpoint(environ)
        if shared is None:
            return self.wsgi_app(environ, start_response)
        endpoint, query = shared
        environ = {**environ, "QUERY_STRING": query}  # what the page reads, for the key and for Flask alike
        # No app context: the cache's backend and the environments are the app's own objects, read directly.
        backend = self.app.extensions["cache"][cache]
        environment = self.app.extensions["petportal.serving.choice"].active().name
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
            response = ServerDated(body, headers=headers)
            response.headers["X-Request-ID"] = request_id
            response.make_conditional(environ)
            metrics.count(endpoint, environ["REQUEST_METHOD"], response.status_code, started)
            return response(environ, start_response)
        # Unconditional, the common case: Werkzeug's headers in its order (test_caching checks), without a Response.
        start_response("200 OK", [*headers, ("Content-Length", str(len(body))), ("X-Request-ID", request_id)])
        metrics.count(endpoint, environ["REQUEST_METHOD"], 200, started)
        return [] if environ["REQUEST_METHOD"] == "HEAD" else [body]

    def _shared_endpoint(self, environ: WSGIEnvironment) -> tuple[str, str] | None:
        """The endpoint of a GET or HEAD that a shared page may answer and the query it reads, else None."""
        if environ["REQUEST_METHOD"] not in ("GET", "HEAD") or unreadable(environ) is not None:
            return None  # not a page to share, or one Flask answers with its 400 page
        if self.trusted_hosts and not host_is_trusted(environ.get("HTTP_HOST", ""), self.trusted_hosts):
            return None  # Flask's 400 page
        # A cookie header naming the session or remember-me goes to Flask (a false alarm costs a fresh page).
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

    def _endpoint_sharing(self, environ: WSGIEnvironment) -> tuple[str, str] | None:
        """The endpoint of a `cached_page` view whose query it can read, and that query as it reads it, else None."""
        try:
            endpoint, _ = self.app.url_map.bind_to_environ(environ).match()
        except HTTPException:
            return None
        read = getattr(self.app.view_functions.get(endpoint), "shared_query", None)
        if read is None:
            return None
        with self.app.app_context():
            query = read(MultiDict(parse_qsl(environ.get("QUERY_STRING", ""), keep_blank_values=True)))
        return None if query is None else (str(endpoint), query)

    def _answer_and_store(
        self, environ: WSGIEnvironment, start_response: StartResponse, key: str, environment: str
    ) -> list[bytes]:
        """Let Flask answer; keep its page when it marked it shareable for `environment`."""
        answer: dict[str, Any] = {}  # what Flask started its response with

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
    if settings().cache_seconds > 0:
        _safely(current_app, cache.cache.inc, _generation_key(environment_name))


class ServerDated(FlaskResponse):
    """Every answer the portal makes, Flask's and the shared pages': `make_conditional` (an ETag, a static file,
    Flask-Compress) writes no Date, as every server the portal runs under writes its own, and two made two."""

    def make_conditional(self, *args: Any, **kwargs: Any) -> Self:
        super().make_conditional(*args, **kwargs)
        del self.headers["Date"]
        return self


def register(app: Flask) -> None:
    """Bind the cache, put the shared pages in front of Flask, and mark every other page, JSON or CSV no-store."""
    app.response_class = ServerDated
    cache.init_app(app)
    app.extensions["petportal.web.page_cache"] = {"down_until": 0.0}
    if settings(app).cache_seconds > 0:
        app.wsgi_app = SharedPages(app, app.wsgi_app)  # type: ignore[method-assign]  # Flask's own WSGI hook

    @app.after_request
    def never_store_personal_pages(response: Response) -> Response:
        if "Cache-Control" not in response.headers and response.mimetype in PERSONAL_TYPES:
            response.headers["Cache-Control"] = "no-store"
        return response


def _generation_key(environment_name: str) -> str:
    return f"generation:{environment_name}"


def _page_key(app: Flask, backend: BaseCache, environment: str, environ: WSGIEnvironment) -> str:
    generation = _safely(app, backend.get, _generation_key(environment)) or 0
    # Quoted (repr) part by part, so no path can pass itself off as part of a query.
    where = (environ["wsgi.url_scheme"], environ.get("PATH_INFO", ""), environ.get("QUERY_STRING", ""))
    encoding = encoding_for(environ.get("HTTP_ACCEPT_ENCODING", ""))
    return f"page:{environment}:{generation}:{language_of(environ)}:{encoding}:{where!r}"


def _safely(app: Flask, operation: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T | None:
    """A cache that is down is a cache miss, never an error page: one log line, then left alone a while."""
    state = app.extensions["petportal.web.page_cache"]
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
