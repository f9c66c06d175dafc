"""Admins name category ids for people, per environment: the pet store shows no category records."""

from flask import Blueprint, abort, flash, redirect, render_template, url_for

from ..auth.access import role_required
from ..catalog import categories
from ..forms import ButtonForm
from ..serving import serving
from .forms import CategoryLabelForm

bp = Blueprint("categories", __name__, url_prefix="/admin/categories")


@bp.route("", methods=["GET", "POST"])
@role_required("admin")
def labels_page():
    """The labels of the environment this admin is served, and the form that adds or renames one."""
    environment = serving().environment
    form = CategoryLabelForm()
    if form.validate_on_submit():
        categories.name(environment.name, form.category_id.data, form.label.data)
        flash(f"Category {form.category_id.data} is “{form.label.data}” in {environment.name}.", "success")
        return redirect(url_for(".labels_page"), 303)
    status = 400 if form.is_submitted() else 200
    rows = categories.all_labels(environment.name)
    return render_template("admin/categories.html", form=form, rows=rows, remove_form=ButtonForm()), status


@bp.post("/<int:category_id>/remove")
@role_required("admin")
def remove(category_id):
    """Take a label off; the id is shown alone again."""
    if not ButtonForm().validate_on_submit():
        abort(400)
    environment = serving().environment
    if categories.remove(environment.name, category_id):
        flash(f"Category {category_id} has no label in {environment.name} now.", "success")
    return redirect(url_for(".labels_page"), 303)
