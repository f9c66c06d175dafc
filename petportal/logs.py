"""A request id on every request, in the response and every log line; logs as text or one JSON object a line."""

from __future__ import annotations

import logging
import uuid

from flask import Flask, Response, g, has_request_context, request
from pythonjsonlogger.json import JsonFormatter

TEXT_FORMAT = "%(asctime)s %(levelname)s [%(request_id)s] %(name)s: %(message)s"
JSON_FIELDS = "%(asctime)s %(levelname)s %(name)s %(message)s %(request_id)s %(user)s %(environment)s"
JSON_NAMES = {"asctime": "time", "levelname": "level", "name": "logger"}


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
            record.request_id = record.user = record.environment = "-"
        return True


def configure(log_format: str) -> None:
    """Send the portal's logs to standard error, as text or as JSON (`PETPORTAL_LOG_FORMAT`)."""
    logger = logging.getLogger("petportal")
    for handler in [h for h in logger.handlers if any(isinstance(f, RequestContextFilter) for f in h.filters)]:
        logger.removeHandler(handler)
    handler = logging.StreamHandler()
    if log_format == "json":
        handler.setFormatter(JsonFormatter(JSON_FIELDS, rename_fields=JSON_NAMES))
    else:
        handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    handler.addFilter(RequestContextFilter())
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)


def request_id(incoming: str) -> str:
    """The id of a request: a proxy's own (`incoming`) when it looks like one, else a new one. Arbitrary
    text is never echoed into logs. Also used by the page cache, which answers before Flask."""
    return incoming if incoming.isascii() and incoming.isalnum() and 8 <= len(incoming) <= 64 else uuid.uuid4().hex


def register(app: Flask) -> None:
    """Give every request an id, return it as X-Request-ID, and log with it."""
    configure(app.config["LOG_FORMAT"])

    @app.before_request
    def assign_request_id() -> None:
        g.request_id = request_id(request.headers.get("X-Request-ID", ""))

    @app.after_request
    def return_request_id(response: Response) -> Response:
        if "request_id" in g:
            response.headers["X-Request-ID"] = g.request_id
        return response
