"""The base of every form of the portal."""

from typing import Any

from flask import g, request
from flask_wtf import FlaskForm

from petportal.web.front_door import NOT_UTF8, NUL, NUL_TEXT

SUBMIT_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# A form shown again after an error repeats at most this much of what was typed in a field.
ECHO_CHARS = 200


class PortalForm(FlaskForm):
    """A FlaskForm that reads a submission from the form body only (a field sent as a file or JSON was a 500)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if not args and "formdata" not in kwargs and request.method in SUBMIT_METHODS:
            kwargs["formdata"] = request.form
        super().__init__(*args, **kwargs)

    def validate(self, extra_validators: Any = None) -> bool:
        """The fields' checks, and fields not UTF-8 or holding a NUL refused; a failed form echoes a short prefix."""
        valid: bool = super().validate(extra_validators)
        for field in self:
            if isinstance(field.data, str) and NUL in field.data:
                field.errors = [*field.errors, NUL_TEXT]
                valid = False
        for name in g.get("unreadable_fields", ()):
            if name in self._fields:
                field = self._fields[name]
                field.errors = [*field.errors, NOT_UTF8]
                field.data, field.raw_data = "", [""]  # Werkzeug kept the bytes as "%FF" text: nothing to show
                valid = False
        if not valid:
            for field in self:
                if isinstance(field.data, str):
                    field.data = field.data[:ECHO_CHARS]
                if field.raw_data:
                    field.raw_data = [
                        value[:ECHO_CHARS] if isinstance(value, str) else value for value in field.raw_data
                    ]
        return valid


class ButtonForm(PortalForm):
    """An empty form: a button that makes a CSRF-protected POST (log out, end sessions, disable...)."""
