"""A request id on every request, in the response and every log line; one access line per request; logs as
text or one JSON object a line, the server's own lines included (`server_logging`); no line of any logger quoting
a secret (`egress`: the log-record factory, and a filter on every handler set up here)."""

from __future__ import annotations

import logging
import random
import sys
import threading
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from flask import Flask, Response, g, has_request_context, request
from pythonjsonlogger.core import RESERVED_ATTRS
from pythonjsonlogger.json import JsonFormatter
from werkzeug.wsgi import ClosingIterator

from . import egress, tracing
from .config import secret_values

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

TEXT_FORMAT = "%(asctime)s %(levelname)s [%(request_id)s] %(name)s: %(message)s"
JSON_FIELDS = "%(asctime)s %(levelname)s %(name)s %(message)s %(request_id)s %(user)s %(environment)s %(trace_id)s"
JSON_NAMES = {"asctime": "time", "levelname": "level", "name": "logger"}
ACCESS_LOGGER = "petportal.access"
# Libraries the portal calls whose warnings it writes in its own format.
LIBRARY_LOGGERS = ("opentelemetry", "urllib3")
# The servers' own loggers, formatted like the portal's when they take `server_logging`'s configuration.
SERVER_LOGGERS = ("gunicorn.error", "_granian", "granian.access")


class RequestContextFilter(logging.Filter):
    """Adds the request id, the user and the environment served to every record ("-" outside a request).

    It reads only what the request has already worked out, so logging never loads a user or touches
    the database.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if has_request_context():
            user = g.get("_login_user")
            serving = g.get("serving")
            record.request_id = g.get("request_id", "-")
            record.user = getattr(user, "username", None) or "-"
            record.environment = serving.environment.name if serving is not None else "-"
        else:
            # An access line is written once the answer is sent, outside the request: it brings its own id.
            record.request_id = getattr(record, "request_id", "-")
            record.user = record.environment = "-"
        if not hasattr(record, "trace_id"):
            record.trace_id = tracing.trace_id() or "-"
        return True


class DevelopmentServerRequests(logging.Filter):
    """Drops the development server's own line for each request: the portal writes its access line itself."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.name == "werkzeug" and " - - [" in record.getMessage())


def formatter(log_format: str) -> logging.Formatter:
    """The one formatter of every line: the portal's, its access lines' and, through `server_logging`, the
    server's."""
    if log_format == "json":
        # Every attribute of a record not in `reserved_attrs` becomes a field: the guard's mark is not one.
        return JsonFormatter(JSON_FIELDS, rename_fields=JSON_NAMES, reserved_attrs=[*RESERVED_ATTRS, egress.CHECKED])
    return logging.Formatter(TEXT_FORMAT)


def configure(log_format: str) -> None:
    """Send the portal's logs to standard error, as text or as JSON (`PETPORTAL_LOG_FORMAT`). With JSON, the
    development server's lines (`flask run`, `python app.py`) go the same way. Every record of every logger passes
    the egress guard (`egress.guard_every_record`)."""
    egress.guard_every_record()
    # OpenTelemetry's and urllib3's warnings (a malformed incoming trace header, a retried call) are written as
    # the portal's lines are, never by Python's bare fallback handler.
    names = ["petportal", *LIBRARY_LOGGERS] + (["werkzeug"] if log_format == "json" else [])
    for name in names:
        logger = logging.getLogger(name)
        for handler in [h for h in logger.handlers if any(isinstance(f, RequestContextFilter) for f in h.filters)]:
            logger.removeHandler(handler)
        handler = logging.StreamHandler()
        handler.setFormatter(formatter(log_format))
        handler.addFilter(RequestContextFilter())
        handler.addFilter(egress.EgressFilter())  # after the context: its fields are checked too
        logger.addHandler(handler)
        logger.setLevel(logging.INFO if name in ("petportal", "werkzeug") else logging.WARNING)
        logger.propagate = name != "werkzeug"  # on to the tests' capture; a server's root handler skips them
    # The development server's per-request line would repeat the portal's own access line.
    werkzeug = logging.getLogger("werkzeug")
    if not any(isinstance(f, DevelopmentServerRequests) for f in werkzeug.filters):
        werkzeug.addFilter(DevelopmentServerRequests())


def uncaught_exceptions_logged() -> None:
    """In a server's processes: an exception no code caught (in any thread) and a Python warning become log records,
    so they pass the egress guard like every line, instead of being printed to standard error by Python itself."""
    logging.captureWarnings(True)
    log = logging.getLogger("petportal")

    def thread_failed(args: threading.ExceptHookArgs) -> None:
        if args.exc_type is not SystemExit:  # as Python's own hook: a thread may end that way
            name = args.thread.name if args.thread is not None else "?"
            log.error("uncaught exception in thread %s", name, exc_info=args.exc_value)

    def process_failed(kind: type[BaseException], value: BaseException, trace: Any) -> None:
        log.critical("uncaught exception", exc_info=value)

    threading.excepthook = thread_failed
    sys.excepthook = process_failed


