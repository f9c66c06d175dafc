"""Views of the catalog: the list and its download, one animal, and the add form."""

from collections.abc import Mapping, Sequence
from datetime import datetime

from flask import Blueprint, current_app, flash, redirect, render_template, request, url_for
from flask.blueprints import BlueprintSetupState
from flask.typing import ResponseReturnValue
from flask_babel import gettext as _
from flask_login import current_user
from werkzeug.wrappers import Response

from petportal.auth.access import role_required
from petportal.catalog import adding, additions, browse, categories, duplicates
from petportal.catalog.forms import NAME_MAX_LENGTH, SEARCH_MAX_LENGTH, AddAnimalForm, AnimalFilterForm
from petportal.clock import now
from petportal.data.models import Role
from petportal.i18n.languages import environment_label
from petportal.petstore import GET_PET_REMOVAL, LIMIT_MAX, LIMIT_MIN, Gone, Outcome, Pet, Unauthorized, Unavailable
from petportal.petstore.environments import Store
from petportal.petstore.words import store_words
from petportal.serving import stand_in
from petportal.serving.request import serving
from petportal.telemetry import metrics
from petportal.web import page_cache
from petportal.web.downloads import csv_download
from petportal.web.error_pages import ErrorPage, key_rejected_page, render_error

bp = Blueprint("catalog", __name__)
# The list's download: the API's own field names, and the category's label (or nothing).
ANIMAL_COLUMNS = ("id", "name", "categoryId", "category", "status")


@bp.record_once
def share_the_bounds(state: BlueprintSetupState) -> None:
    """What every template may use: the API's bounds, the portal's own (templates write no number) and the folding."""
    state.app.jinja_env.globals.update(
        LIMIT_MIN=LIMIT_MIN, LIMIT_MAX=LIMIT_MAX, NAME_MAX_LENGTH=NAME_MAX_LENGTH, SEARCH_MAX_LENGTH=SEARCH_MAX_LENGTH
    )
    # Each row carries its name folded as the server's search folds it, for static/js/search.js.
    state.app.jinja_env.filters["folded"] = browse.folded


@bp.get("/")
def index() -> Response:
    """The portal opens on the animal list."""
    return redirect(url_for(".list_animals"))


@bp.get("/animals")
@page_cache.cached_page(AnimalFilterForm.read)
def list_animals() -> ResponseReturnValue:
    """The animals of the environment being served, filtered by status, `limit` at a time."""
    form = AnimalFilterForm(formdata=request.args)
    if not form.validate():
        return render_template("catalog/list.html", form=form, animals=None), 400
    answer = stand_in.list_pets(serving(), **form.query())
    return list_page(form, answer.value, as_of=answer.as_of)


@bp.get("/animals.csv")
def list_animals_csv() -> ResponseReturnValue:
    """The animals the list shows for the same query, as a CSV download."""
    form = AnimalFilterForm(formdata=request.args)
    if not form.validate():
        problems = " ".join(
            _("%(field)s: %(error)s", field=field.label.text, error=error) for field in form for error in field.errors
        )
        return render_error(400, _("The animals cannot be downloaded for this query. %(problems)s", problems=problems))
    fetched = serving().client.list_pets(**form.query())
    environment = serving().environment.name
    labels = categories.labels(environment)
    rows = (
        (animal.id, animal.name, animal.category_id, labels.get(animal.category_id), animal.status)
        for animal in shown_animals(form, fetched, labels)
    )
    return csv_download(f"animals-{environment}.csv", ANIMAL_COLUMNS, rows)


def shown_animals(form: AnimalFilterForm, fetched: Sequence[Pet], labels: Mapping[int, str]) -> list[Pet]:
    """The `fetched` animals the list shows for `form`, in its order (page and download alike); raises
    `browse.NamesQuoteSecret` when their names, read one after another, quote a credential."""
    shown = browse.sorted_by(browse.matching(fetched, form.q.data), form.sort.data, labels)
    browse.read_together(shown, serving().client.quotes_secret)
    return shown


@bp.errorhandler(browse.NamesQuoteSecret)
def list_withheld(_error: browse.NamesQuoteSecret) -> ErrorPage:
    """A list whose names spell out a credential between them: neither the page nor the download is sent."""
    current_app.logger.warning("a list was withheld: its names, read one after another, quoted a credential")
    message = _(
        "The pet store's list was withheld: its animals' names, read one after another, quote a credential. "
        "This has been logged."
    )
    return render_error(502, message, title=_("List withheld"))


