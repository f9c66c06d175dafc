"""The forms of your own account."""

from wtforms import PasswordField
from wtforms.validators import DataRequired, EqualTo, Length

from petportal.auth.forms import new_password_field
from petportal.i18n.lazy_text import lazy_gettext as _l
from petportal.web.forms import PortalForm


class ChangePasswordForm(PortalForm):
    current_password = PasswordField(
        _l("Current password"), validators=[DataRequired(_l("Enter your current password.")), Length(max=1024)]
    )
    new_password = new_password_field(_l("New password"))
    confirm = PasswordField(
        _l("New password again"),
        validators=[
            DataRequired(_l("Enter the new password again.")),
            # EqualTo formats the message itself (with %(other_label)s and %(other_name)s): none are used here.
            EqualTo("new_password", _l("The two new passwords differ; type the same one twice.")),
        ],
    )
