"""The pet store client, against the real reference store and against a scripted faulty upstream."""

import json
import logging
import threading
import time

import pytest

from petportal.petstore import (
    Busy,
    InvalidRequest,
    NotFound,
    OutcomeUnknown,
    Pet,
    PetStoreClient,
    StoreReason,
    Unauthorized,
    Unavailable,
    UnexpectedResponse,
)
from petportal.petstore.bulkhead import Bulkhead
from petportal.petstore.environments import Health

from support.helpers import STORE_KEY
from support.servers import (
    FaultServer,
    answer,
    delay,
    drip,
    huge,
    lying_length,
    reset,
    reset_mid_body,
)

REX = {"id": 1, "name": "Rex", "categoryId": 2, "status": "available"}


@pytest.fixture
def store_client(store_url):
    """A client of the real reference store (not conftest's `client`, the portal's Flask test client)."""
    client = PetStoreClient(store_url, STORE_KEY, timeout=5)
    yield client
    client.close()


@pytest.fixture
def faulty(fault_server):
    """A client of the fault server with a short timeout."""
    client = PetStoreClient(fault_server.base_url, "fault-key", timeout=0.5)
    yield client
    client.close()


@pytest.fixture
def patient(fault_server):
    """A client of the fault server with time for all three attempts and the 0.2 s wait before the third,
    however loaded the machine running the tests."""
    client = PetStoreClient(fault_server.base_url, "fault-key", timeout=5)
    yield client
    client.close()


# --- against the real reference store -------------------------------------------------------------


def test_create_then_get_and_list_return_typed_records(store_client):
    created = store_client.create_pet("Rex", 3, "pending")
    assert isinstance(created, Pet) and created.id > 0
    assert created == Pet(id=created.id, name="Rex", category_id=3, status="pending")
    assert store_client.get_pet(created.id) == created
    assert store_client.list_pets(limit=10) == [created]


def test_status_filter_and_limit_reach_the_store(store_client):
    for status in ("available", "sold", "sold", None):
        store_client.create_pet("Pet", 1, status)
    assert [pet.status for pet in store_client.list_pets(status="sold")] == ["sold", "sold"]
    assert len(store_client.list_pets(limit=3)) == 3
    assert store_client.list_pets()[-1].status is None


def test_int64_values_beyond_2_to_the_53_survive_intact(store_client):
    created = store_client.create_pet("Big", 2**63 - 1)
    assert created.category_id == 2**63 - 1
    assert store_client.get_pet(created.id).category_id == 2**63 - 1


def test_store_400_becomes_invalid_request_with_the_apis_code_and_message(store_client):
    with pytest.raises(InvalidRequest) as raised:
        store_client.create_pet("nul\u0000name", 1)
    assert raised.value.status == 400
    assert raised.value.code == "invalid_body"
    assert "NUL" in raised.value.message


def test_wrong_key_becomes_unauthorized_on_every_operation(store_url):
    client = PetStoreClient(store_url, "not-the-key")
    for call in (client.list_pets, lambda: client.create_pet("Rex", 1), lambda: client.get_pet(1)):
        with pytest.raises(Unauthorized):
            call()
    client.close()


def test_unknown_id_becomes_not_found(store_client):
    with pytest.raises(NotFound):
        store_client.get_pet(123456)


def test_every_answer_reaches_the_health_record_with_its_notices_and_key_verdict(store_url):
    health = Health()
    client = PetStoreClient(store_url, STORE_KEY, on_answer=health.record)
    created = client.create_pet("Rex", 1)
    assert "getPet" not in health.notices and not health.key_rejected
    client.get_pet(created.id)
    notice = health.notices["getPet"]
    assert notice.sunset == "Thu, 05 Dec 2030 00:00:00 GMT"
    assert notice.deprecation
    assert "listPets" not in health.notices
    rejected = Health()
    with pytest.raises(Unauthorized):
        PetStoreClient(store_url, "not-the-key", on_answer=rejected.record).list_pets()
    assert rejected.key_rejected
    client.close()


# --- what is sent ---------------------------------------------------------------------------------


