"""The micro-cache of anonymous list and detail pages, their ETags, and no-store for everything else.

A cached page is keyed by environment, that environment's generation and the full path. Adding an
animal bumps its environment's generation, so every process sharing the cache stops serving the old
pages at once; another environment's pages are never under the same key.
"""

import math
import time
from functools import wraps

from flask import current_app, make_response, request, session
from flask_login import current_user

from . import metrics
from .extensions import cache
from .serving import serving

# After a failure, the cache is not asked again for this long (per process).
RETRY_AFTER_FAILURE_SECONDS = 5


def cached_page(view):
    """Serve this GET view from the micro-cache for anonymous visitors, with an ETag and 304s."""

    @wraps(view)
    def serve(*args, **kwargs):
        if current_user.is_authenticated:
            return view(*args, **kwargs)
        key = _page_key() if _caching() else None
        stored = _safely(cache.get, key) if key else None
        if key:
            metrics.PAGE_CACHE.labels("miss" if stored is None else "hit").inc()
        if stored is None:
            response = make_response(view(*args, **kwargs))
            # Only a page that used nothing of the visitor's own (no flash, no CSRF token) is shared.
            if key and response.status_code == 200 and not session:
                seconds = math.ceil(current_app.config["CACHE_SECONDS"])
                _safely(cache.set, key, (response.get_data(), response.mimetype), timeout=seconds)
        else:
            body, mimetype = stored
            response = current_app.response_class(body, mimetype=mimetype)
        if response.status_code == 200:
            response.headers["Cache-Control"] = "no-cache"
            response.add_etag()
            response.make_conditional(request)
        return response

    return serve


def invalidate(environment_name):
    """Forget every cached page of one environment, in every process that shares the cache."""
    if _caching():
        _safely(cache.cache.inc, _generation_key(environment_name))


def register(app):
    """Bind the cache (Redis when configured; see config.derived), and mark every other HTML response as
    never to be stored."""
    cache.init_app(app)
    app.extensions["petportal.page_cache"] = {"down_until": 0.0}

    @app.after_request
    def never_store_personal_pages(response):
        if "Cache-Control" not in response.headers and response.mimetype == "text/html":
            response.headers["Cache-Control"] = "no-store"
        return response


def _caching():
    return current_app.config["CACHE_SECONDS"] > 0


def _generation_key(environment_name):
    return f"generation:{environment_name}"


def _page_key():
    environment = serving().environment.name
    generation = _safely(cache.get, _generation_key(environment)) or 0
    return f"page:{environment}:{generation}:{request.full_path}"


def _safely(operation, *args, **kwargs):
    """A cache that is down is a cache miss, never an error page: one log line, then left alone a while."""
    state = current_app.extensions["petportal.page_cache"]
    if time.monotonic() < state["down_until"]:
        return None
    try:
        return operation(*args, **kwargs)
    except Exception as error:  # noqa: BLE001 - any failure of the cache backend
        state["down_until"] = time.monotonic() + RETRY_AFTER_FAILURE_SECONDS
        current_app.logger.warning(
            "the page cache is unavailable (%s); pages are served uncached for %d s",
            type(error).__name__,
            RETRY_AFTER_FAILURE_SECONDS,
        )
        return None
