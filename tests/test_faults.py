"""The fault matrix: every way an upstream can misbehave, against each of the three operations.

Every case must end on the portal's own friendly page, within the timeout budget, never a hang.
"""

import re
import time

import pytest

from support.helpers import AuthActions, submission_token
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