def test_every_call_sends_the_bearer_key_and_the_extra_headers(fault_server):
    fault_server.script(answer(200, []), answer(201, REX), answer(200, REX))
    client = PetStoreClient(fault_server.base_url, "the-key", extra_headers=lambda: {"X-Request-ID": "req-1"})
    client.list_pets(limit=5, status="sold")
    client.create_pet("Rex", 2)
    client.get_pet(1)
    client.close()
    assert [(r.method, r.target) for r in fault_server.received] == [
        ("GET", "/v1/pets?limit=5&status=sold"),
        ("POST", "/v1/pets"),
        ("GET", "/v1/pets/1"),
    ]
    assert {r.headers["authorization"] for r in fault_server.received} == {"Bearer the-key"}
    assert {r.headers["x-request-id"] for r in fault_server.received} == {"req-1"}
    assert json.loads(fault_server.received[1].body) == {"name": "Rex", "categoryId": 2}
    assert fault_server.received[1].headers["content-type"] == "application/json"


@pytest.mark.parametrize(
    "call",
    [
        lambda c: c.list_pets(limit=0),
        lambda c: c.list_pets(limit=101),
        lambda c: c.list_pets(limit="20"),
        lambda c: c.list_pets(limit=True),
        lambda c: c.list_pets(status="foo"),
        lambda c: c.list_pets(status=""),
        lambda c: c.create_pet("  ", 1),
        lambda c: c.create_pet("Rex", 2**63),
        lambda c: c.create_pet("Rex", 1, "lost"),
        lambda c: c.get_pet("1"),
    ],
)
def test_invalid_arguments_never_leave_the_process(faulty, fault_server, call):
    with pytest.raises(ValueError):
        call(faulty)
    assert fault_server.received == []


# --- faults the reference store never makes -------------------------------------------------------


def test_slow_answer_times_out_as_unavailable_without_a_retry(faulty, fault_server):
    fault_server.script(delay(3, answer(200, [])))
    with pytest.raises(Unavailable) as raised:
        faulty.list_pets()
    assert not isinstance(raised.value, OutcomeUnknown)
    assert fault_server.methods() == ["GET"]


def test_slow_answer_to_a_post_is_an_unknown_outcome(faulty, fault_server):
    fault_server.script(delay(3, answer(201, REX)))
    with pytest.raises(OutcomeUnknown):
        faulty.create_pet("Rex", 2)
    assert fault_server.methods() == ["POST"]


@pytest.mark.parametrize("behaviour", [reset, reset_mid_body])
def test_connection_reset_is_unavailable(faulty, fault_server, behaviour):
    fault_server.script(behaviour)
    with pytest.raises(Unavailable):
        faulty.list_pets()


def test_503_twice_then_200_takes_exactly_three_gets(patient, fault_server):
    fault_server.script(answer(503, {}), answer(503, {}), answer(200, [REX]))
    assert patient.list_pets() == [Pet(1, "Rex", 2, "available")]
    assert fault_server.methods() == ["GET", "GET", "GET"]


def test_503_every_time_takes_exactly_three_gets_then_unavailable(patient, fault_server):
    fault_server.script(answer(503, {"code": "down", "message": "maintenance", "status": 503}))
    with pytest.raises(Unavailable) as raised:
        patient.get_pet(1)
    assert raised.value.status == 503
    assert fault_server.methods() == ["GET", "GET", "GET"]


def test_503_on_post_is_an_unknown_outcome_sent_exactly_once(faulty, fault_server):
    """A gateway may answer 503 after the store added the animal: only 201, 400 and 401 are certain."""
    fault_server.script(answer(503, {}))
    with pytest.raises(OutcomeUnknown):
        faulty.create_pet("Rex", 2)
    assert fault_server.methods() == ["POST"]


def test_500_on_post_is_an_unknown_outcome_sent_once(faulty, fault_server):
    fault_server.script(answer(500, b"<html>boom</html>", content_type="text/html"))
    with pytest.raises(OutcomeUnknown) as raised:
        faulty.create_pet("Rex", 2)
    assert "boom" not in str(raised.value)
    assert fault_server.methods() == ["POST"]


