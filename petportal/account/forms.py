"""The forms of your own account."""

from wtforms import PasswordField
from wtforms.validators import DataRequired, EqualTo, Length

from ..auth.forms import new_password_field
from ..forms import PortalForm


class ChangePasswordForm(PortalForm):
    """The current password, then the new one twice."""

    current_password = PasswordField(
        "Current password", validators=[DataRequired("Enter your current password."), Length(max=1024)]
    )
    new_password = new_password_field("New password")
    confirm = PasswordField(
        "New password again",
        validators=[
            DataRequired("Enter the new password again."),
            EqualTo("new_password", "The two new passwords differ; type the same one twice."),
        ],
    )
