"""Text translated when it is shown, for the words of forms and tables written at import time.

Flask-Babel's own `lazy_gettext` gives a string that calls itself safe HTML (its `__html__` returns the text
unescaped: python-babel/flask-babel#121 and #224), so a template would show an apostrophe, or whatever a
translation holds, as markup. `lazy_gettext` here is the same lazy translation, escaped like any other text.
Import it as `_l`: the catalogs extract that keyword.
"""

from __future__ import annotations

from typing import Any

from flask_babel import gettext
from flask_babel.speaklater import LazyString
from markupsafe import escape


class LazyText(LazyString):
    """A translation made when it is read, in the language of the request reading it; text, never markup."""

    def __html__(self) -> str:
        return str(escape(str(self)))


def lazy_gettext(string: str, **variables: Any) -> LazyText:
    """`gettext(string, **variables)`, translated each time it is read (see the module's docstring)."""
    return LazyText(gettext, string, **variables)