def list_page(form: AnimalFilterForm, fetched: Sequence[Pet], as_of: datetime | None = None) -> str:
    """The list page for a valid `form` and what listPets returned (bench/ too); `as_of`: a stand-in answer's time."""
    query = form.query()
    labels = categories.labels(serving().environment.name)
    return render_template(
        "catalog/list.html",
        form=form,
        animals=shown_animals(form, fetched, labels),
        fetched=len(fetched),
        query=query,
        kept=form.kept(),
        labels=labels,
        more_may_exist=len(fetched) == query["limit"],
        as_of=as_of,
    )


@bp.get("/animals/<int:pet_id>")
@page_cache.cached_page(lambda args: AnimalFilterForm.read(args) or "")  # a filter it cannot read: no way back
def show_animal(pet_id: int) -> ResponseReturnValue:
    """One animal, with a way back to the list as it was filtered."""
    back = AnimalFilterForm(formdata=request.args)
    back_query = back.kept() if back.validate() else {}
    found = find_animal(pet_id)
    animal = found.value
    if animal is None:
        message = _(
            "The pet store no longer looks up single animals, and this one is not among the first %(count)s it lists.",
            count=LIMIT_MAX,
        )
        return render_error(404, message)
    labels = categories.labels(serving().environment.name)
    return render_template(
        "catalog/detail.html", animal=animal, back_query=back_query, labels=labels, as_of=found.as_of
    )


def find_animal(pet_id: int) -> stand_in.Answer[Pet | None]:
    """The animal from getPet before its removal date (unless it answers 410), else from listPets; None if neither.
    Either call's last good answer stands in while the store is not answering."""
    current = serving()
    if now().date() < GET_PET_REMOVAL:
        try:
            found = stand_in.get_pet(current, pet_id)
            return stand_in.Answer(found.value, found.as_of)
        except Gone:
            current_app.logger.warning("getPet answered 410 Gone; finding animals through listPets instead")
    listed = stand_in.list_pets(current, limit=LIMIT_MAX, status=None)
    return stand_in.Answer(next((animal for animal in listed.value if animal.id == pet_id), None), listed.as_of)


