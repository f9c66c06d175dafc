"""The base of every form of the portal."""

from typing import Any

from flask import request
from flask_wtf import FlaskForm

SUBMIT_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class PortalForm(FlaskForm):
    """A FlaskForm that reads a submission from the form body only.

    Flask-WTF would also take uploaded files and JSON bodies as field values; a text field sent as a
    file (or a JSON list) is then not text, and its validators fail with a 500 instead of an error
    next to the field.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if not args and "formdata" not in kwargs and request.method in SUBMIT_METHODS:
            kwargs["formdata"] = request.form
        super().__init__(*args, **kwargs)


class ButtonForm(PortalForm):
    """An empty form: a button that makes a CSRF-protected POST (log out, end sessions, disable...)."""
