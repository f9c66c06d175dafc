"""One guard for everything a pet store says: the key, however disguised, never reaches a page or a file.

A hostile store names its animals after the portal's key, disguised; a 400 to createPet quotes it. Each such
text is withheld whole: a record in a list on its own row, with a note, while the rest of the page shows.
"""

import base64
import json
import re

import pytest

from bench.portal import csrf_token
from petportal.petstore.records import WITHHELD_NAME

from helpers import PRODUCTION_KEY, STAGING_KEY, AuthActions, finished, press, submission_token, upload
from servers import serve

KEY = PRODUCTION_KEY
FULL_WIDTH = {ord(char): ord(char) + 0xFEE0 for char in "abcdefghijklmnopqrstuvwxyz0123456789-"}
DISGUISES = {
    "JSON-escaped": "".join(f"\\u{ord(char):04x}" for char in KEY),  # literal \\u0070 text in the name
    "the first half": KEY[: len(KEY) // 2],
    "the second half": KEY[len(KEY) // 2 :],
    "base64": base64.b64encode(KEY.encode()).decode(),
    "hex": KEY.encode().hex(),
    "reversed": KEY[::-1],
    "full-width": KEY.translate(FULL_WIDTH),
    "upper case, spaced": " ".join(KEY.upper()),
    "a run of 8": f"Rex {KEY[9:17]} the dog",
}
REFUSALS = {
    "runs shorter than 10": f"name refused: {KEY[:9]} {KEY[9:18]} {KEY[18:27]}",
    "full-width letters": f"name refused for {KEY.translate(FULL_WIDTH)}",
    "literal \\u escapes": "you sent " + "".join(f"\\u{ord(char):04x}" for char in KEY[:12]),
}


class DisguisingStore:
    """Lists one honest animal and one per disguise; answers getPet with the disguise of its id; refuses every
    createPet with 400 and the message of `refusal`."""

    def __init__(self, refusal="plain"):
        self.refusal = refusal
        self.animals = [{"id": 1, "name": "Honest Rex", "categoryId": 1, "status": "available"}] + [
            {"id": number, "name": name, "categoryId": 2} for number, name in enumerate(DISGUISES.values(), start=2)
        ]

    def __call__(self, environ, start_response):
        path, method = environ["PATH_INFO"], environ["REQUEST_METHOD"]
        if method == "POST":
            status, body = "400 Bad Request", {"code": "bad", "message": REFUSALS.get(self.refusal, "bad name")}
        elif path == "/v1/pets":
            status, body = "200 OK", self.animals
        else:
            found = [animal for animal in self.animals if path == f"/v1/pets/{animal['id']}"]
            status, body = ("200 OK", found[0]) if found else ("404 Not Found", {"code": "nf", "message": "no"})
        payload = json.dumps(body).encode()
        start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(payload)))])
        return [payload]


@pytest.fixture
def disguising_portal(make_portal, request):
    refusal = getattr(request, "param", "plain")
    with serve(DisguisingStore(refusal)) as production, serve(DisguisingStore(refusal)) as staging:
        environments = {
            "production": {"url": production + "/v1", "key": KEY},
            "staging": {"url": staging + "/v1", "key": STAGING_KEY},
        }
        yield make_portal(PETSTORE_ENVIRONMENTS=environments)


def names_shown(page):
    return re.findall(r'<td class="text-free" data-label="Name">([^<]*)</td>', page)


def test_a_list_withholds_each_disguised_name_on_its_own_row_and_shows_the_rest(disguising_portal):
    page = disguising_portal.test_client().get("/animals?limit=100")
    assert page.status_code == 200
    shown = names_shown(page.text)
    assert shown[0] == "Honest Rex"
    assert shown[1:] == [WITHHELD_NAME.replace("'", "&#39;")] * len(DISGUISES)


@pytest.mark.parametrize("pet_id", range(2, 2 + len(DISGUISES)), ids=list(DISGUISES))
def test_an_animal_page_withholds_a_disguised_name(disguising_portal, pet_id):
    page = disguising_portal.test_client().get(f"/animals/{pet_id}")
    assert page.status_code == 200
    assert "(name withheld: the pet store&#39;s text quoted a credential)" in page.text


@pytest.mark.parametrize("disguising_portal", list(REFUSALS), indirect=True)
def test_a_refusal_quoting_the_key_in_disguise_is_withheld_from_staff(disguising_portal):
    staff = disguising_portal.test_client()
    AuthActions(staff).login("staff")
    form = staff.get("/animals/new").text
    fields = {"csrf_token": csrf_token(form), "submission_token": submission_token(form)}
    refused = staff.post("/animals/new", data={**fields, "name": "Rex", "category_id": "1"})
    assert refused.status_code == 400
    assert "The pet store&#39;s message was withheld: it quoted a credential." in refused.text
    path = upload(staff, "name,categoryId,status\nRex,1,\n").headers["Location"]
    press(staff, path, "start")
    assert finished(staff, path)["failed"] == 1
    results = staff.get(f"{path}/results.csv").get_data(as_text=True)
    assert "The pet store's message was withheld: it quoted a credential." in results
