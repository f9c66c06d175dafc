"""The request's way through the portal, in one place: every request hook and WSGI layer, in the order it runs.

Flask runs `before_request` hooks in the order they are added and `after_request` hooks in the reverse order, so
the first hook added below is the last to see a response. WSGI layers wrap what is there already, so the last
one added is the first to see a request. Read top to bottom, `build` is the response's way out through the hooks,
then the request's way in through the layers."""

from flask import Flask
from flask_bootstrap import Bootstrap5
from flask_wtf.csrf import CSRFError

from petportal import egress
from petportal.auth import sessions, sso, throttle
from petportal.config import secret_values, settings
from petportal.data import session_store, unit_of_work
from petportal.extensions import init_extensions
from petportal.i18n import languages
from petportal.imports import engines
from petportal.petstore import environments
from petportal.secret_guard import SecretGuard
from petportal.serving import choice, stand_in
from petportal.telemetry import logs, metrics, tracing
from petportal.web import compression, error_pages, front_door, page_cache, security, static_files


def build(app: Flask) -> None:
    """Install every hook and layer of the request's way, in the order the docstring above explains."""
    # First of all: no log line or span of the process may quote one of the app's secrets.
    secrets = secret_values(settings(app))
    egress.protect(SecretGuard(secrets) if secrets else None)
    # Request hooks: the first added runs its after_request last.
    unit_of_work.register(app, error_pages.handle_database_error)  # its commit runs after every other hook
    compression.register(app)  # the body it compresses is final once every later hook has run
    logs.register(app)  # the request id, before anything logs
    metrics.register(app)  # the request's start, before any reading
    front_door.register(app)  # refuses unreadable requests before any other code reads them
    init_extensions(app)  # database, CSRF (a before_request hook), logins
    sso.register(app)
    session_store.register(app)  # server-side sessions
    sessions.register(app)  # the remember cookie written or deleted after each request that changed it
    throttle.register(app)
    Bootstrap5(app)
    page_cache.register(app)  # WSGI layer 1 (innermost): shared anonymous pages; its hook marks what may be kept
    static_files.register(app)
    languages.register(app)  # the reader's language
    environments.register(app)  # each environment's clients and health
    choice.register(app)  # the environment everyone is served from
    stand_in.register(app)  # the store's last good answers, standing in while it is not answering
    engines.register(app)  # bulk imports left by a stopped worker
    security.register(app)  # security headers; behind a proxy, WSGI layer 2: ProxyFix
    error_pages.register(app, (CSRFError, sessions.refuse_form))
    # WSGI layers, each in front of those before it.
    front_door.gate_bodies(app)  # bodies read whole, a few at a time, in front of the page cache and Flask
    logs.register_access(app)  # the access line, in front of every layer above
    tracing.register(app)  # outermost: the access lines carry its trace id
