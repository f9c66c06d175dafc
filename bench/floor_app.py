"""Bench-only: the floor, a WSGI app answering every request with the same 9 kB of HTML and doing no work.

What a server can do at best on this machine: `python -m bench` sets the cached portal's rate against it.
"""

from collections.abc import Iterable
from typing import Any

_HEAD = b"<!doctype html>\n<title>floor</title>\n<p>"
_TAIL = b"</p>\n"
BODY = _HEAD + b"x" * (9 * 1024 - len(_HEAD) - len(_TAIL)) + _TAIL
HEADERS = [("Content-Type", "text/html; charset=utf-8"), ("Content-Length", str(len(BODY)))]


def app(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
    """The same 9 kB page, whatever was asked."""
    start_response("200 OK", HEADERS)
    return [BODY]
