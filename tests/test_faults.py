"""The fault matrix: every way an upstream can misbehave, against each of the three operations.

Every case must end on the portal's own friendly page, within the timeout budget, never a hang.
"""

import re
import time

import pytest

from support.helpers import PRODUCTION_KEY, STAGING_KEY, AuthActions, submission_token
from support.portal import csrf_token
from support.scanning import FIGURES
from support.servers import FaultServer, answer, delay, drip, huge, lying_length, reset_mid_body

TIMEOUT = 0.5
# Retries (two, with Retry-After capped at 2 s), three timeouts per attempt, and margin for a busy machine.
BUDGET_SECONDS = 2 * 2 + 3 * 3 * TIMEOUT + 5
SECRET_BODY = "UPSTREAM-INTERNALS-7f3a"
PET = {"id": 7, "name": "Rex", "categoryId": 1}
VALID = {"list": [PET], "get": PET, "create": PET}
WRONG_SHAPE = {"list": PET, "get": [PET], "create": [PET]}
NULL_NAME = {"list": [{**PET, "name": None}], "get": {**PET, "name": None}, "create": {**PET, "name": None}}
ERROR = {"code": "fault", "message": SECRET_BODY, "status": 0}

FAULTS = {
    "latency past the timeout": lambda op, foreign: delay(
        TIMEOUT * 4, answer(200 if op != "create" else 201, VALID[op])
    ),
    "connection refused": None,
    "reset mid-response": lambda op, foreign: reset_mid_body,
    "slow drip of bytes": lambda op, foreign: drip(0.05, total=2000),
    "500 with an HTML body": lambda op, foreign: answer(
        500, f"<h1>{SECRET_BODY}</h1>".encode(), content_type="text/html"
    ),
    "502": lambda op, foreign: answer(502, {**ERROR, "status": 502}),
    "503 with Retry-After": lambda op, foreign: answer(503, {**ERROR, "status": 503}, {"Retry-After": "1"}),
    "429": lambda op, foreign: answer(429, {**ERROR, "status": 429}, {"Retry-After": "1"}),
    "401": lambda op, foreign: answer(401, {**ERROR, "status": 401}),
    "404": lambda op, foreign: answer(404, {**ERROR, "status": 404}),
    "malformed JSON": lambda op, foreign: answer(200, b'[{"id": 7, "name": '),
    "the wrong shape": lambda op, foreign: answer(200, WRONG_SHAPE[op]),
    "a null name": lambda op, foreign: answer(200, NULL_NAME[op]),
    "a 60 MB body": lambda op, foreign: huge(60 * 1024 * 1024),
    "a lying Content-Length": lambda op, foreign: lying_length(5000, b'[{"id": 7}]'),
    "a redirect to a foreign host": lambda op, foreign: answer(302, b"", {"Location": f"{foreign}/pets"}),
}
# Faults where no usable answer arrived at all: the store "is not answering" (503).
NO_ANSWER = {
    "latency past the timeout",
    "connection refused",
    "reset mid-response",
    "slow drip of bytes",
    "a lying Content-Length",
    "500 with an HTML body",
    "502",
    "503 with Retry-After",
    "429",
}
# For createPet, only a call that never reached the store proves nothing was added (503, the form again);
# a rejected key adds nothing either (502, temporarily unavailable); every other fault, 503 and 429
# included, may come after the store added it (502, outcome unknown).
NOTHING_ADDED = {"connection refused"}


def expected_page(kind, op):
    """The status and a phrase of the page the user must see."""
    if op == "create":
        if kind in NOTHING_ADDED:
            return 503, "nothing was added"
        if kind == "401":
            return 502, "temporarily unavailable"
        return 502, "cannot tell whether Rex was added"
    if kind == "404" and op == "get":
        return 404, "No animal has this id"
    if kind in NO_ANSWER:
        return 503, "The pet store is not answering"
    if kind == "401":
        return 502, "temporarily unavailable"
    return 502, "Temporarily unavailable"


