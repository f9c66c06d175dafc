"""The catalog's forms: the list filter, and one animal's fields (the add form, each row of a bulk import)."""

import unicodedata
from typing import Any, TypedDict
from urllib.parse import urlencode

from werkzeug.datastructures import MultiDict
from wtforms import Field, Form, HiddenField, SelectChoice, SelectField, StringField
from wtforms.validators import AnyOf, DataRequired, InputRequired, Length, Optional, ValidationError

from petportal.catalog.adding import NewAnimal
from petportal.catalog.browse import SORT_ORDERS
from petportal.i18n.lazy_text import lazy_gettext as _l
from petportal.petstore import INT64_MAX, LIMIT_DEFAULT, LIMIT_MAX, LIMIT_MIN, PET_STATUSES
from petportal.web.forms import PortalForm
from petportal.web.front_door import NOT_UTF8
from petportal.web.readers import ASCII_SPACE, MAX_DIGITS, WholeNumberField

# The portal's own rule, not the API's: a name people can read in a list.
NAME_MAX_LENGTH = 100
SEARCH_MAX_LENGTH = 100
# Each status as the filter's choices name it.
STATUS_LABELS = {"available": _l("Available"), "pending": _l("Pending"), "sold": _l("Sold")}


def _status_choices(empty_label: object) -> list[SelectChoice]:
    return [SelectChoice("", empty_label)] + [SelectChoice(status, STATUS_LABELS[status]) for status in PET_STATUSES]


class WholeNumberRange:
    """Like WTForms' NumberRange, but exact for integers of any size: NumberRange's math.isnan() raises OverflowError
    for an int wider than a float, a 500; and it says when a number is too large (`too_large`)."""

    def __init__(self, low: int, high: int, message: object, too_large: object = None) -> None:
        self.low, self.high, self.message, self.too_large = low, high, message, too_large

    def __call__(self, form: Form, field: Field) -> None:
        if self.too_large is not None and self._too_large(field):
            raise ValidationError(self.too_large)
        if field.data is None or not self.low <= field.data <= self.high:
            raise ValidationError(self.message)

    def _too_large(self, field: Field) -> bool:
        """Above the bound, or digits too many for the reader to read at all (it reads no more than MAX_DIGITS)."""
        if field.data is not None:
            return bool(field.data > self.high)
        given = field.raw_data[0].strip(ASCII_SPACE) if field.raw_data and isinstance(field.raw_data[0], str) else ""
        return len(given) > MAX_DIGITS and given.isascii() and given.isdigit()


# Right-to-left overrides and isolates: they reorder the text shown after them (on a page, in a flash).
BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


class Readable:
    """Text a person reads (a name, a label, a search): no control characters or direction overrides, and something
    visible (joiners inside emoji stay allowed). Each field says what is wrong in its own words."""

    def __init__(self, control: object, invisible: object) -> None:
        self.control, self.invisible = control, invisible

    def __call__(self, form: Form, field: Field) -> None:
        if not field.data:
            return
        if "\ufffd" in field.data:
            # What a multipart form's bytes that were not UTF-8 became (Werkzeug replaces them): never sent on.
            raise ValidationError(NOT_UTF8)
        if any(unicodedata.category(char) == "Cc" or char in BIDI_CONTROLS for char in field.data):
            raise ValidationError(self.control)
        if all(unicodedata.category(char) in ("Cf", "Zs") for char in field.data):
            raise ValidationError(self.invisible)


def category_id_field(**options: Any) -> WholeNumberField:
    """A category id as people write it: 0 up to the API's 64-bit limit (the add form, the labels page, import rows)."""
    return WholeNumberField(
        _l("Category id"),
        validators=[
            InputRequired(_l("Enter the category id, a whole number.")),
            # Ids are ASCII digits everywhere in the portal: the API would take a negative one, no person means it.
            # Said as people read it: the API's 19-digit bound means nothing to them.
            WholeNumberRange(
                0,
                INT64_MAX,
                _l("The category id must be a whole number from 0 up."),
                too_large=_l("This category id is too large for the pet store."),
            ),
        ],
        **options,
    )


