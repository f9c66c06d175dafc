"""Bench-only: the portal itself plus /bare, which renders the animal list from rows read once at start.

It has the portal's whole request path (hooks, headers, template), with no upstream call per request.
"""

import os

from flask import request

from petportal import create_app
from petportal.catalog.forms import AnimalFilterForm
from petportal.catalog.views import list_page
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
    return list_page(form, ROWS[form.query()["limit"]])
