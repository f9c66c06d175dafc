"""The login forms, and the rules every new password and second-factor code must meet."""

from __future__ import annotations

from wtforms import BooleanField, Field, PasswordField, StringField
from wtforms.validators import DataRequired, Length, ValidationError

from petportal.data import passwords
from petportal.i18n.lazy_text import LazyText
from petportal.i18n.lazy_text import lazy_gettext as _l
from petportal.web.forms import PortalForm


def good_password(form: PortalForm, field: Field) -> None:
    """A new password must meet the password policy (auth.passwords)."""
    if problem := passwords.problem(field.data or ""):
        raise ValidationError(problem)


def new_password_field(label: str | LazyText) -> PasswordField:
    """A field for a new password, checked against the policy."""
    return PasswordField(
        label,
        validators=[DataRequired(_l("Enter the new password.")), good_password],
        description=_l(
            "At least %(count)s characters; a few words in a row make a good password.", count=passwords.MIN_LENGTH
        ),
    )


class LoginForm(PortalForm):
    """User name and password, and whether to be remembered on this browser."""

    username = StringField(_l("User name"), validators=[DataRequired(_l("Enter your user name.")), Length(max=80)])
    password = PasswordField(_l("Password"), validators=[DataRequired(_l("Enter your password.")), Length(max=1024)])
    remember = BooleanField(_l("Keep me logged in on this browser"))


class CodeForm(PortalForm):
    """A code from the authenticator app (or, when logging in, a recovery code)."""

    code = StringField(
        _l("Code"),
        validators=[
            DataRequired(_l("Enter the code.")),
            # Length puts the number in itself (%(max)d).
            Length(max=32, message=_l("A code is at most %(max)d characters.")),
        ],
    )