@bp.route("/animals/new", methods=["GET", "POST"])
@role_required(Role.STAFF)
def add_animal() -> ResponseReturnValue:
    """Staff add an animal to the environment being served, at most once per form."""
    current = serving()
    environment = current.environment
    form = AddAnimalForm()
    if request.method != "POST":  # GET, and HEAD as GET without the body
        form.submission_token.data = adding.issue_form_token(current_user.id, environment.name)
        return _add_page(form, environment)
    if not form.validate_on_submit():
        return _form_again(form, environment, None, 400)
    token, keep_for_later = form.submission_token.data, form.when_back.data == "1"
    # A copy is looked for whenever the store answers, also for an animal posted to be kept (when_back=1): that is
    # offered because the store did not answer, but the post itself says nothing of the store now.
    if form.confirm_duplicate.data != "1" and not adding.form_sent_before(token, current_user.id):
        try:
            copy = duplicates.copy_of(form.new_animal(), duplicates.listed(current.client))
        except Unauthorized:
            return key_rejected_page(environment.name)
        except Unavailable:
            copy = None
            if not keep_for_later:
                metrics.SUBMISSIONS.labels("failed").inc()
                return _form_again(form, environment, _not_answering(), 503, offer_to_keep=True)
        # Asked again after the listing: a double click's other request may have added this very animal meanwhile
        # (the token is claimed before createPet goes out), and its repeat is answered with that outcome below.
        if copy is not None and not adding.form_sent_before(token, current_user.id):
            # Nothing is sent: the form again, asking to confirm (the same token, so a confirmed copy is added once).
            form.confirm_duplicate.data = "1"
            return _add_page(form, environment, copy_of=copy), 409
    ticket = adding.FormTicket(token, current_user.id, current_user.username, environment.name, form.new_animal())
    try:
        if keep_for_later:
            outcome = adding.keep_from_form(ticket, current.client.timeout)
        else:
            outcome = adding.add_from_form(ticket, current.client)
    except adding.FormExpired:
        form.submission_token.data = adding.issue_form_token(current_user.id, environment.name)
        expired = _("This form has expired. Check the values and add the animal again.")
        return _form_again(form, environment, expired, 400)
    except adding.NotRecorded as unrecorded:
        return render_error(503, _not_recorded(unrecorded.outcome, form.name.data), title=_("Not recorded"))
    except adding.EnvironmentChanged as changed:
        form.submission_token.data = adding.issue_form_token(current_user.id, environment.name)
        message = _(
            "This form was opened for %(opened_for)s, but the portal now serves %(environment)s. Nothing was added. "
            "Check the values and add the animal to %(environment)s if that is what you want.",
            opened_for=changed.opened_for,
            environment=environment.name,
        )
        return _form_again(form, environment, message, 409)
    match outcome:
        case adding.Created(pet_id=pet_id, repeated=True):
            metrics.SUBMISSIONS.labels("repeated").inc()
            flash(_("This form had already been sent; here is the animal it added."), "info")
        case adding.Created(pet_id=pet_id):
            metrics.SUBMISSIONS.labels("created").inc()
            # A message with links, [text, (link text, URL)...], for base.html: not text, as Flask's types expect.
            added = _("Added %(name)s to %(environment)s.", name=form.name.data, environment=environment.name)
            links = [(_("%(name)s, id %(id)s", name=form.name.data, id=pet_id), url_for(".show_animal", pet_id=pet_id))]
            flash([added, *links, (_("Your additions"), url_for(".your_additions"))], "success")  # type: ignore[arg-type]
        case adding.Refused(said=said, message=message, status=status):
            metrics.SUBMISSIONS.labels("refused").inc()
            refused = _("The pet store refused this animal: %(message)s", message=store_words(said, message, status))
            return _form_again(form, environment, refused, 400)
        case adding.Unknown():
            metrics.SUBMISSIONS.labels("unknown").inc()
            return render_template("catalog/outcome_unknown.html", form=form, environment=environment), 502
        case adding.NotSent(reason=Outcome.KEY_REJECTED):
            metrics.SUBMISSIONS.labels("failed").inc()
            return key_rejected_page(environment.name)
        case adding.NotSent():
            metrics.SUBMISSIONS.labels("failed").inc()
            return _form_again(form, environment, _not_answering(), 503, offer_to_keep=True)
        case adding.Kept():
            metrics.SUBMISSIONS.labels("kept").inc()
            kept = _(
                "%(name)s is kept: the portal adds it to %(environment)s once the pet store answers again. It waits "
                "in Your additions until then.",
                name=form.name.data,
                environment=environment_label(environment.name),
            )
            flash(kept, "info")
            return redirect(url_for(".your_additions"), 303)
    return redirect(url_for(".show_animal", pet_id=pet_id), 303)


@bp.get("/animals/mine")
@role_required(Role.STAFF)
def your_additions() -> str:
    """The animals this account added through the portal, the latest first, per environment."""
    return render_template(
        "catalog/additions.html",
        additions=additions.recent(current_user),
        waiting=additions.waiting(current_user),
        recent=additions.RECENT,
    )


def _form_again(
    form: AddAnimalForm, environment: Store, message: str | None, status: int, *, offer_to_keep: bool = False
) -> ErrorPage:
    if message:
        form.form_errors.append(message)
    return _add_page(form, environment, offer_to_keep=offer_to_keep), status


def _add_page(
    form: AddAnimalForm, environment: Store, *, offer_to_keep: bool = False, copy_of: int | None = None
) -> str:
    """The add form; `offer_to_keep`: to keep the animal for the store's return; `copy_of`: the listed id it copies."""
    return render_template(
        "catalog/new.html",
        form=form,
        environment=environment,
        labelled=categories.choices(environment.name),
        offer_to_keep=offer_to_keep,
        copy_of=copy_of,
    )


def _not_answering() -> str:
    """What the add form says when the store did not answer (its listPets or its createPet): nothing was added."""
    return _(
        "The pet store is not answering: nothing was sent, and nothing was added. Try again in a moment, or "
        "keep this animal and the portal adds it once the store answers again."
    )


def _not_recorded(outcome: adding.AddOutcome, name: str) -> str:
    """What to say when the store answered and the portal's own database could not record it."""
    if isinstance(outcome, adding.Created):
        return _(
            "The pet store added %(name)s (id %(id)s), but the portal could not record it in its own database: it is "
            "missing from Your additions and the audit log. This form will not be sent again.",
            name=name,
            id=outcome.pet_id,
        )
    return _(
        "The portal could not record the pet store's answer in its own database. The animal may or may not have "
        "been added; this form will not be sent again. Check the list of animals."
    )
