"""A request id on every request: in the response, in every log line, and sent upstream."""

import logging
import uuid

from flask import g, has_request_context, request

LOG_FORMAT = "%(asctime)s %(levelname)s [%(request_id)s] %(name)s: %(message)s"


class RequestIdFilter(logging.Filter):
    """Adds `request_id` to every log record ("-" outside a request)."""

    def filter(self, record):
        record.request_id = g.get("request_id", "-") if has_request_context() else "-"
        return True


def register(app):
    """Give every request an id, return it as X-Request-ID, and log with it."""
    logger = logging.getLogger("petportal")
    if not any(isinstance(f, RequestIdFilter) for h in logger.handlers for f in h.filters):
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter(LOG_FORMAT))
        handler.addFilter(RequestIdFilter())
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)

    @app.before_request
    def assign_request_id():
        incoming = request.headers.get("X-Request-ID", "")
        # Keep a proxy's id when it looks like one; never echo arbitrary text into logs.
        g.request_id = incoming if incoming.isalnum() and 8 <= len(incoming) <= 64 else uuid.uuid4().hex

    @app.after_request
    def return_request_id(response):
        if "request_id" in g:
            response.headers["X-Request-ID"] = g.request_id
        return response
