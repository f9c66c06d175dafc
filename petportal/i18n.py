"""The visitor's language: English, German or Spanish, with Flask-Babel.

One rule decides which language a request is served in (`language_of`): the visitor's choice from
`/language/<code>` (a cookie), else the best match of `Accept-Language`, else English. Flask-Babel asks it
for every page; the page cache asks it for the key of a shared page, so a German page is never replayed to
an English visitor.

Adding a language is one catalog (`petportal/translations/<code>/LC_MESSAGES/messages.po`, see
`petportal/translations/catalogs.py`) and one entry in `LANGUAGES`.
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

from babel import Locale
from flask import Blueprint, Flask, abort, current_app, has_request_context, redirect, request
from flask_babel import Babel, format_datetime, format_number, get_locale
from markupsafe import Markup
from werkzeug.datastructures import LanguageAccept
from werkzeug.http import parse_accept_header, parse_cookie
from werkzeug.wrappers import Response

from . import template_text
from .auth.access import safe_next
from .lazy_text import LazyText, translations
from .lazy_text import lazy_gettext as _l
from .models import Role

if TYPE_CHECKING:
    from _typeshed.wsgi import WSGIEnvironment

# Each language's code and its name in that language, as the language links show it.
LANGUAGES = {"en": "English", "de": "Deutsch", "es": "Español"}
DEFAULT_LANGUAGE = "en"
COOKIE = "language"
COOKIE_SECONDS = 365 * 24 * 3600
# The longest address of a page its language links send the visitor back to.
NEXT_MAX_LENGTH = 512
# Where `language_of` keeps its answer in the WSGI environ.
LANGUAGE = "petportal.language"
CATALOGS = Path(__file__).resolve().parent / "translations"


def N_(message: str) -> str:
    """Marks `message` for the catalogs (gettext's usual name); it is translated where it is shown."""
    return message


# The store's statuses as a person reads them (an unknown one is shown as the store sent it).
STATUS_LABELS = {"available": N_("available"), "pending": N_("pending"), "sold": N_("sold")}

bp = Blueprint("language", __name__)


def language_of(environ: WSGIEnvironment) -> str:
    """The language this request is served in, worked out once: the cookie's choice, else `Accept-Language`,
    else English."""
    if LANGUAGE not in environ:
        environ[LANGUAGE] = _negotiated(environ)
    language: str = environ[LANGUAGE]
    return language


def _negotiated(environ: WSGIEnvironment) -> str:
    cookies = environ.get("HTTP_COOKIE", "")
    if COOKIE in cookies:
        try:
            chosen = parse_cookie(cookies).get(COOKIE)
        except UnicodeError:  # cookies that are not UTF-8: the front door's 400 page, in the language below
            chosen = None
        if chosen in LANGUAGES:
            return str(chosen)
    accepted = environ.get("HTTP_ACCEPT_LANGUAGE", "")
    if not accepted:
        return DEFAULT_LANGUAGE
    # Parsing the header costs about 13 us, more than a cached page's own work, and browsers send a handful of
    # different ones: each is worked out once per process (short ones only, at most REMEMBERED_ACCEPTS of them).
    best = _ACCEPTED.get(accepted)
    if best is None:
        best = parse_accept_header(accepted, LanguageAccept).best_match(LANGUAGES) or DEFAULT_LANGUAGE
        if len(accepted) <= REMEMBERED_ACCEPT_LENGTH:
            if len(_ACCEPTED) >= REMEMBERED_ACCEPTS:
                _ACCEPTED.clear()
            _ACCEPTED[accepted] = best
    return best


# Accept-Language header -> the language it chooses (see `_negotiated`).
# Issue 41's bench without the i18n caches (this, _locale, status_names, number's, translations): portal/bare p50 +51%.
_ACCEPTED: dict[str, str] = {}
REMEMBERED_ACCEPTS = 1024
REMEMBERED_ACCEPT_LENGTH = 256


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


def language_back() -> str:
    """The query of the language links: back to this page, when its address is short enough to repeat (a page
    never echoes a huge request back); else to the list."""
    here = request.full_path.rstrip("?")
    return "?next=" + quote(here, safe="/") if len(here) <= NEXT_MAX_LENGTH else ""


def time_tag(moment: datetime) -> Markup:
    """A `<time>` element for a moment in UTC: a machine-readable value to the second, and the date and time
    as the visitor's language writes them."""
    utc = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    machine = utc.replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")
    return Markup('<time datetime="{}">{} UTC</time>').format(machine, format_datetime(utc, "medium"))


class StatusNames(dict[str, str]):
    """The store's statuses in one language; a status the portal does not know reads as the store sent it."""

    def __missing__(self, status: str) -> str:
        return status


# Kept by issue 41's bench, with the other i18n caches (see _ACCEPTED).
def status_names() -> StatusNames:
    """Every status as the visitor's language names it: looked up once for a page that shows many (the list)."""
    catalog = translations()
    return StatusNames({status: catalog.ugettext(label) for status, label in STATUS_LABELS.items()})


def status_label(status: str) -> str:
    """An animal's status as the visitor's language names it."""
    return status_names()[status]


# The environments' names as people read them; the value (in URLs, forms and the database) stays the English word.
ENVIRONMENT_LABELS = {"production": _l("production"), "staging": _l("staging")}
ROLE_LABELS: dict[str, LazyText] = {Role.STAFF: _l("staff"), Role.ADMIN: _l("admin")}


def environment_label(name: str) -> str:
    """An environment's name in the visitor's language (an unknown name reads as it is)."""
    return str(ENVIRONMENT_LABELS[name]) if name in ENVIRONMENT_LABELS else name


def role_label(role: str) -> str:
    """A role as a sentence names it, in the visitor's language (an unknown role reads as it is)."""
    return str(ROLE_LABELS[role]) if role in ROLE_LABELS else role


# Kept by issue 41's bench, with the other i18n caches (see _ACCEPTED).
def number(value: int) -> str:
    """A whole number as the visitor's language writes it. Below a thousand, English, German and Spanish all
    write the plain digits, which is what nearly every count on a page is, so Babel is asked only above."""
    return str(value) if -1000 < value < 1000 else str(format_number(value))


def register(app: Flask) -> None:
    """Serve every page in the request's language, and let the templates name it and link to the others."""
    Babel(
        app,
        locale_selector=_request_language,
        default_translation_directories=str(CATALOGS),
        default_timezone="UTC",
    )
    app.register_blueprint(bp)
    app.context_processor(template_text.page_text)
    app.jinja_env.globals.update(
        _=template_text.gettext,
        gettext=template_text.gettext,
        ngettext=template_text.ngettext,
        LANGUAGES=LANGUAGES,
        time_tag=time_tag,
        status_label=status_label,
        status_names=status_names,
        current_language=_current_language,
        language_back=language_back,
    )
    app.jinja_env.filters["number"] = number
    app.jinja_env.filters["environment"] = environment_label

    @app.after_request
    def vary_by_language(response: Response) -> Response:
        """A page differs by the visitor's language, which their cookie or `Accept-Language` chooses."""
        if response.mimetype == "text/html":
            response.vary.add("Accept-Language")
            response.vary.add("Cookie")
        return response


def _request_language() -> Locale:
    """Flask-Babel's locale selector: the request's language; outside a request (a command, the import
    runner), English."""
    return _locale(language_of(request.environ) if has_request_context() else DEFAULT_LANGUAGE)


@functools.cache  # kept by issue 41's bench, with the other i18n caches (see _ACCEPTED)
def _locale(code: str) -> Locale:
    """The Babel locale of one of the portal's languages, made once: Flask-Babel would parse the code again for
    every request, each time asking the disk whether Babel has data for it."""
    return Locale.parse(code)


def _current_language() -> str:
    return str(get_locale() or DEFAULT_LANGUAGE)
