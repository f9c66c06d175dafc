"""The upload form of a bulk import."""

from flask_wtf.file import FileField, FileRequired

from petportal.i18n.lazy_text import lazy_gettext as _l
from petportal.web.forms import PortalForm


class UploadForm(PortalForm):
    """One CSV file. Built with the request's files as well as its form (PortalForm reads the form alone)."""

    file = FileField(
        _l("CSV file"),
        description=_l("UTF-8, with the header name,categoryId,status; at most 1 MB and 1,000 animals."),
        validators=[FileRequired(_l("Choose a CSV file to upload."))],
    )
