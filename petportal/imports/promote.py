"""Promoting animals from staging to production: each staging animal reaches production at most once, ever.

A promotion is an import whose rows come from staging's animals rather than a file: the same preview, start, progress
and results, sent by the same runner. Each row claims its staging id in the ledger (`Promotion`) before it is sent,
so no other promotion, session or instance sends it again; an unknown outcome stays claimed, and is never resent.
"""

import hashlib
from dataclasses import replace

from flask import Blueprint, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue
from flask_babel import gettext as _
from flask_login import current_user
from sqlalchemy import select
from wtforms import BooleanField, Field, SelectMultipleField
from wtforms.validators import ValidationError

from petportal.auth.access import role_required
from petportal.catalog import browse, categories, duplicates
from petportal.catalog.forms import AnimalFilterForm
from petportal.data.models import BulkImport, ImportRow, Promotion, Role, RowReason
from petportal.data.payloads import PromotedBefore, RowReasonPayload, StoreRefusal
from petportal.extensions import db
from petportal.i18n.lazy_text import lazy_gettext as _l
from petportal.imports import batches, files
from petportal.petstore import INT64_MAX, LIMIT_MAX, Gone, NotFound, Pet, PetStoreClient
from petportal.petstore.environments import environments
from petportal.web.error_pages import render_error
from petportal.web.forms import PortalForm
from petportal.web.readers import whole_number

bp = Blueprint("promote", __name__, url_prefix="/animals/promote")
SOURCE, TARGET = "staging", "production"


class PromoteForm(PortalForm):
    """The staging animals chosen to promote: `pet_id`, once for each."""

    pet_id = SelectMultipleField(_l("Animals to promote"), validate_choice=False)

    def validate_pet_id(self, field: Field) -> None:
        """1 to LIMIT_MAX staging ids, each a whole number an animal's id can be."""
        given = [value for value in field.data or [] if isinstance(value, str)]
        ids = [whole_number(value) for value in given]
        if not given:
            raise ValidationError(_("Choose at least one animal to promote."))
        if any(number is None or not 0 <= number <= INT64_MAX for number in ids):
            raise ValidationError(_("An animal's id is a whole number from 0 up."))
        self.ids = list(dict.fromkeys(number for number in ids if number is not None))
        if len(self.ids) > LIMIT_MAX:
            raise ValidationError(_("Choose at most %(count)s animals at once.", count=LIMIT_MAX))


@bp.route("", methods=["GET", "POST"])
@role_required(Role.STAFF, every_environment=True)  # promoting changes production from staging
def promote() -> ResponseReturnValue:
    """Staging's animals with a check box each; the chosen ones become a promotion's preview."""
    registry = environments()
    if not {SOURCE, TARGET} <= {environment.name for environment in registry.all() if environment.configured}:
        return render_error(409, _("Promoting needs both production and staging to be configured."))
    chosen = PromoteForm()
    if chosen.validate_on_submit():
        batch = _preview(chosen.ids, registry.client(SOURCE), registry.client(TARGET))
        return redirect(url_for("imports.show", import_id=batch.id), 303)
    form = PromoteFilterForm(formdata=request.args)
    if not form.validate():
        return _page(form, chosen, None, {}), 400
    animals = browse.matching(registry.client(SOURCE).list_pets(**form.query()), form.q.data)
    promoted = _promoted([animal.id for animal in animals])
    if form.not_promoted.data:
        animals = [animal for animal in animals if animal.id not in promoted]
    return _page(form, chosen, animals, promoted), 400 if chosen.is_submitted() else 200


class PromoteFilterForm(AnimalFilterForm):
    """The list's filter, and whether to show only the animals not yet promoted to production."""

    not_promoted = BooleanField(_l("Only those not yet on production"))


def _page(
    form: PromoteFilterForm, chosen: PromoteForm, animals: list[Pet] | None, promoted: dict[int, Promotion]
) -> str:
    return render_template(
        "imports/promote.html",
        form=form,
        chosen=chosen,
        animals=animals,
        promoted=promoted,
        labels=categories.labels(SOURCE),
    )


def _promoted(staging_ids: list[int]) -> dict[int, Promotion]:
    """The ledger's entry of each of these staging animals promoted before (or being promoted)."""
    if not staging_ids:
        return {}
    found = db.session.scalars(select(Promotion).where(Promotion.staging_id.in_(staging_ids)))
    return {entry.staging_id: entry for entry in found}


def _preview(ids: list[int], client: PetStoreClient, target: PetStoreClient) -> BulkImport:
    """A promotion of these staging animals as a preview: the ones promoted before or gone from staging are left out,
    and those production (`target`) already lists are left out unless chosen."""
    promoted = _promoted(ids)
    # Every chosen animal is looked up, the ones promoted before too: each row of the preview is named.
    animals = _staging_animals(ids, client)
    rows = []
    for line, staging_id in enumerate(ids, start=1):
        animal = animals.get(staging_id)
        if not isinstance(animal, Pet) and staging_id in promoted:
            animal = _as_promoted(staging_id, promoted[staging_id]) or animal
        if isinstance(animal, Pet):
            row = files.animal_row(line, animal.name, animal.category_id, animal.status)
        else:
            row = files.Row(line, "", "", None, None, len(files.HEADER), len(files.HEADER), ())
        if staging_id in promoted:
            row = replace(row, left_out=PromotedBefore(pet_id=promoted[staging_id].production_id))
        elif animal is not None and not isinstance(animal, Pet):
            gone = StoreRefusal(code=RowReason.GONE, said=animal.reason, message=animal.message, status=animal.status)
            row = replace(row, left_out=gone)
        elif animal is None:
            row = replace(row, left_out=RowReasonPayload(code=RowReason.GONE))
        rows.append(replace(row, source_id=staging_id))
    rows = files.left_out_copies(rows, duplicates.listed(target))
    digest = hashlib.sha256(",".join(map(str, ids)).encode()).digest()
    return batches.create(current_user, TARGET, SOURCE, digest, rows, source=SOURCE)


def _as_promoted(staging_id: int, entry: Promotion) -> Pet | None:
    """The animal as its promotion's import row sent it, for one staging no longer lists; None once that is gone."""
    row = db.session.get(ImportRow, (entry.import_id, entry.position))
    if row is None or row.category_id is None:
        return None
    return Pet(staging_id, row.name, row.category_id, row.status)


def _staging_animals(ids: list[int], client: PetStoreClient) -> dict[int, Pet | NotFound | None]:
    """Each staging animal by its id, or the store's reason it has none (a 404's message; None once getPet is
    retired): one listPets, then getPet for any chosen animal beyond the first LIMIT_MAX it lists."""
    listed = {animal.id: animal for animal in client.list_pets(limit=LIMIT_MAX)}
    found: dict[int, Pet | NotFound | None] = {}
    for staging_id in ids:
        try:
            found[staging_id] = listed.get(staging_id) or client.get_pet(staging_id)
        except NotFound as missing:
            found[staging_id] = missing
        except Gone:
            found[staging_id] = None
    return found
