"""Bench-only: the cheapest honest Flask page over the pet store, to set the uncached portal against.

One view, /animals: one listPets call (limit 20) through a urllib3 pool, as the portal's client makes it, the
JSON read, and a Jinja template compiled once that draws the rows, escaped, into a page about the size of the
portal's list page (12 kB). No extension, session, form, security header, translation, metric or access line:
what Flask, Jinja and one call to the store cost at least, served as the portal is (`python -m bench` runs it
through bench/floor_server.py). It reads the store from PETSTORE_PRODUCTION_URL and PETSTORE_PRODUCTION_KEY.
"""

import json
import os

import urllib3
from flask import Flask

# The rest of the portal's page (head, menu, filter bar, summary, footer), as inert bytes of about its size.
CHROME = "<p>" + "x" * 7000 + "</p>"
PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Animals · Pet Portal</title></head><body>{{ chrome|safe }}
<table><tbody>{% for animal in animals %}
<tr data-folded="{{ animal.name|lower }}"><td data-label="Name">{{ animal.name }}</td>
<td data-label="Category">{{ animal.categoryId }}</td>
<td data-label="Status"><span class="badge status-{{ animal.status }}">{{ animal.status }}</span></td>
<td><a href="/animals/{{ animal.id }}?limit=20">View<span class="visually-hidden"> {{ animal.name }}</span></a></td>
</tr>{% endfor %}</tbody></table></body></html>"""

app = Flask(__name__)
_url = os.environ.get("PETSTORE_PRODUCTION_URL", "http://127.0.0.1:9/v1")
_store = urllib3.connection_from_url(_url, maxsize=8)  # a pool per worker: connections are made after the fork
_path = urllib3.util.parse_url(_url).path or ""
_headers = {"Accept": "application/json", "Authorization": f"Bearer {os.environ.get('PETSTORE_PRODUCTION_KEY', '')}"}
_page = app.jinja_env.from_string(PAGE)


@app.get("/animals")
def animals() -> str:
    """The first 20 animals of the store, as rows of a page."""
    answer = _store.request("GET", f"{_path}/pets?limit=20", headers=_headers)
    return _page.render(animals=json.loads(answer.data), chrome=CHROME)
