"""The login forms, and the rules every new password and second-factor code must meet."""

from __future__ import annotations

from wtforms import BooleanField, Field, PasswordField, StringField
from wtforms.validators import DataRequired, Length, ValidationError

from ..forms import PortalForm
from . import passwords


def good_password(form: PortalForm, field: Field) -> None:
    """A new password must meet the password policy (auth.passwords)."""
    if problem := passwords.problem(field.data or ""):
        raise ValidationError(problem)


def new_password_field(label: str) -> PasswordField:
    """A field for a new password, checked against the policy."""
    return PasswordField(
        label,
        validators=[DataRequired("Enter the new password."), good_password],
        description=f"At least {passwords.MIN_LENGTH} characters; a few words in a row make a good password.",
    )


class LoginForm(PortalForm):
    """User name and password, and whether to be remembered on this browser."""

    username = StringField("User name", validators=[DataRequired("Enter your user name."), Length(max=80)])
    password = PasswordField("Password", validators=[DataRequired("Enter your password."), Length(max=1024)])
    remember = BooleanField("Keep me logged in on this browser")


class CodeForm(PortalForm):
    """A code from the authenticator app (or, when logging in, a recovery code)."""

    code = StringField(
        "Code",
        validators=[DataRequired("Enter the code."), Length(max=32, message="A code is at most 32 characters.")],
    )
