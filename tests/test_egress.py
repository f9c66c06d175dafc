"""The key leaves through no channel: a hostile store speaking raw bytes puts it in every place of an HTTP answer,
and neither the portal's output (JSON logs, under `flask serve`), nor a span a real OTLP receiver gets, nor a page
or a CSV shows it, or any 8 characters of it in a row. And the egress guard itself, in one process: a record of any
logger, a span's attributes and events."""

import json
import logging
import re
import time
import traceback

import pytest
import requests

from petportal import egress
from petportal.secret_guard import SecretGuard
from petportal.telemetry import logs, tracing

from support.helpers import PASSWORDS, PRODUCTION_KEY, production_variables
from support.portal import csrf_token, logged_in, prepare_portal
from support.servers import Receiver, running

PETS = b'[{"id": 1, "name": "Rex", "categoryId": 1, "status": "available"}]'


def runs(secret, size=8):
    """Every `size` characters in a row of `secret`."""
    return {secret[i : i + size] for i in range(len(secret) - size + 1)}


def leaks(text, secret=PRODUCTION_KEY):
    """The runs of `secret` that `text` shows."""
    return sorted(run for run in runs(secret) if run in text)


def http(status_line, headers, body=b""):
    return status_line + b"\r\n" + b"".join(header + b"\r\n" for header in headers) + b"\r\n" + body


def length(body):
    return b"Content-Length: %d" % len(body)


JSON = b"Content-Type: application/json"
CLOSE = b"Connection: close"
KEY = PRODUCTION_KEY.encode()
# The key in each place of an answer, as a hostile store (or a gateway in front of it) could send it.
HOSTILE_ANSWERS = {
    "status line": http(b"Bearer " + KEY, [JSON, length(PETS), CLOSE], PETS),
    "status code": http(b"HTTP/1.1 " + KEY + b" OK", [JSON, length(PETS), CLOSE], PETS),
    "reason phrase": http(b"HTTP/1.1 502 Bearer " + KEY, [JSON, length(b"[]"), CLOSE], b"[]"),
    "header line without a colon": http(b"HTTP/1.1 200 OK", [JSON, b"Bearer " + KEY, length(PETS), CLOSE], PETS),
    "Retry-After": http(b"HTTP/1.1 503 Unavailable", [JSON, b"Retry-After: " + KEY, length(b"[]"), CLOSE], b"[]"),
    "Content-Length": http(b"HTTP/1.1 200 OK", [JSON, b"Content-Length: " + KEY, CLOSE], PETS),
    "Content-Encoding": http(b"HTTP/1.1 200 OK", [JSON, b"Content-Encoding: " + KEY, length(PETS), CLOSE], PETS),
    "Location": http(b"HTTP/1.1 302 Found", [b"Location: http://127.0.0.1:9/v1/" + KEY, length(b""), CLOSE]),
    "chunk-size line": http(
        b"HTTP/1.1 200 OK", [JSON, b"Transfer-Encoding: chunked", CLOSE], KEY + b"\r\n" + PETS + b"\r\n0\r\n\r\n"
    ),
    "gzip body that is not gzip": http(
        b"HTTP/1.1 200 OK", [JSON, b"Content-Encoding: gzip", length(b"Bearer " + KEY), CLOSE], b"Bearer " + KEY
    ),
    "JSON number": http(
        b"HTTP/1.1 200 OK", [JSON, length(b'[{"id": ' + KEY + b"}]"), CLOSE], b'[{"id": ' + KEY + b"}]"
    ),
    "JSON number as text": http(
        b"HTTP/1.1 200 OK",
        [JSON, length(b'[{"id": "' + KEY + b'", "name": "Rex", "categoryId": 1}]'), CLOSE],
        b'[{"id": "' + KEY + b'", "name": "Rex", "categoryId": 1}]',
    ),
    "no status line (HTTP/0.9)": b"Bearer " + KEY + b"\r\n",
}


def sending(data):
    def send(conn):
        conn.sendall(data)

    return send


@pytest.mark.slow
def test_a_hostile_store_never_gets_the_key_into_the_output_a_span_a_page_or_a_csv(tmp_path, fault_server):
    env = production_variables(
        tmp_path,
        fault_server.base_url,
        PETPORTAL_LOG_FORMAT="json",
        PETPORTAL_REQUIRE_ADMIN_MFA="0",
        PETPORTAL_UPSTREAM_TIMEOUT="2",
        OTEL_BSP_SCHEDULE_DELAY="200",
    )
    prepare_portal(env, [("staff", "staff", PASSWORDS["staff"]), ("admin", "admin", PASSWORDS["admin"])])
    output = tmp_path / "out.log"
    shown = {}
    with Receiver() as receiver:
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver.endpoint
        with running("flask serve", env, output) as (origin, process):
            anonymous = requests.Session()
            staff = logged_in(origin, "staff", PASSWORDS["staff"])
            admin = logged_in(origin, "admin", PASSWORDS["admin"])
            for mode, answer in HOSTILE_ANSWERS.items():
                fault_server.script(sending(answer))
                pages = [
                    anonymous.get(f"{origin}/animals", timeout=15),
                    anonymous.get(f"{origin}/animals.csv", timeout=15),
                    anonymous.get(f"{origin}/animals/1", timeout=15),
                    anonymous.get(f"{origin}/readyz", timeout=15),
                    staff.get(f"{origin}/animals/new", timeout=15),
                    admin.get(f"{origin}/admin/status", timeout=15),
                ]
                form = pages[4].text
                fields = {"name": "Biscuit", "category_id": "1", "status": "", "csrf_token": csrf_token(form)}
                fields["submission_token"] = re.search(r'name="submission_token" [^>]*value="([^"]+)"', form)[1]
                pages.append(staff.post(f"{origin}/animals/new", data=fields, timeout=15))
                for page in pages:
                    assert page.status_code != 500, (mode, page.url)
                    shown[(mode, page.request.method, page.url)] = page.text
            process.terminate()
            assert process.wait(40) == 0
        exported = b"".join(receiver.bodies).decode("utf-8", "replace")
        spans = receiver.spans

    assert {request.target for request in fault_server.received} >= {"/v1/pets?limit=20", "/v1/pets/1", "/v1/pets"}
    for where, text in shown.items():
        assert not leaks(text), where
    log = output.read_text()
    assert not leaks(log)
    assert not leaks(exported)
    assert not leaks(json.dumps(spans))
    # Each channel was tried, and its guard did withhold: urllib3's warning about the header line without a
    # colon, and the exceptions the store calls' spans recorded.
    records = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    assert not [r for r in records if egress.CHECKED in r], "the guard's own mark is no field of a line"
    assert [r for r in records if r["logger"].startswith("urllib3") and r["message"] == egress.WITHHELD_LINE]
    events = [attributes for span in spans for name, attributes in span["events"] if name == "exception"]
    assert any(attributes.get("exception.stacktrace") == egress.WITHHELD_VALUE for attributes in events)
    assert any("Traceback" in attributes.get("exception.stacktrace", "") for attributes in events), "not all withheld"