def test_refused_connection_is_unavailable():
    with FaultServer() as closed:
        url = closed.base_url
    client = PetStoreClient(url, "key", timeout=0.5)
    with pytest.raises(Unavailable) as raised:
        client.create_pet("Rex", 1)
    assert not isinstance(raised.value, OutcomeUnknown)
    client.close()


def test_retry_after_is_honoured_but_capped_at_two_seconds(fault_server):
    client = PetStoreClient(fault_server.base_url, "fault-key", timeout=4)
    fault_server.script(answer(503, {}, {"Retry-After": "1"}), answer(200, []))
    started = time.monotonic()
    assert client.list_pets() == []
    assert time.monotonic() - started >= 1
    fault_server.script(answer(503, {}, {"Retry-After": "3600"}), answer(200, []))
    started = time.monotonic()
    assert client.list_pets() == []
    assert 2 <= time.monotonic() - started < 3
    client.close()


def test_a_retry_that_would_not_fit_in_the_deadline_is_not_waited_for(faulty, fault_server):
    fault_server.script(answer(503, {}, {"Retry-After": "1"}), answer(200, []))
    started = time.monotonic()
    with pytest.raises(Unavailable):
        faulty.list_pets()
    assert time.monotonic() - started < 0.5
    assert fault_server.methods() == ["GET"]


def test_one_deadline_covers_every_attempt_and_the_waits_between_them(fault_server):
    """A store that answers 503 just before the timeout, with Retry-After, holds a call for one timeout, not three."""
    client = PetStoreClient(fault_server.base_url, "fault-key", timeout=1.0)
    fault_server.script(delay(0.8, answer(503, {}, {"Retry-After": "2"})))
    started = time.monotonic()
    with pytest.raises(Unavailable):
        client.list_pets()
    assert time.monotonic() - started < 2.0  # a deadline per attempt would take 0.8 + 2 + 0.8 s
    fault_server.script(delay(0.3, answer(503, {})))
    started = time.monotonic()
    deadline = started + 1.0
    shared = PetStoreClient(fault_server.base_url, "fault-key", timeout=1.0, deadline=lambda: deadline)
    with pytest.raises(Unavailable):
        shared.list_pets()
    with pytest.raises(Unavailable):
        shared.list_pets()  # a second call of the same page gets only what the first left
    assert time.monotonic() - started < 1.5  # a deadline per call would take 2 s
    client.close()
    shared.close()


def test_calls_beyond_the_bulkhead_are_refused_at_once_while_the_store_is_slow(fault_server):
    gate = Bulkhead(1, patience=0.3)
    client = PetStoreClient(fault_server.base_url, "fault-key", timeout=2, gate=gate)
    assert gate.enter(time.monotonic() + 1)  # another thread's call, under way for a while already
    time.sleep(0.35)
    started = time.monotonic()
    with pytest.raises(Busy):
        client.list_pets()
    assert time.monotonic() - started < 0.25  # waiting would take the bulkhead's patience, 0.3 s
    assert fault_server.received == []
    gate.leave()
    assert client.list_pets() == []
    client.close()


def test_while_the_store_is_quick_a_call_waits_for_a_place_instead_of_failing(fault_server):
    gate = Bulkhead(1, patience=0.3)
    client = PetStoreClient(fault_server.base_url, "fault-key", timeout=2, gate=gate)
    assert gate.enter(time.monotonic() + 1)  # a call that has only just started
    threading.Timer(0.05, gate.leave).start()
    assert client.list_pets() == []
    client.close()


@pytest.mark.parametrize("body", [b"[{", b"not json", b"\xff\xfe", b""])
def test_malformed_json_is_an_unexpected_response(faulty, fault_server, body):
    fault_server.script(answer(200, body))
    with pytest.raises(UnexpectedResponse):
        faulty.list_pets()


@pytest.mark.parametrize("declare_length", [True, False])
def test_a_50_mb_body_is_refused_without_being_read_whole(faulty, fault_server, declare_length):
    fault_server.script(huge(50 * 1024 * 1024, declare_length))
    with pytest.raises(UnexpectedResponse) as raised:
        faulty.list_pets()
    assert raised.value.reason is StoreReason.TOO_LARGE


