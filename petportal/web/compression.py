"""Pages, stylesheets and scripts compressed by what the browser accepts: Brotli, else gzip, else none.

Flask-Compress compresses and adds `Vary: Accept-Encoding`, told the one choice of encoding (`encoding_for`), which
also keys a stored page (`page_cache._page_key`), replayed only to a browser that chose the same. A range of a file
(206) is sent as the file's own bytes, as its range counts them. A page that shows a secret worth guessing (the
second factor's key, the recovery codes) is never compressed (`uncompressed`): it also repeats what the visitor's
URL holds (its language links), so its compressed length could tell another site, over many visits, how much matches
a guess (BREACH). Every other page carries only the CSRF token, whose signed part changes every second. The
compressor's conditional handling writes no `Date`: the server writes it (see page_cache.ServerDated).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache, wraps
from typing import ParamSpec, TypeVar

from flask import Flask, Response, g, request
from flask_compress import Compress
from werkzeug.http import parse_accept_header

from petportal.config import ENCODINGS

P = ParamSpec("P")
T = TypeVar("T")

compress = Compress()


@lru_cache(maxsize=256)  # kept by issue 41's bench with the page cache's memos (page_cache.REMEMBERED_URLS)
def encoding_for(accept_encoding: str) -> str | None:
    """The encoding a response to this `Accept-Encoding` is sent in ("br", "gzip"), or None: a coding with q=0 is
    refused, one named outranks `*`, and `identity` with a higher q than any coding means none."""
    qualities = {value.lower(): quality for value, quality in parse_accept_header(accept_encoding)}

    def quality(coding: str) -> float:
        return qualities.get(coding, qualities.get("*", 0))

    best = max(ENCODINGS, key=quality)  # the first of equals
    if quality(best) <= 0 or qualities.get("identity", 0) > quality(best):
        return None
    return best


def uncompressed(view: Callable[P, T]) -> Callable[P, T]:
    """Never compress this view's answers: it shows a secret that its page's length must not give away."""

    @wraps(view)
    def marked(*args: P.args, **kwargs: P.kwargs) -> T:
        g.uncompressed = True
        return view(*args, **kwargs)

    return marked


def register(app: Flask) -> None:
    """Compress each whole answer the browser chose to take compressed, as the last step before it leaves Flask."""
    compress.init_app(app)

    @app.after_request
    def compressed(response: Response) -> Response:
        if response.status_code == 206 or g.get("uncompressed"):
            return response  # the same bytes, whatever the browser accepts
        # Flask-Compress reads the header itself: it is given the choice made here, and nothing else.
        request.environ["HTTP_ACCEPT_ENCODING"] = encoding_for(request.headers.get("Accept-Encoding", "")) or ""
        return compress.after_request(response)
