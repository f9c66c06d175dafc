"""The admin forms: switch the environment for everyone, or preview one for yourself."""

from wtforms import SelectChoice, SelectField, StringField
from wtforms.validators import DataRequired, ValidationError

from ..forms import PortalForm


def environment_choices(environments, empty_label=None):
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

    def validate_confirm(self, field):
        """The typed name must be exactly the chosen environment's."""
        if field.data.strip() != self.environment.data:
            raise ValidationError(f"Type “{self.environment.data}” exactly to confirm. Nothing was switched.")


class PreviewForm(PortalForm):
    """Serve one environment to this admin's session only; empty clears the preview."""

    environment = SelectField("Preview for yourself")
