"""Promises that must hold at the edges: upstream words never carry a key out, requests are bounded."""

import pytest
from conftest import PRODUCTION_KEY, STAGING_KEY, AuthActions, csrf_token, submission_token
from servers import EchoingStore, serve

from petportal.petstore import PetStoreError, Unauthorized
from petportal.petstore.errors import clean

ECHO_STATUSES = [400, 401, 404, 410, 429, 500, 502, 503]


@pytest.fixture(params=ECHO_STATUSES)
def echoing_portal(request, make_portal):
    """A portal whose two environments are stores that quote the request's headers back at `status`."""
    with serve(EchoingStore(request.param)) as production, serve(EchoingStore(request.param)) as staging:
        environments = {
            "production": {"url": production + "/v1", "key": PRODUCTION_KEY},
            "staging": {"url": staging + "/v1", "key": STAGING_KEY},
        }
        yield make_portal(PETSTORE_ENVIRONMENTS=environments), request.param


def test_a_store_quoting_the_key_back_never_gets_it_onto_a_page_or_into_a_log(echoing_portal, caplog):
    """Every page that reaches the store, for every audience; the leak scan of `make_portal` fails on any key."""
    app, status = echoing_portal
    customer = app.test_client()
    for path in ("/readyz", "/animals", "/animals/5"):
        assert customer.get(path).status_code >= 400
    staff = app.test_client()
    AuthActions(staff).login("staff")
    form = staff.get("/animals/new").text
    added = staff.post(
        "/animals/new",
        data={"name": "Rex", "category_id": "1", "status": "available",
              "csrf_token": csrf_token(form), "submission_token": submission_token(form)},
    )
    assert added.status_code >= 400
    admin = app.test_client()
    AuthActions(admin).login("admin")
    admin.post("/admin/environment/preview", data={"environment": "staging", "csrf_token": csrf_token(admin.get("/admin/environment").text)})
    assert admin.get("/admin/status").status_code == 200
    assert admin.get("/animals").status_code >= 400
    if status == 400:
        # Staff are told what the store said, so they can fix the animal: cleaned, but still there.
        assert "The pet store refused this animal: Request refused." in added.text
    assert "Bearer" not in caplog.text


def test_readyz_names_the_failing_part_and_never_the_store_words(echoing_portal):
    app, _ = echoing_portal
    ready = app.test_client().get("/readyz")
    assert ready.status_code == 503
    assert ready.json["checks"]["petstore"] == "unavailable"
    assert "refused" not in ready.text.lower()


@pytest.mark.parametrize(
    "text",
    [
        f"you sent Authorization: Bearer {PRODUCTION_KEY}",
        f"authorization={PRODUCTION_KEY[:10]}",
        f'{{"headers": {{"authorization": "Bearer {PRODUCTION_KEY}"}}}}',
        f"bearer {PRODUCTION_KEY[::-1]}",
        f"token {PRODUCTION_KEY.upper()}",
        f"key={PRODUCTION_KEY}",
        "a JWT eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U here",
    ],
)
def test_cleaning_removes_keys_and_anything_shaped_like_a_credential(text):
    cleaned = clean(text, secrets=[PRODUCTION_KEY])
    assert PRODUCTION_KEY not in cleaned and PRODUCTION_KEY[::-1] not in cleaned
    assert PRODUCTION_KEY.upper() not in cleaned and PRODUCTION_KEY[:10] not in cleaned
    assert "eyJ" not in cleaned
    assert "[redacted]" in cleaned


def test_an_error_built_from_a_status_is_cleaned_and_keeps_status_and_code():
    body = f'{{"code": "unauthorized", "message": "bad key\\nAuthorization: Bearer {STAGING_KEY}"}}'.encode()
    error = PetStoreError.from_status(401, body, operation="listPets", method="GET", url="http://u:p@store/v1/pets",
                                      secrets=[STAGING_KEY])
    assert isinstance(error, Unauthorized)
    assert (error.status, error.code) == (401, "unauthorized")
    for text in (str(error), repr(error), error.message):
        assert STAGING_KEY not in text and "\n" not in text and "u:p@" not in text
    assert "bad key Authorization: [redacted]" in error.message


def test_an_api_code_that_is_not_a_plain_word_is_dropped():
    error = PetStoreError.from_status(400, b'{"code": "<script>x</script>", "message": "no"}', operation="createPet",
                                      method="POST", url="http://store/v1/pets")
    assert error.code is None
