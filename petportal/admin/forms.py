"""The admin forms: the environment's switch and preview, accounts, category labels, the audit log's filter."""

from __future__ import annotations

from typing import Any

from flask_babel import gettext as _
from wtforms import Field, HiddenField, SelectChoice, SelectField, SelectMultipleField, StringField
from wtforms.validators import DataRequired, Length, Optional, ValidationError

from petportal.admin.audit_log import ACTIONS
from petportal.auth.accounts import AccountError, environments_of, username_problem
from petportal.auth.forms import new_password_field
from petportal.catalog.categories import LABEL_MAX_LENGTH
from petportal.catalog.forms import Readable, category_id_field, stripped
from petportal.config import EVERY_ENVIRONMENT, Environment
from petportal.data import audit
from petportal.data.models import AuditAction, Role
from petportal.i18n.languages import ENVIRONMENT_LABELS, environment_label
from petportal.i18n.lazy_text import lazy_gettext as _l
from petportal.petstore.environments import environments
from petportal.web.forms import ButtonForm, PortalForm
from petportal.web.readers import DayField

ROLE_CHOICES = [
    SelectChoice(Role.STAFF, _l("Staff: adds animals")),
    SelectChoice(Role.ADMIN, _l("Admin: also runs the portal")),
]
EVERYTHING = SelectChoice("", _l("All"))


def environment_choices(empty_label: str | None = None) -> list[SelectChoice]:
    """Every environment as a choice, in the request's language; unconfigured ones are shown but disabled."""
    choices = [SelectChoice("", empty_label)] if empty_label else []
    for environment in environments().all():
        name = environment_label(environment.name)
        label = name if environment.configured else _("%(environment)s (not configured)", environment=name)
        choices.append(SelectChoice(environment.name, label, {"disabled": True} if not environment.configured else {}))
    return choices


class EnvironmentsField(SelectMultipleField):
    """The environments an account may work on: one or both (check boxes), `chosen`."""

    def __init__(self, label: Any = None, **kwargs: Any) -> None:
        # Each is named in the reader's language by the page.
        choices = [SelectChoice(name, name) for name in Environment]
        super().__init__(label, choices=choices, validate_choice=False, default=sorted(EVERY_ENVIRONMENT), **kwargs)

    def pre_validate(self, form: Any) -> None:
        given = [value for value in self.data or [] if isinstance(value, str)]
        try:
            self.chosen = environments_of(given)
        except AccountError as error:
            raise ValidationError(str(error)) from error


class SwitchEnvironmentForm(PortalForm):
    """Switch the active environment for every user and process; the name must be typed again."""

    environment = SelectField(_l("Serve everyone from"))
    confirm = StringField(
        _l("Type the environment's name again to confirm"),
        validators=[DataRequired(_l("Type the environment's name to confirm the switch."))],
    )

    def validate_confirm(self, field: Field) -> None:
        """The typed name must be exactly the chosen environment's."""
        if field.data.strip() != self.environment.data:
            raise ValidationError(
                _("Type “%(environment)s” exactly to confirm. Nothing was switched.", environment=self.environment.data)
            )


class PreviewForm(PortalForm):
    """Serve one environment to this admin's session only; empty clears the preview."""

    # Its own id: the switch form on the same page has a field named `environment` too.
    environment = SelectField(_l("Preview for yourself"), id="preview_environment")


class NewUserForm(PortalForm):
    """A new staff member or admin, with an initial password they must change at their first login."""

    username = StringField(
        _l("User name"),
        validators=[DataRequired(_l("Enter a user name."))],
        description=_l("Letters, digits and . _ @ - only."),
    )
    role = SelectField(_l("Role"), choices=ROLE_CHOICES, default=Role.STAFF)
    environments = EnvironmentsField(_l("Works on"))
    password = new_password_field(_l("Initial password"))

    def validate_username(self, field: Field) -> None:
        """The account's own rules for a name (accounts.create asks them too), shown with every other field's."""
        if problem := username_problem((field.data or "").strip()):
            raise ValidationError(problem)


