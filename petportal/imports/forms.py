"""The upload form of a bulk import, and the button that starts one."""

from flask_wtf.file import FileField, FileRequired
from wtforms import SelectMultipleField

from petportal.i18n.lazy_text import lazy_gettext as _l
from petportal.web.forms import ButtonForm, PortalForm
from petportal.web.readers import whole_number


class UploadForm(PortalForm):
    """One CSV file. Built with the request's files as well as its form (PortalForm reads the form alone)."""

    file = FileField(
        _l("CSV file"),
        description=_l("UTF-8, with the header name,categoryId,status; at most 1 MB and 1,000 animals."),
        validators=[FileRequired(_l("Choose a CSV file to upload."))],
    )


class StartForm(ButtonForm):
    """Start (or resume) an import; `row`, repeated: the positions of the copies chosen to add anyway (first start)."""

    row = SelectMultipleField(_l("Add anyway"), validate_choice=False)

    def chosen(self) -> set[int]:
        """The positions chosen; anything that is not a row's position is ignored (it chooses nothing)."""
        numbers = (whole_number(value) for value in self.row.data or [] if isinstance(value, str))
        return {number for number in numbers if number is not None and 0 < number <= 2**31}