@pytest.fixture
def guarded():
    """This process's egress guard, against the production key (as an app built with it would set it)."""
    egress.protect(SecretGuard((PRODUCTION_KEY,)))
    yield
    egress.protect(None)


def test_a_line_of_any_logger_quoting_the_key_is_withheld_whole_with_its_traceback(guarded, caplog):
    egress.guard_every_record()
    logger = logging.getLogger("some.library.nobody.configured")
    try:
        try:
            raise ValueError(f"unparsed data: 'Bearer {PRODUCTION_KEY}\\r\\n'")
        except ValueError as cause:
            raise RuntimeError("the store's answer could not be read") from cause
    except RuntimeError:
        with caplog.at_level(logging.INFO):
            logger.exception("a call failed")
            logger.warning("Failed to parse headers: %r", PRODUCTION_KEY.encode().hex().upper())
            logger.info("an ordinary line, about %s", "Rex")
    withheld, hexed, ordinary = caplog.records
    assert withheld.getMessage() == egress.WITHHELD_LINE and withheld.exc_info is None
    assert hexed.getMessage() == egress.WITHHELD_LINE
    assert ordinary.getMessage() == "an ordinary line, about Rex"
    assert not leaks(caplog.text)


def test_a_record_made_without_the_factory_or_with_extra_fields_is_withheld_by_the_handlers_filter(guarded):
    # An access line's record is a copy; "extra" fields are set after the factory has made the record.
    copied = logging.makeLogRecord({"msg": "GET %r", "args": (f"/x/{PRODUCTION_KEY}",), "levelno": logging.INFO})
    extra = logging.makeLogRecord({"msg": "a call failed", "detail": f"key={PRODUCTION_KEY[9:27]}", "status": 502})
    for record in (copied, extra):
        assert egress.EgressFilter().filter(record)
        assert record.getMessage() == egress.WITHHELD_LINE
    assert extra.detail == egress.WITHHELD_VALUE and extra.status == 502


def test_an_access_line_whose_path_quotes_the_key_is_withheld_and_keeps_its_status_and_ids(guarded, caplog):
    quoting = logs.AccessEvent(time.time(), "GET", f"/animals/{PRODUCTION_KEY}", 404, 1.5, "a1" * 16, "-")
    plain = logs.AccessEvent(time.time(), "GET", "/animals/1", 200, 1.5, "b2" * 16, "-")
    with caplog.at_level(logging.INFO, logs.ACCESS_LOGGER):
        logs.ACCESS_LINES._log(quoting)
        logs.ACCESS_LINES._log(plain)
    withheld, shown = caplog.records
    assert (withheld.path, withheld.status, withheld.request_id) == (egress.WITHHELD_VALUE, 404, "a1" * 16)
    assert shown.getMessage() == "GET '/animals/1' 200 1.50 ms"
    assert not leaks(caplog.text)


def test_a_span_quoting_the_key_is_withheld_attribute_by_attribute_and_urls_lose_their_query_values(guarded):
    from opentelemetry.sdk.trace import Event, ReadableSpan
    from opentelemetry.trace import Status, StatusCode

    try:
        raise ValueError(f"Invalid chunk length: {PRODUCTION_KEY}")
    except ValueError as error:
        stack = "".join(traceback.format_exception(error))
    span = ReadableSpan(
        "listPets",
        attributes={
            "petstore.operation": "listPets",
            "http.url": "http://portal/login/sso/callback?code=c0de&state=5t",
        },
        events=[Event("exception", {"exception.stacktrace": stack, "exception.type": "ValueError"})],
        status=Status(StatusCode.ERROR, f"ValueError: {PRODUCTION_KEY}"),
    )
    guarded_span = tracing.guarded_span(span)
    assert guarded_span.attributes == {
        "petstore.operation": "listPets",
        "http.url": "http://portal/login/sso/callback?code&state",
    }
    [event] = guarded_span.events
    assert event.attributes == {"exception.stacktrace": egress.WITHHELD_VALUE, "exception.type": "ValueError"}
    assert guarded_span.status.description == egress.WITHHELD_VALUE
    # A span with nothing to change is sent as it is.
    plain = ReadableSpan("getPet", attributes={"http.url": "http://portal/animals/1"})
    assert tracing.guarded_span(plain) is plain
