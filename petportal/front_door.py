"""The front door: whether a request can be read at all, decided once, before the page cache and the views.

A WSGI server hands the path, the query string, the cookies and every header over as bytes (each byte one
latin-1 character). The portal reads them as UTF-8 text; a request in which any of them is not (after
percent-decoding, where a URL encodes bytes) is answered with the portal's 400 page and its request id,
never a 500 and never a traceback. (granian hands over a header value that is not ASCII as empty text, so
under `flask serve` such a header never reaches this check: docs/security.md.) A form field whose bytes are
not UTF-8 is marked, and the form shows the error next to that field (`forms.PortalForm`): Werkzeug would
otherwise keep the bytes as `%FF` text.

Request bodies are read whole by `BodyGate`, in front of everything, and only by a few threads of a process
at once: a client that sends its body a byte at a time holds one of those places, never every thread, so
pages and health checks keep being served while forms wait (or get the 503 page when the places are full).
A body over its limit (`body_limit`) gets the 413 page before anything reads it. A body left unread (too large,
or no place free) is answered with `Connection: close`: its bytes are still on the way, and the server ends
the connection after the answer, so the client opens a new one for its next request instead of losing it.
"""

from __future__ import annotations

import io
import os
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote_to_bytes

from flask import Flask, g, request
from werkzeug.exceptions import BadHost, BadRequest, RequestEntityTooLarge, ServiceUnavailable

from .lazy_text import lazy_gettext as _l

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

FORM_BODY = "application/x-www-form-urlencoded"
UPLOAD_BODY = "multipart/form-data"
# An upload's body may be larger than MAX_CONTENT_LENGTH by this much: the form around a file of the largest size.
UPLOAD_ROOM = 64 * 1024
NOT_UTF8 = _l("This is not text the portal can read: it is not UTF-8.")
# Where `unreadable` keeps its answer in the WSGI environ.
UNREADABLE = "petportal.unreadable"
# What the 400 page says for each part of a request that is not UTF-8.
UNREADABLE_PARTS = {
    "path": _l("This request could not be read: its path is not UTF-8 text."),
    "query": _l("This request could not be read: its query is not UTF-8 text."),
    "cookies": _l("This request could not be read: its cookies are not UTF-8 text."),
    "headers": _l("This request could not be read: its headers are not UTF-8 text."),
}
# Set in the WSGI environ by `BodyGate` when every place for reading a body was taken.
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
    """The part of the request that is not UTF-8 text ("path", "query", "cookies", "headers"), or None. Worked
    out once per request: the page cache asks first, then Flask."""
    if UNREADABLE not in environ:
        environ[UNREADABLE] = _unreadable_part(environ)
    part: str | None = environ[UNREADABLE]
    return part


def _unreadable_part(environ: WSGIEnvironment) -> str | None:
    # ASCII is UTF-8: only a part with other characters is decoded (nearly every request is ASCII throughout).
    path = environ.get("PATH_INFO", "")
    if not path.isascii():
        try:
            _utf8(path)
        except UnicodeError:
            return "path"
    query = environ.get("QUERY_STRING", "")
    if "%" in query or not query.isascii():
        try:
            unquote_to_bytes(_raw(query).replace(b"+", b" ")).decode("utf-8")
        except UnicodeError:
            return "query"
    own = environ.keys() - PROCESS_ONLY
    if "".join([value for name in own if isinstance(value := environ[name], str)]).isascii():
        return None
    for name, value in environ.items():  # in the environ's order: the first part found is the one named
        if isinstance(value, str) and not value.isascii() and _from_request(name):
            try:
                _utf8(value)
            except UnicodeError:
                return "cookies" if name == "HTTP_COOKIE" else "headers"
    return None


def unreadable_fields(body: bytes) -> set[str]:
    """The names of the fields of a URL-encoded form body whose values are not UTF-8 text."""
    found = set()
    for pair in body.split(b"&"):
        name, _, value = pair.partition(b"=")
        try:
            unquote_to_bytes(value.replace(b"+", b" ")).decode("utf-8")
        except UnicodeError:
            found.add(unquote_to_bytes(name.replace(b"+", b" ")).decode("utf-8", "replace"))
    return found


def body_limit(content_type: str, limit: int) -> int:
    """The most bytes a request body of `content_type` may have, where MAX_CONTENT_LENGTH is `limit`: that, and for
    an upload (a file of up to `limit` bytes in a form), `UPLOAD_ROOM` more. Over it, the body gets 413 unread."""
    return limit + UPLOAD_ROOM if content_type.partition(";")[0].strip().lower() == UPLOAD_BODY else limit


def too_large(content_type: str, content_length: str, limit: int) -> bool:
    """Whether a body declared `content_length` bytes long (a Content-Length header's text) is over its limit."""
    return content_length.isdigit() and int(content_length) > body_limit(content_type, limit)


class BodyGate:
    """WSGI layer that reads each request body whole before the portal sees it, with at most `places` threads of
    this process waiting on bodies at once; a request finding every place taken is not read, and Flask answers
    it with the 503 page. A body over its limit (`body_limit`) is left for Flask to refuse (413) unread. The
    answer to a request whose body is left unread says `Connection: close`."""

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
    """`start_response`, with `Connection: close` added to the answer's headers."""

    def start(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        return start_response(status, [*headers, ("Connection", "close")], exc_info)

    return start


def gate_bodies(app: Flask) -> None:
    """Read request bodies through a `BodyGate` (called once every other WSGI layer of the app is in place)."""
    app.wsgi_app = BodyGate(app.wsgi_app, BODY_READERS, app.config["MAX_CONTENT_LENGTH"])  # type: ignore[method-assign]


def register(app: Flask) -> None:
    """Answer an unreadable request with the 400 page, and a body over its limit with the 413 page; note a form's
    unreadable fields for its form."""
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


def _raw(text: str) -> bytes:
    return text.encode("latin-1")


def _utf8(text: str) -> str:
    return _raw(text).decode("utf-8")
