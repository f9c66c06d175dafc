"""The login and logout forms."""

from flask_wtf import FlaskForm
from wtforms import BooleanField, PasswordField, StringField
from wtforms.validators import DataRequired, Length


class LoginForm(FlaskForm):
    """User name and password, and whether to be remembered on this browser."""

    username = StringField("User name", validators=[DataRequired("Enter your user name."), Length(max=80)])
    password = PasswordField("Password", validators=[DataRequired("Enter your password."), Length(max=1024)])
    remember = BooleanField("Keep me logged in on this browser")


class LogoutForm(FlaskForm):
    """An empty form: logging out is a CSRF-protected POST."""
