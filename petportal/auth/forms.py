"""The login and logout forms."""

from wtforms import BooleanField, PasswordField, StringField
from wtforms.validators import DataRequired, Length

from ..forms import PortalForm


class LoginForm(PortalForm):
    """User name and password, and whether to be remembered on this browser."""

    username = StringField("User name", validators=[DataRequired("Enter your user name."), Length(max=80)])
    password = PasswordField("Password", validators=[DataRequired("Enter your password."), Length(max=1024)])
    remember = BooleanField("Keep me logged in on this browser")


class LogoutForm(PortalForm):
    """An empty form: logging out is a CSRF-protected POST."""
