"""The front door: whether a request can be read at all, decided once, before the page cache and the views.

A WSGI server hands the path, the query string, the cookies and every header over as bytes (each byte one
latin-1 character). The portal reads them as UTF-8 text; a request in which any of them is not (after
percent-decoding, where a URL encodes bytes) is answered with the portal's 400 page and its request id,
never a 500 and never a traceback. A form field whose bytes are not UTF-8 is marked, and the form shows
the error next to that field (`forms.PortalForm`): Werkzeug would otherwise keep the bytes as `%FF` text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import unquote_to_bytes

from flask import Flask, g, request
from werkzeug.exceptions import BadRequest

if TYPE_CHECKING:
    from _typeshed.wsgi import WSGIEnvironment

FORM_BODY = "application/x-www-form-urlencoded"
NOT_UTF8 = "This is not text the portal can read: it is not UTF-8."
# Where `unreadable` keeps its answer in the WSGI environ.
UNREADABLE = "petportal.unreadable"
VERBS = {"path": "is", "query": "is", "cookies": "are", "headers": "are"}


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
    try:
        _utf8(environ.get("PATH_INFO", ""))
    except UnicodeError:
        return "path"
    try:
        unquote_to_bytes(_raw(environ.get("QUERY_STRING", "")).replace(b"+", b" ")).decode("utf-8")
    except UnicodeError:
        return "query"
    for name, value in environ.items():
        if (name.startswith("HTTP_") or name in ("CONTENT_TYPE", "CONTENT_LENGTH")) and isinstance(value, str):
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


def register(app: Flask) -> None:
    """Answer an unreadable request with the 400 page; note a form's unreadable fields for its form."""

    @app.before_request
    def read_the_request() -> None:
        # The host first: a refused host has its own 400 page, the only one that needs no URL of this site.
        request.host  # noqa: B018 - reading it raises SecurityError for a host the portal does not answer to
        part = unreadable(request.environ)
        if part is not None:
            raise UnreadableRequest(f"This request could not be read: its {part} {VERBS[part]} not UTF-8 text.")
        if request.mimetype == FORM_BODY:
            # Cached, so the form is then parsed from the same bytes (never more than MAX_CONTENT_LENGTH).
            g.unreadable_fields = unreadable_fields(request.get_data(cache=True))


def _raw(text: str) -> bytes:
    return text.encode("latin-1")


def _utf8(text: str) -> str:
    return _raw(text).decode("utf-8")
