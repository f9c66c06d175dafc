"""Text translated when it is shown, for the words of forms and tables written at import time.

Flask-Babel's own `lazy_gettext` calls itself safe HTML (python-babel/flask-babel#121 and #224), so a template would
show an apostrophe, or whatever a translation holds, as markup; this one is escaped like any other text. Import it
as `_l`: the catalogs extract that keyword.
"""

from __future__ import annotations

from babel.support import NullTranslations
from flask import has_request_context, request
from flask_babel import get_locale, get_translations
from flask_babel.speaklater import LazyString
from markupsafe import escape

# Where `translations` keeps the request's catalog in the WSGI environ.
TRANSLATIONS = "petportal.translations"


class LazyText(LazyString):
    """A translation made when it is read, in the language of the request reading it; text, never markup."""

    def __html__(self) -> str:
        return str(escape(str(self)))


def lazy_gettext(string: str, **variables: object) -> LazyText:
    """`gettext(string, **variables)`, translated each time it is read (see the module's docstring)."""
    return LazyText(_gettext, string, **variables)


# Kept by issue 41's bench, with the other i18n caches (see i18n._locale).
def translations() -> NullTranslations:
    """The catalog of the request's language, looked up once per request and language: Flask-Babel's `gettext`
    looks it up for each message (about 5 us), and a page reads dozens. Inside `force_locale`, that language's.
    Outside a request, the default language's."""
    if not has_request_context():
        return get_translations()
    locale = get_locale()
    found = request.environ.get(TRANSLATIONS)
    if found is None or found[0] is not locale:
        found = request.environ[TRANSLATIONS] = (locale, get_translations())
    return found[1]


def _gettext(string: str, **variables: object) -> str:
    text = str(translations().ugettext(string))
    return text % variables if variables else text