def server_logging(log_format: str) -> dict[str, Any]:
    """With JSON, a `logging.config.dictConfig` for a production server (gunicorn's `logconfig_dict`, granian's
    `log_dictconfig`): its own start, stop and worker lines, and any library's, become JSON too. With text, {}:
    the server keeps its own format."""
    if log_format != "json":
        return {}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {
            "context": {"()": RequestContextFilter},
            "not_the_portals": {"()": NotThePortals},
            "egress": {"()": egress.EgressFilter},
        },
        "formatters": {"portal": {"()": formatter, "log_format": log_format}},
        "handlers": {
            "others": {
                "class": "logging.StreamHandler",
                "formatter": "portal",
                "filters": ["context", "not_the_portals", "egress"],
            },
        },
        "root": {"level": "INFO", "handlers": ["others"]},
        "loggers": {name: {"level": "INFO", "propagate": True} for name in SERVER_LOGGERS},
    }


class NotThePortals(logging.Filter):
    """Lets through every line but those the portal's own handlers write (`configure`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.name.startswith(("petportal", *LIBRARY_LOGGERS))


# Where the request's id is kept in the WSGI environ (`assigned_request_id`).
REQUEST_ID = "petportal.request_id"


class AccessLog:
    """WSGI layer in front of the portal (and its page cache): one line per request, once its answer is made
    (a page made whole, as the page cache's are) or sent (one Flask streams), with the method, the path (never
    the query, which may hold what a visitor typed), the status, the duration and the request id; and the trace
    id when tracing."""

    def __init__(self, wsgi_app: WSGIApplication) -> None:
        self.wsgi_app = wsgi_app

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        started = time.perf_counter()
        assigned_request_id(environ)
        seen: dict[str, Any] = {"status": 0, "trace_id": "-"}

        def remember(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            seen["status"] = int(status[:3]) if status[:3].isdigit() else 0
            seen["trace_id"] = tracing.trace_id() or "-"
            return start_response(status, headers, exc_info)

        def write() -> None:
            if not ACCESS_LOG.isEnabledFor(logging.INFO):
                return
            method = environ.get("REQUEST_METHOD", "-")
            # PATH_INFO is the percent-decoded path as Latin-1 text; the formatter escapes what it must.
            path = environ.get("SCRIPT_NAME", "") + environ.get("PATH_INFO", "")
            # What a client chose is all a line can quote a secret with (the rest is the portal's own): checked here,
            # and the record made directly, not by the log-record factory, whose guard would check all of it again.
            if egress.quotes_secret(f"{method} {path}"):
                method, path = "-", egress.WITHHELD_VALUE
            args = (method, path, seen["status"], round((time.perf_counter() - started) * 1000, 2))
            record = logging.LogRecord(ACCESS_LOGGER, logging.INFO, __file__, 0, ACCESS_MESSAGE, args, None)
            record.__dict__.update(zip(("method", "path", "status", "duration_ms"), args, strict=True))
            record.__dict__.update(request_id=environ[REQUEST_ID], trace_id=seen["trace_id"], **{egress.CHECKED: True})
            ACCESS_LOG.handle(record)

        body = self.wsgi_app(environ, remember)
        if isinstance(body, list):  # made whole: a server sends a list in one piece, without iterating it
            write()
            return body
        return ClosingIterator(body, [write])


# An access line's message, filled in with the method, the path, the status and the duration.
ACCESS_MESSAGE = "%s %r %s %.2f ms"
ACCESS_LOG = logging.getLogger(ACCESS_LOGGER)


def assigned_request_id(environ: WSGIEnvironment) -> str:
    """This request's id, made once (`request_id`) and kept in the environ: the access line, the page cache and
    Flask's hook all give the same."""
    if REQUEST_ID not in environ:
        environ[REQUEST_ID] = request_id(environ.get("HTTP_X_REQUEST_ID", ""))
    assigned: str = environ[REQUEST_ID]
    return assigned


def request_id(incoming: str) -> str:
    """The id of a request: a proxy's own (`incoming`) when it looks like one, else a new one. Arbitrary
    text is never echoed into logs. Also used by the page cache, which answers before Flask.

    A new id is 128 random bits from `random`, which each worker reseeds at its fork: an id names a request in the
    logs and guards nothing, and `os.urandom` would let go of the GIL on every request, a chance for each of the
    worker's other threads to take it in between."""
    if incoming.isascii() and incoming.isalnum() and 8 <= len(incoming) <= 64:
        return incoming
    return f"{random.getrandbits(128):032x}"


def register(app: Flask) -> None:
    """Give every request an id, return it as X-Request-ID, and log with it. (`register_access` puts the
    access lines in front, once every other WSGI layer is in place.) No log line or span of the process may quote
    one of the app's secrets (`egress.protect`)."""
    egress.protect(secret_values(app.config))
    configure(app.config["LOG_FORMAT"])

    @app.before_request
    def assign_request_id() -> None:
        g.request_id = assigned_request_id(request.environ)

    @app.after_request
    def return_request_id(response: Response) -> Response:
        if "request_id" in g:
            response.headers["X-Request-ID"] = g.request_id
        return response


def register_access(app: Flask) -> None:
    """Write an access line for every request, the page cache's answers included."""
    app.wsgi_app = AccessLog(app.wsgi_app)  # type: ignore[method-assign]  # Flask's own WSGI hook
