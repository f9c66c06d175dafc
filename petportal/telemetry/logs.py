"""A request id on every request, in the response and every log line; one access line per request; logs as
text or one JSON object a line, the server's own lines included (`server_logging`); no line of any logger quoting
a secret (`egress`: the log-record factory, and a filter on every handler set up here)."""

from __future__ import annotations

import collections
import logging
import multiprocessing.util
import os
import secrets
import select
import sys
import threading
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from flask import Flask, Response, g, has_request_context, request
from pythonjsonlogger.core import RESERVED_ATTRS
from pythonjsonlogger.json import JsonFormatter
from werkzeug.wsgi import ClosingIterator

from petportal import egress
from petportal.config import settings
from petportal.telemetry import tracing

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

TEXT_FORMAT = "%(asctime)s %(levelname)s [%(request_id)s] %(name)s: %(message)s"
JSON_FIELDS = "%(asctime)s %(levelname)s %(name)s %(message)s %(request_id)s %(user)s %(environment)s %(trace_id)s"
JSON_NAMES = {"asctime": "time", "levelname": "level", "name": "logger"}
ACCESS_LOGGER = "petportal.access"
LIBRARY_LOGGERS = ("opentelemetry", "urllib3")
# The servers' own loggers, formatted like the portal's when they take `server_logging`'s configuration.
SERVER_LOGGERS = ("gunicorn.error", "_granian", "granian.access")


class RequestContextFilter(logging.Filter):
    """Adds the request id, the user and the environment served to every record ("-" outside a request), from only
    what the request has already worked out: logging never loads a user or touches the database."""

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


def not_a_development_server_request(record: logging.LogRecord) -> bool:
    """Drops the development server's own line for each request: the portal writes its access line itself."""
    return not (record.name == "werkzeug" and " - - [" in record.getMessage())


class EachSecondOnce(logging.Formatter):
    """A line's time as `logging.Formatter` writes it, its date and clock time worked out once a second rather
    than once a line, as every request writes one (docs/performance.md, "access lines")."""

    _second: tuple[int, str] = (-1, "")

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        if datefmt or not self.default_msec_format:
            return super().formatTime(record, datefmt)
        second, text = self._second
        if second != int(record.created):
            text = time.strftime(self.default_time_format, self.converter(record.created))
            self._second = (int(record.created), text)  # one assignment: another thread sees the pair whole
        return self.default_msec_format % (text, record.msecs)


class JsonLines(EachSecondOnce, JsonFormatter):
    """One JSON object a line (`JSON_FIELDS`)."""


def formatter(log_format: str) -> logging.Formatter:
    """The one formatter of every line: the portal's, its access lines' and the server's (`server_logging`)."""
    if log_format == "json":
        # Every attribute of a record not in `reserved_attrs` becomes a field: the guard's mark is not one.
        return JsonLines(JSON_FIELDS, rename_fields=JSON_NAMES, reserved_attrs=[*RESERVED_ATTRS, egress.CHECKED])
    return EachSecondOnce(TEXT_FORMAT)


def configure(log_format: str) -> None:
    """Send the portal's logs to standard error, as text or as JSON (`PETPORTAL_LOG_FORMAT`). With JSON, the
    development server's lines (`flask run`, `python app.py`) go the same way."""
    egress.guard_every_record()
    # OpenTelemetry's and urllib3's warnings (a malformed incoming trace header, a retried call) are written as
    # the portal's lines are, never by Python's bare fallback handler.
    for name in ["petportal", *LIBRARY_LOGGERS] + (["werkzeug"] if log_format == "json" else []):
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
    # The development server's per-request line would repeat the portal's own access line (added once: addFilter
    # skips a filter already there).
    logging.getLogger("werkzeug").addFilter(not_a_development_server_request)


def uncaught_exceptions_logged() -> None:
    """In a server's processes: an exception no code caught (in any thread) and a Python warning become log records,
    so they pass the egress guard like every line, instead of being printed to standard error by Python itself."""
    logging.captureWarnings(True)
    log = logging.getLogger("petportal")

    def thread_failed(args: threading.ExceptHookArgs) -> None:
        if args.exc_type is not SystemExit:  # as Python's own hook: a thread may end that way
            name = args.thread.name if args.thread is not None else "?"
            log.error("uncaught exception in thread %s", name, exc_info=args.exc_value)

    threading.excepthook = thread_failed
    sys.excepthook = lambda kind, value, trace: log.critical("uncaught exception", exc_info=value)


