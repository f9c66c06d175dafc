"""Bench-only: the portal itself plus /bare, which renders the animal list from rows read once at start.

It has the portal's whole request path (hooks, headers, template), with no upstream call per request.
"""

import os

from flask import render_template, request

from petportal import create_app
from petportal.catalog.forms import AnimalFilterForm
from petportal.petstore import PetStoreClient

app = create_app()
_client = PetStoreClient(os.environ["PETSTORE_PRODUCTION_URL"], os.environ["PETSTORE_PRODUCTION_KEY"])
ROWS = {limit: _client.list_pets(limit=limit) for limit in (20, 100)}
_client.close()


@app.get("/bare")
def bare():
    """The list page for `limit` rows, rendered as /animals renders it."""
    form = AnimalFilterForm(formdata=request.args)
    form.validate()
    query = form.query()
    animals = ROWS[query["limit"]]
    return render_template(
        "catalog/list.html", form=form, animals=animals, query=query, more_may_exist=len(animals) == query["limit"]
    )
