"""Admins name category ids for people, per environment: the pet store shows no category records."""

from __future__ import annotations

from flask import Blueprint, abort, flash, redirect, render_template, url_for
from flask.typing import ResponseReturnValue
from flask_babel import gettext as _

from petportal.admin.forms import CategoryLabelForm, RemoveLabelForm
from petportal.auth.access import role_required
from petportal.catalog import categories
from petportal.config import EVERY_ENVIRONMENT
from petportal.data.models import Role
from petportal.serving.request import serving

bp = Blueprint("categories", __name__, url_prefix="/admin/categories")


@bp.route("", methods=["GET", "POST"])
@role_required(Role.ADMIN)
def labels_page() -> ResponseReturnValue:
    """The labels of the environment this admin is served, and the form that adds or renames one."""
    environment = serving().environment
    form = CategoryLabelForm()
    if form.validate_on_submit():
        if form.environment.data != environment.name:
            return _page(form, _moved(form.environment.data, environment.name)), 409
        try:
            categories.name(environment.name, form.category_id.data, form.label.data, own_labels=form.own_labels())
        except categories.LabelTaken as taken:
            # The field whose text reads the same: the language's own label, or the default one it falls back to.
            taken_field = {"de": form.label_de, "es": form.label_es}.get(taken.language or "", form.label)
            taken_field.errors.append(
                _(
                    "“%(label)s” already names category %(category_id)s in %(environment)s. Choose another label, "
                    "or rename that category first.",
                    label=taken.label,
                    category_id=taken.category_id,
                    environment=environment.name,
                )
            )
            return _page(form), 400
        labelled = _(
            "Category %(category_id)s is “%(label)s” in %(environment)s.",
            category_id=form.category_id.data,
            label=form.label.data,
            environment=environment.name,
        )
        flash(labelled, "success")
        return redirect(url_for(".labels_page"), 303)
    return _page(form), 400 if form.is_submitted() else 200


@bp.post("/<int(signed=True):category_id>/remove")
@role_required(Role.ADMIN)
def remove(category_id: int) -> ResponseReturnValue:
    """Take a label off; the id is shown alone again."""
    form = RemoveLabelForm()
    if not form.validate_on_submit():
        abort(400)
    environment = serving().environment
    shown_for = form.environment.data or ""
    if shown_for != environment.name:
        return _page(CategoryLabelForm(formdata=None), _moved(shown_for, environment.name)), 409
    named = {"category_id": category_id, "environment": environment.name}
    if categories.remove(environment.name, category_id):
        flash(_("Category %(category_id)s has no label in %(environment)s now.", **named), "success")
    else:
        flash(_("Category %(category_id)s had no label in %(environment)s.", **named), "info")
    return redirect(url_for(".labels_page"), 303)


def _page(form: CategoryLabelForm, problem: str | None = None) -> str:
    environment = serving().environment
    form.environment.data = environment.name
    rows = categories.all_labels(environment.name)
    return render_template(
        "admin/categories.html", form=form, rows=rows, remove_form=RemoveLabelForm(), problem=problem
    )


def _moved(shown_for: str, now: str) -> str:
    if shown_for not in EVERY_ENVIRONMENT:
        return _(
            "This page was opened for another environment, but you are now served %(now)s. Nothing was changed. "
            "These are %(now)s's labels: check them and try again if that is what you want.",
            now=now,
        )
    return _(
        "This page was opened for %(shown_for)s, but you are now served %(now)s. Nothing was changed. "
        "These are %(now)s's labels: check them and try again if that is what you want.",
        shown_for=shown_for,
        now=now,
    )