class RoleForm(PortalForm):
    """Another role for an account."""

    role = SelectField(_l("Role"), choices=ROLE_CHOICES)


class EnvironmentsForm(PortalForm):
    """The environments an account may work on."""

    environments = EnvironmentsField(_l("Works on"))


class ResetPasswordForm(PortalForm):
    """A new password set by an admin; the account must change it at its next login."""

    password = new_password_field(_l("New password"))


# What every label of a category must be, in whichever language (Length puts the number in itself: %(max)d).
LABEL_RULES = [
    Length(max=LABEL_MAX_LENGTH, message=_l("Keep the label to %(max)d characters or fewer.")),
    Readable(_l("The label must not contain control characters."), _l("The label must contain something visible.")),
]


class RemoveLabelForm(ButtonForm):
    """The button that takes a label off, with the environment the page showed (see CategoryLabelForm)."""

    environment = HiddenField()


class CategoryLabelForm(PortalForm):
    """A category id's label in the environment served (a new one renames it), with optional German and Spanish
    ones; `environment` is the one the page showed: a change is refused when the admin is served another by then."""

    environment = HiddenField()
    category_id = category_id_field()
    label = StringField(
        _l("Label"),
        description=_l(
            "What people read for this category, for example “Dogs”. Up to %(count)s characters.",
            count=LABEL_MAX_LENGTH,
        ),
        filters=[stripped],
        validators=[DataRequired(_l("Enter the label.")), *LABEL_RULES],
    )
    label_de = StringField(
        _l("Label in German (optional)"),
        description=_l("What people reading German see, for example “Hunde”. Empty: the label above."),
        filters=[stripped],
        validators=[Optional(), *LABEL_RULES],
    )
    label_es = StringField(
        _l("Label in Spanish (optional)"),
        description=_l("What people reading Spanish see, for example “Perros”. Empty: the label above."),
        filters=[stripped],
        validators=[Optional(), *LABEL_RULES],
    )

    def own_labels(self) -> dict[str, str | None]:
        """{language: its own label, or None}, as catalog.categories.name takes them."""
        return {"de": self.label_de.data or None, "es": self.label_es.data or None}


def is_day(form: Any, field: DayField) -> None:
    """A `DayField` given something that is not a day (YYYY-MM-DD) is refused; an empty one is not."""
    given = field.raw_data[0] if field.raw_data and isinstance(field.raw_data[0], str) else ""
    if given.strip() and field.data is None:
        raise ValidationError(_("Enter a day as YYYY-MM-DD, for example 2026-12-01."))


class AuditFilterForm(PortalForm):
    """The GET filter of the audit log (its page and its download): who, what, which environment, which days."""

    class Meta:
        csrf = False

    actor = StringField(
        _l("Who"),
        filters=[stripped],
        validators=[Length(max=audit.ACTOR_MAX_LENGTH, message=_l("Enter at most %(max)d characters."))],
    )
    action = SelectField(
        _l("What"), default="", choices=[EVERYTHING, *(SelectChoice(each.value, ACTIONS[each]) for each in AuditAction)]
    )
    environment = SelectField(
        _l("Environment"),
        default="",
        choices=[EVERYTHING, *(SelectChoice(name, ENVIRONMENT_LABELS[name]) for name in Environment)],
    )
    since = DayField(_l("From day (UTC)"), validators=[is_day])
    until = DayField(_l("To day (UTC)"), validators=[is_day])

    def validate_until(self, field: DayField) -> None:
        """The days run forwards: the last is not before the first."""
        if field.data is not None and self.since.data is not None and field.data < self.since.data:
            raise ValidationError(_("The last day comes before the first."))

    def chosen(self) -> audit.Filter:
        """The entries this valid filter shows."""
        return audit.Filter(
            actor=self.actor.data or None,
            action=AuditAction(self.action.data) if self.action.data else None,
            environment=self.environment.data or None,
            since=self.since.data,
            until=self.until.data,
        )

    def kept(self) -> dict[str, str]:
        """Every value this valid filter holds, as the page's links (the next page, the download) carry it."""
        return {name: str(value) for name, value in self.data.items() if value}
