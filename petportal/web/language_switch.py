"""The language links: a visitor's choice of language, kept in a cookie."""

from flask import Blueprint, abort, current_app, redirect, request
from werkzeug.wrappers import Response

from petportal.i18n.languages import COOKIE, COOKIE_SECONDS, LANGUAGES
from petportal.web.readers import safe_next

bp = Blueprint("language", __name__)


@bp.get("/language/<code>")
def choose(code: str) -> Response:
    """Remember the visitor's language, then go back to `next` (a path on this site only)."""
    if code not in LANGUAGES:
        abort(404)
    response = redirect(safe_next(request.args.get("next"), "/animals"), 303)
    response.set_cookie(
        COOKIE,
        code,
        max_age=COOKIE_SECONDS,
        secure=current_app.config["SESSION_COOKIE_SECURE"],
        httponly=True,
        samesite="Lax",
    )
    return response