def stripped(value: object) -> object:
    return value.strip() if isinstance(value, str) else value


class PetsQuery(TypedDict):
    """The listPets arguments of a list filter: `client.list_pets(**query)`."""

    limit: int
    status: str | None


class AnimalFilterForm(PortalForm):
    """The animal list's filter: status and page size for the pet store; a search and an order for what it returns."""

    class Meta:
        csrf = False

    status = SelectField(_l("Status"), choices=_status_choices(_l("All")), default="")
    limit = WholeNumberField(
        _l("Show"),
        default=LIMIT_DEFAULT,
        validators=[
            Optional(),
            WholeNumberRange(
                LIMIT_MIN, LIMIT_MAX, _l("Choose a number from %(low)s to %(high)s.", low=LIMIT_MIN, high=LIMIT_MAX)
            ),
        ],
    )

    q = StringField(
        _l("Name contains"),
        filters=[stripped],
        validators=[
            # Length puts the number in itself (%(max)d).
            Length(max=SEARCH_MAX_LENGTH, message=_l("Search with at most %(max)d characters.")),
            Readable(
                _l("The name contains must not contain control characters."),
                _l("The name contains must contain something visible."),
            ),
        ],
    )
    # No menu: the table's headings link to each order (catalog/list.html), and the filter keeps the one in use.
    sort = SelectField(
        _l("Sort by"),
        choices=[SelectChoice(order, order) for order in SORT_ORDERS],
        default="id",
        filters=[lambda value: value or "id"],
        validate_choice=False,
        validators=[
            AnyOf(
                SORT_ORDERS,
                message=_l("Sort by id, name, category or status, each also with a leading “-” for the reverse order."),
            )
        ],
    )

    def query(self) -> PetsQuery:
        """The listPets arguments this filter asks for."""
        return {"limit": self.limit.data or LIMIT_DEFAULT, "status": self.status.data or None}

    @classmethod
    def read(cls, args: MultiDict[str, str]) -> str | None:
        """The query `args` written one way (defaults left out), or None when it cannot be read: a page_cache key."""
        form = cls(formdata=args)
        return urlencode(form.kept()) if form.validate() else None

    def kept(self) -> dict[str, str | int]:
        """Every value this filter holds that differs from its default: what a link back to the list keeps."""
        limit = self.limit.data if self.limit.data != LIMIT_DEFAULT else None
        values = {"limit": limit, "status": self.status.data or None, "q": self.q.data or None}
        values["sort"] = self.sort.data if self.sort.data != "id" else None
        return {name: value for name, value in values.items() if value is not None}


class AnimalForm(PortalForm):
    """One animal's fields, checked as the add form and every row of a bulk import check them."""

    name = StringField(
        _l("Name"),
        description=_l("Up to %(count)s characters.", count=NAME_MAX_LENGTH),
        filters=[stripped],
        validators=[
            DataRequired(_l("Enter the animal's name.")),
            Length(max=NAME_MAX_LENGTH, message=_l("Keep the name to %(max)d characters or fewer.")),
            Readable(
                _l("The name must not contain control characters."), _l("The name must contain something visible.")
            ),
        ],
    )
    category_id = category_id_field(description=_l("The number of the animal's category, for example 1."))
    status = SelectField(
        _l("Status"),
        description=_l("Leave as “No status” if the animal has none yet."),
        choices=_status_choices(_l("No status")),
        default="",
    )

    def new_animal(self) -> NewAnimal:
        """The animal the validated fields describe; no status chosen means none is sent."""
        category_id = self.category_id.data
        assert category_id is not None, "the field's validators let no empty category id through"
        return NewAnimal(self.name.data, category_id, self.status.data or None)


class AddAnimalForm(AnimalForm):
    """The staff form that adds one animal to the environment being served."""

    submission_token = HiddenField()
    # "1" once the person has seen that the animal copies one the store lists, and adds it anyway (duplicates.py).
    confirm_duplicate = HiddenField()
    # "1": the store was not answering, and the animal is to be kept and added once it answers again.
    when_back = HiddenField()