def server_logging(log_format: str) -> dict[str, Any]:
    """With JSON, a `logging.config.dictConfig` for a production server (gunicorn's `logconfig_dict`, granian's
    `log_dictconfig`): its own start, stop and worker lines, and any library's, become JSON too. With text, {}:
    the server keeps its own format."""
    if log_format != "json":
        return {}
    filters = {"context": RequestContextFilter, "not_the_portals": NotThePortals, "egress": egress.EgressFilter}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {name: {"()": factory} for name, factory in filters.items()},
        "formatters": {"portal": {"()": formatter, "log_format": log_format}},
        "handlers": {"others": {"class": "logging.StreamHandler", "formatter": "portal", "filters": list(filters)}},
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
    """WSGI layer in front of the portal (and its page cache): one line per request, once its answer is made (a page
    made whole, as the page cache's are) or sent (one Flask streams), with the method, the path (never the query, which
    may hold what a visitor typed), the status, the duration and the request id; and the trace id when tracing."""

    def __init__(self, wsgi_app: WSGIApplication) -> None:
        self.wsgi_app = wsgi_app

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        started = time.perf_counter()
        assigned = assigned_request_id(environ)
        seen: dict[str, Any] = {"status": 0, "trace_id": "-"}

        def remember(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            seen["status"] = int(status[:3]) if status[:3].isdigit() else 0
            seen["trace_id"] = tracing.trace_id() or "-"
            return start_response(status, headers, exc_info)

        def write() -> None:
            method = environ.get("REQUEST_METHOD", "-")
            # PATH_INFO is the percent-decoded path as Latin-1 text; the formatter escapes what it must.
            path = environ.get("SCRIPT_NAME", "") + environ.get("PATH_INFO", "")
            milliseconds = round((time.perf_counter() - started) * 1000, 2)
            event = AccessEvent(time.time(), method, path, seen["status"], milliseconds, assigned, seen["trace_id"])
            ACCESS_LINES.write(event)

        body = self.wsgi_app(environ, remember)
        if isinstance(body, list):  # made whole: a server sends a list in one piece, without iterating it
            write()
            return body
        return ClosingIterator(body, [write])


class AccessEvent(NamedTuple):
    """What an access line says; `created` is when the answer was made (a `time.time()`), `trace_id` "-" untraced."""

    created: float
    method: str
    path: str
    status: int
    duration_ms: float
    request_id: str
    trace_id: str


class AccessLines:
    """Where `AccessLog` sends each request's `AccessEvent`, to become a line of the access logger.

    At first each is logged at once. In a production server's worker (`batch_access_lines`), a request's thread
    only keeps its event, and a thread of the worker's own makes the waiting events into lines every
    `FLUSH_SECONDS` (`drain`): one request costs an append, and the lines are made many at a time. Either way a
    line is the same record through the same handlers and formatter, with the time of its answer."""

    def __init__(self) -> None:
        self.log = logging.getLogger(ACCESS_LOGGER)
        self.waiting: collections.deque[AccessEvent] | None = None
        self.draining = threading.Lock()
        # (process id, the attributes of a record made in that process): what `_log` copies.
        self._model: tuple[int, dict[str, Any]] | None = None

    def write(self, event: AccessEvent) -> None:
        if self.waiting is None:
            self._log(event)
            return
        self.waiting.append(event)  # deque.append needs no lock
        if len(self.waiting) > MOST_PENDING:
            self.drain()  # the background thread has stalled: this request makes the lines

    def keep_for_later(self) -> None:
        """From now on, keep the events for `drain` (once per process, in each new worker)."""
        self.waiting = collections.deque()

    def drain(self) -> None:
        """Make every waiting event into its line, in the order they came."""
        with self.draining:
            while self.waiting:
                self._log(self.waiting.popleft())

    def _log(self, event: AccessEvent) -> None:
        if not self.log.isEnabledFor(logging.INFO):
            return
        # A record is a copy of one made once per process, with this event's fields (docs/performance.md,
        # "access lines"). It has the event's time, not the time it became a line.
        if self._model is None or self._model[0] != os.getpid():
            record = self.log.makeRecord(
                ACCESS_LOGGER, logging.INFO, "(unknown file)", 0, "%s %r %s %.2f ms", (), None, "(unknown function)"
            )
            self._model = (os.getpid(), record.__dict__)
        model = self._model[1]
        # What a client chose is all a line can quote a secret with: the rest is the portal's own (the ids, the
        # status, the time). Checked here, once and only that, as every access line is.
        if egress.quotes_secret(f"{event.method} {event.path}"):
            event = event._replace(method="-", path=egress.WITHHELD_VALUE)
        record = logging.LogRecord.__new__(logging.LogRecord)
        record.__dict__.update(model)
        record.__dict__.update(event._asdict())
        record.__dict__[egress.CHECKED] = True
        record.args = (event.method, event.path, event.status, event.duration_ms)
        record.msecs = int((event.created - int(event.created)) * 1000) + 0.0
        record.relativeCreated = model["relativeCreated"] + (event.created - model["created"]) * 1000
        self.log.handle(record)


ACCESS_LINES = AccessLines()


class LineBatches(logging.Handler):
    """Keeps its lines in memory and writes them to a file descriptor on `flush`, in batches of whole lines. A
    batch is at most PIPE_BUF bytes, the most a pipe takes in one piece, so the lines of two workers sharing
    standard error never mix. Handling a record only appends its line (no lock, no write), unless
    `MOST_PENDING` lines are already waiting: then it writes them itself, so a stalled flush slows whoever
    logs rather than filling the memory."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self.fd = fd
        self.pending: collections.deque[bytes] = collections.deque()

    def handle(self, record: logging.LogRecord) -> bool:  # deque.append needs no lock
        if not self.filter(record):
            return False
        try:
            self.pending.append((self.format(record) + "\n").encode("utf-8", "backslashreplace"))
        except Exception:  # noqa: BLE001 - logging's own rule: a line that cannot be made is reported, not raised
            self.handleError(record)
        if len(self.pending) > MOST_PENDING:
            self.flush()
        return True

    def flush(self) -> None:
        with self.lock:  # type: ignore[union-attr]  # one writer at a time
            batch = bytearray()
            while self.pending:
                line = self.pending.popleft()
                if batch and len(batch) + len(line) > select.PIPE_BUF:
                    self._write(batch)
                    batch = bytearray()
                batch += line
            self._write(batch)  # nothing, when nothing waited

    def _write(self, data: bytearray) -> None:
        while data:
            data = data[os.write(self.fd, data) :]


# How long an access line may wait in a worker's batch, and how many may wait (about 1 MB).
FLUSH_SECONDS = 0.2
MOST_PENDING = 8192


# docs/performance.md, "access lines" (the thread, the copied records, the batches, measured together).
def batch_access_lines(log_format: str) -> None:
    """In a production server's worker: make the access lines in a thread of the worker's own (`AccessLines`) and
    write them in batches (`LineBatches`) instead of one write a request: every request has one, cached pages
    included. A line waits at most `FLUSH_SECONDS`, and what is left is written when the worker stops. Call it
    once in each worker, after the fork."""
    handler = LineBatches(2)  # standard error, as the portal's other lines
    handler.setFormatter(formatter(log_format))
    handler.addFilter(RequestContextFilter())
    access = logging.getLogger(ACCESS_LOGGER)
    access.addHandler(handler)
    access.propagate = False

    def write_waiting_lines() -> None:
        ACCESS_LINES.drain()
        handler.flush()

    ACCESS_LINES.keep_for_later()

    def flush_every_so_often() -> None:
        while True:
            time.sleep(FLUSH_SECONDS)
            try:
                write_waiting_lines()
            except Exception:  # any failure of one batch: the thread must live on, or lines wait for requests
                logging.getLogger(__name__).exception("access lines could not be written; trying again")

    threading.Thread(target=flush_every_so_often, name="petportal-access-lines", daemon=True).start()
    # A forked granian worker ends without running atexit (logging's own flush at exit): flush from a finaliser.
    multiprocessing.util.Finalize(None, write_waiting_lines, exitpriority=10)


def assigned_request_id(environ: WSGIEnvironment) -> str:
    """This request's id, made once and kept in the environ: the access line, the page cache and Flask's hook all
    give the same. A proxy's own (X-Request-ID) when it looks like one, else a new one of 128 random bits:
    arbitrary text is never echoed into logs."""
    if REQUEST_ID not in environ:
        incoming = environ.get("HTTP_X_REQUEST_ID", "")
        looks_like_one = incoming.isascii() and incoming.isalnum() and 8 <= len(incoming) <= 64
        environ[REQUEST_ID] = incoming if looks_like_one else secrets.token_hex(16)
    return cast(str, environ[REQUEST_ID])


def register(app: Flask) -> None:
    """Give every request an id, return it as X-Request-ID, and log with it. (`register_access` puts the
    access lines in front, once every other WSGI layer is in place.)"""
    configure(settings(app).logging.format)

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
