"""The front door: whether a request can be read at all, decided once, before the page cache and the views.

A path, query, cookie or header that is not UTF-8 gets the 400 page, never a 500; a form field that is not is marked
for its form. Bodies are read whole by `BodyGate`, a few threads at once, so slow senders never hold every thread;
a body left unread (too large, or no place free) is answered with `Connection: close`.
"""

from __future__ import annotations

import io
import os
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import unquote_to_bytes

from flask import Flask, g, request
from werkzeug.exceptions import BadHost, BadRequest, RequestEntityTooLarge, ServiceUnavailable

from petportal.i18n.lazy_text import lazy_gettext as _l

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

FORM_BODY = "application/x-www-form-urlencoded"
UPLOAD_BODY = "multipart/form-data"
# An upload's body may be larger than MAX_CONTENT_LENGTH by this much: the form around a file of the largest size.
UPLOAD_ROOM = 64 * 1024
NOT_UTF8 = _l("This is not text the portal can read: it is not UTF-8.")
UNREADABLE = "petportal.unreadable"
UNREADABLE_PARTS = {
    "path": _l("This request could not be read: its path is not UTF-8 text."),
    "query": _l("This request could not be read: its query is not UTF-8 text."),
    "cookies": _l("This request could not be read: its cookies are not UTF-8 text."),
    "headers": _l("This request could not be read: its headers are not UTF-8 text."),
    "nul": _l("This request could not be read: its path holds a NUL character, which no text may hold."),
}
# What no text the portal reads may hold: PostgreSQL refuses it in any text column (a 500 for a name holding it).
NUL = "\x00"
NUL_TEXT = _l("This holds a NUL character, which no text may hold.")
BODIES_BUSY = "petportal.bodies_busy"
# Threads of a process that may wait on request bodies at once: half of a worker's 8.
BODY_READERS = 4
BUSY = _l("Too many forms are being sent to the portal right now. Wait a moment and send this one again.")


def _from_request(name: str) -> bool:
    """Whether a WSGI environ variable of this name can hold a request header."""
    return name.startswith("HTTP_") or name in ("CONTENT_TYPE", "CONTENT_LENGTH")


# The variables of this process's environment that no request can set. granian copies the whole environment
# into every request's environ; the check for headers that are not UTF-8 skips these, which are the same for
# every request, and reads only the request's own (a variable set later in the process is read like a header).
# Kept by issue 41's bench with the page cache's memos (see page_cache.REMEMBERED_URLS).
PROCESS_ONLY = frozenset(name for name in os.environ if not _from_request(name))


class UnreadableRequest(BadRequest):
    """A request whose path, query, cookies or headers are not UTF-8 text."""


def unreadable(environ: WSGIEnvironment) -> str | None:
    """The part of the request that is not UTF-8 ("path", "query", "cookies", "headers") "nul" for a NUL in the path."""
    if UNREADABLE not in environ:
        environ[UNREADABLE] = _unreadable_part(environ)
    return cast(str | None, environ[UNREADABLE])


def _unreadable_part(environ: WSGIEnvironment) -> str | None:
    # ASCII is UTF-8: only a part with other characters is decoded (nearly every request is ASCII throughout).
    path = environ.get("PATH_INFO", "")
    if not path.isascii():
        try:
            path.encode("latin-1").decode("utf-8")
        except UnicodeError:
            return "path"
    query = environ.get("QUERY_STRING", "")
    if "%" in query or not query.isascii():
        try:
            unquote_to_bytes(query.encode("latin-1").replace(b"+", b" ")).decode("utf-8")
        except UnicodeError:
            return "query"
    if NUL in path:
        return "nul"
    own = environ.keys() - PROCESS_ONLY
    if "".join([value for name in own if isinstance(value := environ[name], str)]).isascii():
        return None
    for name, value in environ.items():  # in the environ's order: the first part found is the one named
        if isinstance(value, str) and not value.isascii() and _from_request(name):
            try:
                value.encode("latin-1").decode("utf-8")
            except UnicodeError:
                return "cookies" if name == "HTTP_COOKIE" else "headers"
    return None


