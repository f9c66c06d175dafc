"""The visitor's language: English, German or Spanish, with Flask-Babel.

One rule decides which language a request is served in (`language_of`): the visitor's choice from `/language/<code>`
(a cookie), else the best match of `Accept-Language`, else English. Flask-Babel asks it for every page, and the page
cache for the key of a shared page, so a German page is never replayed to an English visitor.

Adding a language is one catalog (`petportal/translations/<code>/LC_MESSAGES/messages.po`, see
`petportal/translations/catalogs.py`) and one entry in `LANGUAGES`.
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, cast
from urllib.parse import quote

from babel import Locale
from flask import Flask, has_request_context, request
from flask_babel import Babel, format_datetime, format_number, get_locale
from markupsafe import Markup
from werkzeug.datastructures import LanguageAccept
from werkzeug.http import parse_accept_header, parse_cookie
from werkzeug.wrappers import Response

from petportal.config import Environment
from petportal.data.models import Role
from petportal.i18n import template_text
from petportal.i18n.lazy_text import LazyText, translations
from petportal.i18n.lazy_text import lazy_gettext as _l

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
CATALOGS = Path(__file__).resolve().parent.parent / "translations"


def N_(message: str) -> str:
    """Marks `message` for the catalogs (gettext's usual name); it is translated where it is shown."""
    return message


# The store's statuses as a person reads them (an unknown one is shown as the store sent it).
STATUS_LABELS = {"available": N_("available"), "pending": N_("pending"), "sold": N_("sold")}
# The environments' names as people read them; the value (in URLs, forms and the database) stays the English word.
ENVIRONMENT_LABELS: dict[str, LazyText] = {Environment.PRODUCTION: _l("production"), Environment.STAGING: _l("staging")}
ROLE_LABELS: dict[str, LazyText] = {Role.STAFF: _l("staff"), Role.ADMIN: _l("admin")}


def language_of(environ: WSGIEnvironment) -> str:
    """The language this request is served in (the module's one rule), worked out once."""
    if LANGUAGE not in environ:
        environ[LANGUAGE] = _negotiated(environ)
    return cast(str, environ[LANGUAGE])


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
    # A header longer than any browser sends is worked out each time, never kept: the memo holds at most 1,024 short
    # ones, and made-up headers only push real ones out (a slower page, never a wrong language).
    return _best_language(accepted) if len(accepted) <= 256 else _best_language.__wrapped__(accepted)


# docs/performance.md, "Accept-Language" (this memo and the early return above).
@functools.lru_cache(maxsize=1024)
def _best_language(accepted: str) -> str:
    """The best of LANGUAGES for an Accept-Language header, remembered per process: browsers send a handful."""
    return parse_accept_header(accepted, LanguageAccept).best_match(LANGUAGES) or DEFAULT_LANGUAGE


def language_back() -> str:
    """The query of the language links: back to this page, when its address is short enough to repeat (a page
    never echoes a huge request back); else to the list."""
    here = request.full_path.rstrip("?")
    return "?next=" + quote(here, safe="/") if len(here) <= NEXT_MAX_LENGTH else ""


def time_tag(moment: datetime) -> Markup:
    """A `<time>` element for a moment in UTC, to the second, and as the visitor's language writes it."""
    utc = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    machine = utc.replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")
    return Markup('<time datetime="{}">{} UTC</time>').format(machine, format_datetime(utc, "medium"))


class StatusNames(dict[str, str]):
    """The store's statuses in one language; a status the portal does not know reads as the store sent it."""

    def __missing__(self, status: str) -> str:
        return status


# Kept by issue 41's bench, with the other i18n caches (see _locale).
def status_names() -> StatusNames:
    """Every status as the visitor's language names it: looked up once for a page that shows many (the list)."""
    catalog = translations()
    return StatusNames({status: catalog.ugettext(label) for status, label in STATUS_LABELS.items()})


def status_label(status: str) -> str:
    """An animal's status as the visitor's language names it."""
    return status_names()[status]


def environment_label(name: str) -> str:
    """An environment's name in the visitor's language (an unknown name reads as it is)."""
    return str(ENVIRONMENT_LABELS[name]) if name in ENVIRONMENT_LABELS else name


def environments_label(environments: frozenset[Environment]) -> str:
    """An account's environments in the visitor's language: "production and staging", or one of them."""
    names = [environment_label(name) for name in sorted(environments)]
    if len(names) == 2:
        return str(_l("%(first)s and %(second)s", first=names[0], second=names[1]))
    return " ".join(names)


def role_label(role: str) -> str:
    """A role as a sentence names it, in the visitor's language (an unknown role reads as it is)."""
    return str(ROLE_LABELS[role]) if role in ROLE_LABELS else role


# Kept by issue 41's bench, with the other i18n caches (see _locale).
def number(value: int) -> str:
    """A whole number as the visitor's language writes it. Below a thousand, English, German and Spanish all
    write the plain digits, which is what nearly every count on a page is, so Babel is asked only above."""
    return str(value) if -1000 < value < 1000 else str(format_number(value))


def register(app: Flask) -> None:
    """Serve every page in the request's language, and let the templates name it and link to the others."""
    Babel(
        app,
        locale_selector=lambda: _locale(visitor_language()),
        default_translation_directories=str(CATALOGS),
        default_timezone="UTC",
    )
    app.context_processor(template_text.page_text)
    app.jinja_env.globals.update(
        _=template_text.gettext,
        gettext=template_text.gettext,
        ngettext=template_text.ngettext,
        LANGUAGES=LANGUAGES,
        time_tag=time_tag,
        status_label=status_label,
        status_names=status_names,
        current_language=lambda: str(get_locale() or DEFAULT_LANGUAGE),
        language_back=language_back,
        environments_label=environments_label,
        environment_name=environment_label,
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


def visitor_language() -> str:
    """The code of the request's language; English outside a request (a command, the import runner)."""
    return language_of(request.environ) if has_request_context() else DEFAULT_LANGUAGE


# docs/performance.md, "the i18n caches" (this, status_names, number's, lazy_text.translations, measured together).
@functools.cache
def _locale(code: str) -> Locale:
    """The Babel locale of one of the portal's languages, made once: Flask-Babel would parse the code again for
    every request, each time asking the disk whether Babel has data for it."""
    return Locale.parse(code)