@pytest.mark.parametrize("op", ["list", "get", "create"])
@pytest.mark.parametrize("kind", list(FAULTS))
def test_every_fault_ends_on_a_friendly_page_in_time(make_portal, kind, op):
    with FaultServer() as store, FaultServer(host="127.0.0.2") as foreign:
        if FAULTS[kind] is None:
            with FaultServer() as closed:
                url = closed.base_url
        else:
            url = store.base_url
        app = make_portal.over(url, None, UPSTREAM_TIMEOUT=TIMEOUT)
        client = app.test_client()
        if op == "create":
            AuthActions(client).login("staff")
            form = client.get("/animals/new").text
        if FAULTS[kind] is not None:
            store.script(FAULTS[kind](op, foreign.base_url))
        started = time.monotonic()
        if op == "list":
            page = client.get("/animals")
        elif op == "get":
            page = client.get("/animals/7")
        else:
            page = client.post(
                "/animals/new",
                data={
                    "csrf_token": csrf_token(form),
                    "submission_token": submission_token(form),
                    "name": "Rex",
                    "category_id": "1",
                    # Confirmed as a copy: the fault meets createPet, with no listPets looking for copies first.
                    "confirm_duplicate": "1",
                },
            )
        elapsed = time.monotonic() - started
        FIGURES["faults_injected"] += 1
        assert foreign.received == []
    status, phrase = expected_page(kind, op)
    assert page.status_code == status
    assert phrase in page.text
    assert elapsed < BUDGET_SECONDS
    assert SECRET_BODY not in page.text and "Traceback" not in page.text
    assert re.search(r"Request id: <code>[0-9a-f]{32}</code>|Request id: [0-9a-f]{32}", page.text)
    if op == "create":
        assert len(store.received) <= 1, "a createPet was sent more than once"


# --- one deadline per page, one bulkhead per environment -----------------------------------------------------------


def test_a_page_has_one_deadline_for_all_its_upstream_calls_and_retries(make_portal, fault_server):
    """A store answering 503 with Retry-After just before the timeout holds a page for the timeout, not 3 times it."""
    environments = {
        "production": {"url": fault_server.base_url, "key": PRODUCTION_KEY},
        "staging": {"url": None, "key": None},
    }
    app = make_portal(PETSTORE_ENVIRONMENTS=environments, UPSTREAM_TIMEOUT=1.0)
    fault_server.script(delay(0.8, answer(503, {}, {"Retry-After": "2"})))
    started = time.monotonic()
    page = app.test_client().get("/animals/7")
    assert page.status_code == 503
    assert time.monotonic() - started < 2.2  # a deadline per attempt would take 0.8 + 2 + 0.8 s
    assert len(fault_server.received) == 1


def test_the_status_page_has_one_deadline_for_all_its_probes(make_portal, fault_server):
    environments = {
        "production": {"url": fault_server.base_url, "key": PRODUCTION_KEY},
        "staging": {"url": fault_server.base_url, "key": STAGING_KEY},
    }
    app = make_portal(PETSTORE_ENVIRONMENTS=environments, UPSTREAM_TIMEOUT=1.0)
    admin = app.test_client()
    AuthActions(admin).login("admin")
    assert admin.get("/admin/status").status_code == 200  # templates compiled, connections made
    # Each of a probe's three calls alone fits in the timeout; one after another, they take 2.7 s.
    fault_server.script(delay(0.9, answer(200, [{"id": 1, "name": "Rex", "categoryId": 1}])))
    started = time.monotonic()
    assert admin.get("/admin/status").status_code == 200
    assert time.monotonic() - started < 2.0


def test_calls_beyond_the_bulkhead_get_a_fast_503_with_retry_after(make_portal):
    app = make_portal(UPSTREAM_CONCURRENCY=1)
    gate = app.extensions["petportal.petstore.environments"]._gates["production"]
    gate.enter(time.monotonic() + 5)  # one page has been waiting on a hanging store for a while
    time.sleep(0.6)
    try:
        page = app.test_client().get("/animals")
    finally:
        gate.leave()
    assert page.status_code == 503
    assert page.headers["Retry-After"] == "2"
    assert "slow to answer" in page.text


def test_a_hanging_environment_uses_up_only_its_own_bulkhead(make_portal, auth_for):
    """An admin previewing a hanging staging store leaves production's customers served."""
    app = make_portal(UPSTREAM_CONCURRENCY=1)
    staging = app.extensions["petportal.petstore.environments"]._gates["staging"]
    staging.enter(time.monotonic() + 5)  # an admin's preview page has been waiting on staging a while
    time.sleep(0.6)
    try:
        customer = app.test_client().get("/animals")
        admin = auth_for(app, "admin")
        page = admin.get("/admin/environment").text
        admin.post("/admin/environment/preview", data={"environment": "staging", "csrf_token": csrf_token(page)})
        previewing = admin.get("/animals")
    finally:
        staging.leave()
    assert customer.status_code == 200
    assert previewing.status_code == 503 and "slow to answer" in previewing.text


def test_an_answer_nested_too_deep_to_decode_is_a_502(make_portal, fault_server):
    environments = {
        "production": {"url": fault_server.base_url, "key": PRODUCTION_KEY},
        "staging": {"url": None, "key": None},
    }
    app = make_portal(PETSTORE_ENVIRONMENTS=environments)
    fault_server.script(answer(200, b"[" * 200_000 + b"]" * 200_000))
    assert app.test_client().get("/animals").status_code == 502
