"""Pages, stylesheets and scripts compressed by what the browser accepts: Brotli, else gzip, else none.

Flask-Compress does the work and adds `Vary: Accept-Encoding`. Two things are the portal's own:
- `encoding_for` is the one choice of encoding, the library's own: the compressor uses it, and the page cache
  keys each stored page by it, so a page stored compressed one way is only replayed to a browser that would
  have been sent it that way (`page_cache._page_key`).
- The compressor is called from the portal's own hook, which then takes out the `Date` that its conditional
  handling writes: the server writes the one `Date` of every response (see page_cache).

Compressed pages still carry the CSRF token. The session cookie is `SameSite=Lax`, so another site cannot
have a visitor's browser fetch their pages in the background; and a page's length, however often measured,
could tell only the token's unsigned part, while a form is accepted only with the part signed by the secret key.
"""

from __future__ import annotations

from flask import Flask, Response
from flask_compress import Compress
from flask_compress.flask_compress import _choose_algorithm

# Best first. Every browser takes both; zstd would add a third copy of each cached page for little gain.
ENCODINGS = ("br", "gzip")
# What is worth compressing: pages, their assets, the JSON of an import's progress.
TYPES = ("text/html", "text/css", "text/javascript", "application/javascript", "application/json", "image/svg+xml")

compress = Compress()


def settings() -> dict[str, object]:
    """Flask-Compress's settings (config.defaults takes them: no extension sets a setting of its own)."""
    return {
        "COMPRESS_REGISTER": False,  # `register` calls it, then takes out the Date it writes
        "COMPRESS_ALGORITHM": list(ENCODINGS),
        "COMPRESS_MIMETYPES": list(TYPES),
        "COMPRESS_BR_LEVEL": 5,
        # A streamed response is sent as it is: its stream would not be closed once compressed (an open file
        # left behind per static file). Static files are read whole first (static_files), so they are compressed.
        "COMPRESS_STREAMS": False,
    }


def encoding_for(accept_encoding: str) -> str | None:
    """The encoding a response to this `Accept-Encoding` is sent in ("br", "gzip"), or None for none."""
    return _choose_algorithm(ENCODINGS, accept_encoding)


def register(app: Flask) -> None:
    """Compress each response the browser can take compressed, as the last step before it leaves Flask."""
    compress.init_app(app)

    @app.after_request
    def compressed(response: Response) -> Response:
        response = compress.after_request(response)
        del response.headers["Date"]  # written by make_conditional; the server writes its own
        return response
