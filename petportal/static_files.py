"""Static files under content-addressed URLs, kept by browsers for a year.

Every page links a stylesheet or script as `/static/<file>?v=<digest of its bytes>` (`versioned_url`, through
the `fixed_url` links of the templates). A request whose `v` is the file's digest gets `Cache-Control: public,
max-age=31536000, immutable`: the browser never asks again, and a new release, whose files have new digests,
is fetched at once. Any other request for the file is answered as Flask answers it (revalidated each time).
Each file is read whole, so that it is compressed as the pages are (`compression`).
Digests are worked out once per process and file; files do not change while a process runs.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from flask import Flask, current_app, request, url_for
from werkzeug.wrappers import Response

# The endpoints that serve files: the portal's own and Bootstrap-Flask's (Bootstrap's scripts).
STATIC_ENDPOINTS = ("static", "bootstrap.static")
YEAR = 365 * 24 * 3600
IMMUTABLE = f"public, max-age={YEAR}, immutable"
# Characters of the SHA-256 digest in a URL: 64 bits, plenty to tell two versions of one file apart.
DIGEST_LENGTH = 16


def versioned_url(endpoint: str, filename: str) -> str:
    """The URL of a static file with the digest of its content."""
    return url_for(endpoint, filename=filename, v=_digest(current_app, endpoint, filename))


def _digest(app: Flask, endpoint: str, filename: str) -> str:
    digests: dict[tuple[str, str], str] = app.extensions.setdefault("petportal.static_digests", {})
    key = (endpoint, filename)
    if key not in digests:
        digests[key] = hashlib.sha256((_folder(app, endpoint) / filename).read_bytes()).hexdigest()[:DIGEST_LENGTH]
    return digests[key]


def _folder(app: Flask, endpoint: str) -> Path:
    blueprint = endpoint.rpartition(".")[0]
    folder = app.blueprints[blueprint].static_folder if blueprint else app.static_folder
    assert folder is not None, endpoint
    return Path(folder)


def register(app: Flask) -> None:
    """Keep a static file for a year when it was asked for under its current digest; read it whole, so that it is
    compressed (runs before `compression`'s hook, registered earlier)."""

    @app.after_request
    def keep_versioned_files(response: Response) -> Response:
        if request.endpoint not in STATIC_ENDPOINTS:
            return response
        if response.direct_passthrough:
            response.direct_passthrough = False
            response.make_sequence()  # the files are small; the file is closed with the response
        filename = (request.view_args or {})["filename"]
        if response.status_code in (200, 304) and request.args.get("v") == _digest(app, request.endpoint, filename):
            response.headers["Cache-Control"] = IMMUTABLE
        return response