def test_a_body_that_drips_past_the_timeout_is_given_up(faulty, fault_server):
    fault_server.script(drip(0.05, total=200))
    started = time.monotonic()
    with pytest.raises(Unavailable):
        faulty.list_pets()
    assert time.monotonic() - started < 5


def test_a_content_length_that_lies_is_not_trusted(faulty, fault_server):
    fault_server.script(lying_length(500, b"[]"))
    with pytest.raises(Unavailable):
        faulty.list_pets()


@pytest.mark.parametrize(
    "records",
    [
        {"id": 1},
        [{"name": "Rex", "categoryId": 1}],
        [{"id": 1, "categoryId": 1}],
        [{"id": 1, "name": "Rex"}],
        [{"id": "1", "name": "Rex", "categoryId": 1}],
        [{"id": True, "name": "Rex", "categoryId": 1}],
        [{"id": 1.5, "name": "Rex", "categoryId": 1}],
        [{"id": 1, "name": None, "categoryId": 1}],
        [{"id": 1, "name": ["Rex"], "categoryId": 1}],
        [{"id": 1, "name": "Rex", "categoryId": 2**64}],
        [{"id": 1, "name": "Rex", "categoryId": 1, "status": "lost"}],
        ["Rex"],
        [None],
    ],
)
def test_the_wrong_shape_is_an_unexpected_response(faulty, fault_server, records):
    fault_server.script(answer(200, records))
    with pytest.raises(UnexpectedResponse):
        faulty.list_pets()


def test_records_read_past_2_to_the_53_and_without_status(faulty, fault_server):
    fault_server.script(
        answer(200, b'[{"id": 9007199254740993, "name": "Big", "categoryId": 9223372036854775807, "extra": 1}]')
    )
    assert faulty.list_pets() == [Pet(id=2**53 + 1, name="Big", category_id=2**63 - 1, status=None)]


def test_404_on_list_is_an_unexpected_response_not_a_missing_animal(faulty, fault_server):
    fault_server.script(answer(404, {"code": "x", "message": "y", "status": 404}))
    with pytest.raises(UnexpectedResponse):
        faulty.list_pets()


def test_a_redirect_to_another_host_is_never_followed(fault_server):
    with FaultServer(host="127.0.0.2") as foreign:
        fault_server.script(answer(302, b"", {"Location": f"{foreign.base_url}/pets"}))
        client = PetStoreClient(fault_server.base_url, "secret-key", timeout=0.5)
        with pytest.raises(UnexpectedResponse):
            client.list_pets()
        with pytest.raises(OutcomeUnknown):  # a change answered with anything but 201, 400 or 401
            client.create_pet("Rex", 1)
        client.close()
        assert foreign.received == []
    assert fault_server.methods() == ["GET", "POST"]


def test_the_key_never_appears_in_errors_or_logs(fault_server, caplog):
    key = "sk-very-secret-key-4711"
    caplog.set_level(logging.DEBUG)
    fault_server.script(answer(401, {"code": "unauthorized", "message": "bad key", "status": 401}))
    client = PetStoreClient(fault_server.base_url, key, timeout=0.5)
    errors = []
    for call in (client.list_pets, lambda: client.create_pet("Rex", 1), lambda: client.get_pet(1)):
        with pytest.raises(Unauthorized) as raised:
            call()
        errors.append(raised.value)
    client.close()
    text = " ".join([caplog.text, repr(client)] + [f"{e!r} {e} {e.args}" for e in errors])
    assert key not in text
    assert fault_server.received[0].headers["authorization"] == f"Bearer {key}"


def test_410_on_get_pet_is_gone(faulty, fault_server):
    from petportal.petstore import Gone

    fault_server.script(answer(410, {"code": "gone", "message": "getPet was removed", "status": 410}))
    with pytest.raises(Gone) as raised:
        faulty.get_pet(1)
    assert raised.value.status == 410
