"""The admin forms: switch the environment for everyone, preview one for yourself, and manage accounts."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from wtforms import Field, HiddenField, SelectChoice, SelectField, StringField
from wtforms.validators import DataRequired, Length, ValidationError

from ..auth.accounts import USERNAME_MAX_LENGTH
from ..auth.forms import new_password_field
from ..catalog.categories import LABEL_MAX_LENGTH
from ..catalog.forms import category_id_field, readable, stripped
from ..forms import PortalForm

if TYPE_CHECKING:
    from ..environments import Environment

ROLE_CHOICES = [SelectChoice("staff", "Staff: adds animals"), SelectChoice("admin", "Admin: also runs the portal")]


def environment_choices(environments: Iterable[Environment], empty_label: str | None = None) -> list[SelectChoice]:
    """Every environment as a choice; unconfigured ones are shown but disabled."""
    choices = [SelectChoice("", empty_label)] if empty_label else []
    for environment in environments:
        label = environment.name if environment.configured else f"{environment.name} (not configured)"
        choices.append(SelectChoice(environment.name, label, {"disabled": True} if not environment.configured else {}))
    return choices


class SwitchEnvironmentForm(PortalForm):
    """Switch the active environment for every user and process; the name must be typed again."""

    environment = SelectField("Serve everyone from")
    confirm = StringField(
        "Type the environment's name again to confirm",
        validators=[DataRequired("Type the environment's name to confirm the switch.")],
    )

    def validate_confirm(self, field: Field) -> None:
        """The typed name must be exactly the chosen environment's."""
        if field.data.strip() != self.environment.data:
            raise ValidationError(f"Type “{self.environment.data}” exactly to confirm. Nothing was switched.")


class PreviewForm(PortalForm):
    """Serve one environment to this admin's session only; empty clears the preview."""

    environment = SelectField("Preview for yourself")


class NewUserForm(PortalForm):
    """A new staff member or admin, with an initial password they must change at their first login."""

    username = StringField(
        "User name",
        validators=[DataRequired("Enter a user name."), Length(max=USERNAME_MAX_LENGTH)],
        description="Letters, digits and . _ @ - only.",
    )
    role = SelectField("Role", choices=ROLE_CHOICES, default="staff")
    password = new_password_field("Initial password")


class RoleForm(PortalForm):
    """Another role for an account."""

    role = SelectField("Role", choices=ROLE_CHOICES)


class ResetPasswordForm(PortalForm):
    """A new password set by an admin; the account must change it at its next login."""

    password = new_password_field("New password")


class CategoryLabelForm(PortalForm):
    """A label for one category id of the environment being served; a new label renames it. `environment`
    is the one the page showed: a change is refused when the admin is served another one by then."""

    environment = HiddenField()
    category_id = category_id_field()
    label = StringField(
        "Label",
        description=f"What people read for this category, for example “Dogs”. Up to {LABEL_MAX_LENGTH} characters.",
        filters=[stripped],
        validators=[
            DataRequired("Enter the label."),
            Length(max=LABEL_MAX_LENGTH, message=f"Keep the label to {LABEL_MAX_LENGTH} characters or fewer."),
            readable,
        ],
    )
