"""Friendly error pages: no stack trace, no upstream body, always the request id."""

import functools
from collections.abc import Callable
from typing import Any

from flask import Flask, current_app, g, render_template, request
from flask.typing import ResponseReturnValue
from flask_babel import gettext as _
from flask_login import current_user
from markupsafe import escape
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from werkzeug.exceptions import BadHost, HTTPException, InternalServerError, MethodNotAllowed, SecurityError

from petportal.data.database import INIT_DB_HINT, cause, tables_missing
from petportal.extensions import DATABASE_OUTAGES, db
from petportal.i18n.lazy_text import lazy_gettext as _l
from petportal.petstore import Outcome, PetStoreError
from petportal.serving.request import serving
from petportal.web.front_door import UnreadableRequest

BARE_PAGE = (
    '<!doctype html><html lang="en"><meta charset="utf-8"><title>{title} · Pet Portal</title>'
    '<meta name="description" content="{message}">'
    "<h1>{title}</h1><p>{message}</p><p>Request id: <code>{request_id}</code></p></html>"
)
MESSAGES = {
    400: (_l("Bad request"), _l("The request could not be understood. Go back and try again.")),
    403: (_l("Not allowed"), _l("Your account may not open this page.")),
    404: (_l("Not found"), _l("There is nothing at this address.")),
    405: (_l("Not allowed"), _l("This page cannot be used that way.")),
    413: (_l("Too large"), _l("What you sent is larger than the portal accepts (1 MB at most).")),
    429: (_l("Too many attempts"), _l("Please wait a little, then try again.")),
    500: (_l("Something went wrong"), _l("The portal failed to show this page. It has been logged.")),
    502: (_l("Temporarily unavailable"), _l("The pet store gave an answer the portal could not use.")),
    503: (_l("The pet store is not answering"), _l("The pet store did not answer in time. Try again in a moment.")),
}
# An error page and its status.
ErrorPage = tuple[str, int]


def render_error(
    status: int, message: str | None = None, *, retry: bool = False, title: str | None = None
) -> ErrorPage:
    """The error page for `status`, with an optional more specific message (and title), in the request's
    language. Never raises: when even the page's template fails, a bare page that needs nothing is sent instead."""
    default = MESSAGES.get(status) or (_("Error %(status)s", status=status), _("The request failed."))
    title, message = str(title or default[0]), str(message or default[1])
    try:
        page = render_template(
            "errors/404.html" if status == 404 else "errors/error.html",
            status=status,
            title=title,
            message=message,
            retry_url=request.full_path.rstrip("?") if retry and request.method == "GET" else None,
            request_id=g.get("request_id"),
        )
    except Exception:
        current_app.logger.exception("the error page could not be drawn")
        page = BARE_PAGE.format(
            title=escape(title), message=escape(message), request_id=escape(g.get("request_id", "-"))
        )
    return page, status


def handle_http_error(error: HTTPException) -> ResponseReturnValue:
    """Any HTTP error Flask raises (404, 405, 413, ...)."""
    if isinstance(error, SecurityError | BadHost):
        # An untrusted or malformed Host: no URLs can be built for it, so the page stands alone.
        return render_template("errors/bad_host.html", request_id=g.get("request_id")), 400
    if isinstance(error, UnreadableRequest):
        return render_error(400, error.description)
    if isinstance(error, MethodNotAllowed):
        return *render_error(405), {"Allow": ", ".join(sorted(error.valid_methods or ()))}
    if error.code == 503:
        # Raised by the portal itself (logins while its own stores are down), with a message for people.
        return render_error(503, error.description, title=_("Temporarily unavailable"), retry=True)
    return render_error(error.code or 500)


def handle_database_error(error: SQLAlchemyError) -> ErrorPage:
    """The portal's own database failed: one log line, a 503 page that needs no database. An error that is not
    an outage (a statement on a row another request deleted, say) is a bug, and answered as one."""
    if isinstance(error, IntegrityError):
        # Two requests wrote the same thing at once (two admins adding one account name, say): this one lost.
        current_app.logger.warning("a change lost a race with another: %s", cause(error))
        message = _("Someone else made the same change at the same moment, so nothing was saved. Reload and check.")
        return render_error(409, message, title=_("Changed at the same moment"))
    if tables_missing(error):  # not a bug either: the database was never set up
        current_app.logger.error("the portal's database has no tables: %s", INIT_DB_HINT)
    elif isinstance(error, DATABASE_OUTAGES):
        current_app.logger.error("the portal's database is unavailable: %s", cause(error))
    else:
        return handle_unexpected_error(error)
    message = _("The portal cannot reach its own database, so this page cannot be shown. Customers' pages still work.")
    return render_error(503, message, title=_("Temporarily unavailable"), retry=True)


def handle_pet_store_error(error: PetStoreError) -> ResponseReturnValue:
    """What customers, staff and admins are told when the pet store fails, as `classify` read its end."""
    match error.outcome:
        case Outcome.NOT_FOUND:
            return render_error(404, _("No animal has this id in this environment."))
        case Outcome.BUSY:
            current_app.logger.warning("not waiting on the pet store: %s", error)
            message = _("The pet store is slow to answer right now. Try again in a moment.")
            return *render_error(503, message, retry=True), {"Retry-After": "2"}
        case Outcome.UNAVAILABLE:
            current_app.logger.warning("pet store unavailable: %s", error)
            return render_error(503, _("The pet store is not answering. Try again in a moment."), retry=True)
        case Outcome.KEY_REJECTED:
            return key_rejected_page(serving().environment.name)
    current_app.logger.error("unusable answer from the pet store: %s", error)
    return render_error(502, retry=True)


def key_rejected_page(name: str) -> ErrorPage:
    """The store refused environment `name`'s key: admins are told so, everyone else that it is unavailable."""
    current_app.logger.error("the %s API key was rejected", name)
    if current_user.is_authenticated and current_user.is_admin:
        return render_error(
            502,
            _("The %(environment)s API key was rejected by the pet store. Check its configuration.", environment=name),
        )
    return render_error(502, _("The pet store is temporarily unavailable. Try again later."), retry=True)


def handle_unexpected_error(error: Exception) -> ErrorPage:
    """A bug: log it with the request id, show a generic page."""
    current_app.logger.exception("unhandled error", exc_info=error)
    return render_error(500)


def register(app: Flask, *more: tuple[type[Exception], Callable[[Any], ResponseReturnValue]]) -> None:
    """Install the error pages, and `more` of other parts (error class, handler). Each first rolls back what the
    request had added: a request that fails on its way leaves nothing half-written (see unit_of_work)."""
    handlers: tuple[tuple[type[Exception], Callable[[Any], ResponseReturnValue]], ...] = (
        (HTTPException, handle_http_error),
        (PetStoreError, handle_pet_store_error),
        (SQLAlchemyError, handle_database_error),
        (InternalServerError, handle_unexpected_error),
        (Exception, handle_unexpected_error),
        *more,
    )
    for error_class, handler in handlers:
        app.register_error_handler(error_class, _rolled_back_first(handler))


def _rolled_back_first(handler: Callable[[Any], ResponseReturnValue]) -> Callable[[Any], ResponseReturnValue]:
    @functools.wraps(handler)
    def handle(error: Exception) -> ResponseReturnValue:
        db.session.rollback()
        return handler(error)

    return handle
