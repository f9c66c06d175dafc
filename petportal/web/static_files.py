"""Static files under content-addressed URLs (`/static/<file>?v=<digest>`, the templates' `static_url`), kept by
browsers for a year: a new release's files have new digests, so they are fetched at once. Any other request for a
file is answered as Flask answers it (revalidated each time). A digest is worked out once per process per file, kept
under its normalised path: however a request spells a path, none is read outside the folders, none kept twice.
"""

from __future__ import annotations

import hashlib
import os

from flask import Flask, current_app, request, url_for
from werkzeug.security import safe_join
from werkzeug.wrappers import Response

from petportal.config import STATIC_ENDPOINTS

IMMUTABLE = "public, max-age=31536000, immutable"  # a year
# Characters of the SHA-256 digest in a URL: 64 bits, plenty to tell two versions of one file apart.
DIGEST_LENGTH = 16
DIGESTS = "petportal.static_digests"


def versioned_url(endpoint: str, filename: str) -> str:
    """The URL of a static file with the digest of its content."""
    digest = _digest(current_app, endpoint, filename)
    assert digest is not None, f"no static file {filename!r} for {endpoint}"  # a template names a missing file
    return url_for(endpoint, filename=filename, v=digest)


def _digest(app: Flask, endpoint: str, filename: str) -> str | None:
    """The digest of the file `filename` names in the endpoint's folder, found as `send_from_directory` finds it
    (inside the folder, normalised, a regular file), or None when there is no such file."""
    blueprint = endpoint.rpartition(".")[0]
    folder = app.blueprints[blueprint].static_folder if blueprint else app.static_folder
    path = safe_join(folder, filename) if folder else None
    if path is None:
        return None
    path = os.path.normpath(path)
    if not os.path.isfile(path):
        return None
    digests: dict[str, str] = app.extensions.setdefault(DIGESTS, {})
    if path not in digests:
        with open(path, "rb") as file:
            digests[path] = hashlib.sha256(file.read()).hexdigest()[:DIGEST_LENGTH]
    return digests[path]


def register(app: Flask) -> None:
    """Link static files under their digests; keep one sent under its current digest for a year; read each whole,
    so that it is compressed (this hook runs before `compression`'s, registered earlier)."""
    app.jinja_env.globals["static_url"] = versioned_url

    @app.after_request
    def keep_versioned_files(response: Response) -> Response:
        if request.endpoint not in STATIC_ENDPOINTS or request.method not in ("GET", "HEAD"):
            return response
        if response.direct_passthrough:
            response.direct_passthrough = False
            response.make_sequence()  # the files are small; the file is closed with the response
        version = request.args.get("v")
        filename = (request.view_args or {}).get("filename", "")
        if version and response.status_code in (200, 304) and version == _digest(app, request.endpoint, filename):
            response.headers["Cache-Control"] = IMMUTABLE
        return response