def unreadable_fields(body: bytes) -> set[str]:
    """The names of a URL-encoded form body's fields whose values are not UTF-8."""
    found = set()
    for pair in body.split(b"&"):
        name, _, value = pair.partition(b"=")
        try:
            unquote_to_bytes(value.replace(b"+", b" ")).decode("utf-8")
        except UnicodeError:
            found.add(unquote_to_bytes(name.replace(b"+", b" ")).decode("utf-8", "replace"))
    return found


def body_limit(content_type: str, limit: int) -> int:
    """The most bytes a body of `content_type` may have: `limit`, plus `UPLOAD_ROOM` for an upload."""
    return limit + UPLOAD_ROOM if content_type.partition(";")[0].strip().lower() == UPLOAD_BODY else limit


def too_large(content_type: str, content_length: str, limit: int) -> bool:
    return content_length.isdigit() and int(content_length) > body_limit(content_type, limit)


class BodyGate:
    """WSGI layer reading each body whole, at most `places` threads at once: with none free, Flask answers 503;
    a body over its limit is left for Flask to refuse (413)."""

    def __init__(self, wsgi_app: WSGIApplication, places: int, limit: int) -> None:
        self.wsgi_app = wsgi_app
        self.places = threading.BoundedSemaphore(places)
        self.limit = limit

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        declared = environ.get("CONTENT_LENGTH", "")
        chunked = "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()
        content_type = environ.get("CONTENT_TYPE", "")
        if not chunked and (not declared.isdigit() or int(declared) == 0):
            return self.wsgi_app(environ, start_response)  # no body
        if not chunked and too_large(content_type, declared, self.limit):
            return self.wsgi_app(environ, _closing(start_response))  # refused unread by Flask (413)
        if not self.places.acquire(blocking=False):
            environ[BODIES_BUSY] = True
            return self.wsgi_app(environ, _closing(start_response))
        try:
            wanted = int(declared) if not chunked else body_limit(content_type, self.limit) + 1
            body = environ["wsgi.input"].read(wanted)
        finally:
            self.places.release()
        environ["wsgi.input"] = io.BytesIO(body)
        environ["CONTENT_LENGTH"] = str(len(body))  # a chunked body past the limit is then refused (413)
        environ.pop("HTTP_TRANSFER_ENCODING", None)
        environ["wsgi.input_terminated"] = False
        if too_large(content_type, environ["CONTENT_LENGTH"], self.limit):
            return self.wsgi_app(environ, _closing(start_response))  # the rest of the chunked body is unread
        return self.wsgi_app(environ, start_response)


def _closing(start_response: StartResponse) -> StartResponse:
    def start(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        return start_response(status, [*headers, ("Connection", "close")], exc_info)

    return start


def gate_bodies(app: Flask) -> None:
    """Read request bodies through a `BodyGate`, the outermost WSGI layer."""
    app.wsgi_app = BodyGate(app.wsgi_app, BODY_READERS, app.config["MAX_CONTENT_LENGTH"])  # type: ignore[method-assign]


def register(app: Flask) -> None:
    limit = app.config["MAX_CONTENT_LENGTH"]

    @app.before_request
    def read_the_request() -> None:
        if too_large(request.environ.get("CONTENT_TYPE", ""), request.environ.get("CONTENT_LENGTH", ""), limit):
            raise RequestEntityTooLarge  # before anything reads the form (CSRF would, and answer 400)
        request.max_content_length = body_limit(request.environ.get("CONTENT_TYPE", ""), limit)
        if request.environ.get(BODIES_BUSY):
            raise ServiceUnavailable(str(BUSY))
        # The host first: a refused host has its own 400 page, the only one that needs no URL of this site.
        request.host  # noqa: B018 - reading it raises SecurityError for a host the portal does not answer to
        if isinstance(request.routing_exception, BadHost):
            raise request.routing_exception  # a host no URL can be built for (".", say): the same page
        part = unreadable(request.environ)
        if part is not None:
            raise UnreadableRequest(str(UNREADABLE_PARTS[part]))
        if request.mimetype == FORM_BODY:
            # Cached, so the form is then parsed from the same bytes (never more than MAX_CONTENT_LENGTH).
            g.unreadable_fields = unreadable_fields(request.get_data(cache=True))
