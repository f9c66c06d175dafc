"""One reading of each kind of number a person or an address gives the portal (ids, limits, days): the add form,
the list filter, a bulk import's rows and the URL converter take or refuse each value alike. Python's `int()` also
takes Arabic-Indic and full-width digits and `1_000`, so it is never called on text from outside directly."""

from __future__ import annotations

import re
from datetime import date
from urllib.parse import urlsplit

from werkzeug.routing import IntegerConverter, ValidationError
from werkzeug.wrappers import Request
from wtforms import IntegerField, StringField

from petportal.petstore.records import INT64_MAX, INT64_MIN

# A whole number: ASCII digits, with a minus sign for the negative ids the API allows; no plus, no spaces.
WHOLE_NUMBER = re.compile(r"-?[0-9]+", re.ASCII)
ASCII_SPACE = " \t\r\n"
# A day as ISO 8601 writes it, YYYY-MM-DD, in ASCII digits (strptime's %Y would also take other scripts' digits).
DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", re.ASCII)
# More digits than any 64-bit number has (with leading zeros to spare) are refused before int() reads them.
MAX_DIGITS = 40


def json_object(request: Request) -> dict[str, object] | None:
    """The request's JSON body when it is an object, else None: never an exception, not even for a body nested
    deeper than Python's parser recurses (Werkzeug's `silent` does not catch that)."""
    try:
        value = request.get_json(silent=True)
    except RecursionError:
        return None
    return value if isinstance(value, dict) else None


def whole_number(text: str) -> int | None:
    """`text` (ASCII spaces around it allowed) as a whole number, or None when it is not one in ASCII digits."""
    text = text.strip(ASCII_SPACE)
    return int(text) if len(text) <= MAX_DIGITS and WHOLE_NUMBER.fullmatch(text) else None


def day(text: str) -> date | None:
    """`text` (ASCII spaces around it allowed) as a day, or None when it is not a real one written YYYY-MM-DD."""
    text = text.strip(ASCII_SPACE)
    if not DAY.fullmatch(text):
        return None
    try:
        return date.fromisoformat(text)
    except ValueError:  # the 30th of February, month 13
        return None


class DayField(StringField):
    """A form field holding a day read by `day`, or None; the text as sent stays in `raw_data`, for the page to
    show again and the validators to refuse."""

    data: date | None

    def process_formdata(self, valuelist: list[object]) -> None:
        if valuelist:
            self.data = day(valuelist[0]) if isinstance(valuelist[0], str) else None

    def _value(self) -> str:
        return self.raw_data[0] if self.raw_data else (self.data.isoformat() if self.data else "")


class WholeNumberField(IntegerField):
    """A form field holding a whole number read by `whole_number`, else None, for its range validator to refuse."""

    data: int | None  # an int once validated

    def process_formdata(self, valuelist: list[object]) -> None:
        if valuelist:
            self.data = whole_number(valuelist[0]) if isinstance(valuelist[0], str) else None

    def _value(self) -> str:
        """The number as read ("7" for "007"), so a page shows what it read; as typed when it read none."""
        return str(self.data) if self.data is not None else str(super()._value())


class WholeNumberConverter(IntegerConverter):
    """Werkzeug's `int` converter, reading with `whole_number` (its own `\\d` takes any script's digits), and only
    an id the API can hold: a number beyond 64 bits is no address, a 404 from routing."""

    regex = r"[0-9]+"

    def to_python(self, value: str) -> int:
        number = whole_number(value)
        low = INT64_MIN if self.signed else 0
        if number is None or not low <= number <= INT64_MAX:
            raise ValidationError
        return number


def safe_next(target: str | None, default: str) -> str:
    """`target` if it is a path on this site, else `default`: never another host or scheme."""
    if not target or not target.startswith("/") or target.startswith("//"):
        return default
    if "\\" in target or any(ord(char) < 32 or ord(char) == 127 for char in target):
        return default
    parts = urlsplit(target)
    if parts.scheme or parts.netloc:
        return default
    return target
