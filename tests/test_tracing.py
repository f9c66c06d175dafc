"""Traces: a real OTLP/HTTP receiver gets the portal's spans, a real store sees the trace carried on, and without
the OpenTelemetry variables nothing of it is loaded or sent."""

import json
import secrets
import subprocess
import sys
import time

import pytest
import requests

from support.helpers import production_variables
from support.portal import PROJECT_ROOT
from support.servers import Receiver, running


@pytest.fixture
def receiver():
    with Receiver() as server:
        yield server


@pytest.mark.slow
def test_spans_reach_a_real_receiver_and_a_trusted_incoming_trace_goes_on_to_the_store(
    tmp_path, production_store, receiver
):
    env = production_variables(
        tmp_path,
        production_store.url,
        PETPORTAL_LOG_FORMAT="json",
        PETPORTAL_TRUST_TRACE_HEADERS="1",
        OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint,
        OTEL_SERVICE_NAME="portal-under-test",
        OTEL_BSP_SCHEDULE_DELAY="100",
    )
    trace_id, parent_id = secrets.token_hex(16), secrets.token_hex(8)
    output = tmp_path / "out.log"
    incoming = {
        "traceparent": f"00-{trace_id}-{parent_id}-01",
        "tracestate": "mesh=edge1",
        "baggage": "userId=admin,role=admin",
    }
    with running("flask serve", env, output) as (origin, _process):
        page = requests.get(f"{origin}/animals", headers=incoming, timeout=10)
        assert page.status_code == 200
        [server_span] = receiver.wait_for(lambda span: span["name"] == "GET /animals")
        [call_span] = receiver.wait_for(lambda span: span["name"] == "listPets")

    assert receiver.paths[0] == "/v1/traces"
    # The page's span continues the incoming trace, and the store call is its child.
    assert server_span["trace_id"] == trace_id and server_span["parent_id"] == parent_id
    assert server_span["service"] == "portal-under-test"
    assert server_span["attributes"]["petportal.environment"] == "production"
    assert server_span["attributes"]["http.route"] == "/animals"
    assert call_span["trace_id"] == trace_id and call_span["parent_id"] == server_span["span_id"]
    assert call_span["attributes"]["petportal.environment"] == "production"
    assert call_span["attributes"]["petstore.operation"] == "listPets"
    # The store got the call's own span as its parent, in the same trace.
    [listed] = [request for request in production_store.received if request.target.startswith("/v1/pets?")]
    assert listed.headers["traceparent"] == f"00-{trace_id}-{call_span['span_id']}-01"
    # With it goes the trace's own state, and never the baggage, trusted or not.
    assert listed.headers["tracestate"] == "mesh=edge1"
    assert "baggage" not in listed.headers
    # The access line carries the trace id.
    records = [json.loads(line) for line in output.read_text().splitlines()]
    [access] = [r for r in records if r.get("logger") == "petportal.access" and r["path"] == "/animals"]
    assert access["trace_id"] == trace_id and access["request_id"] == page.headers["X-Request-ID"]


@pytest.mark.slow
def test_an_untrusted_trace_is_not_continued_and_a_stop_sends_what_is_left(tmp_path, production_store, receiver):
    # Spans are batched for a minute: only the workers' stop can send them. Trace headers are not trusted (the
    # default): a client's traceparent, even one asking for no tracing (-00), and its baggage are ignored.
    env = production_variables(
        tmp_path, production_store.url, OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint, OTEL_BSP_SCHEDULE_DELAY="60000"
    )
    trace_id, parent_id = secrets.token_hex(16), secrets.token_hex(8)
    untrusted = {
        "traceparent": f"00-{trace_id}-{parent_id}-00",
        "tracestate": "attacker=1",
        "baggage": "userId=admin,role=admin",
    }
    code, state = secrets.token_hex(12), secrets.token_hex(12)
    with running("flask serve", env, tmp_path / "out.log") as (origin, process):
        page = requests.get(f"{origin}/animals?q=Rex&status=available", headers=untrusted, timeout=10)
        assert page.status_code == 200
        assert requests.get(f"{origin}/no/such%0Apage", timeout=10).status_code == 404
        requests.get(f"{origin}/login/sso/callback?code={code}&state={state}", timeout=10, allow_redirects=False)
        time.sleep(0.5)
        assert receiver.spans == []
        process.terminate()
        assert process.wait(30) == 0
    [server_span] = receiver.wait_for(lambda span: span["name"] == "GET /animals")
    assert server_span["parent_id"] == "" and server_span["service"] == "petportal"
    assert server_span["trace_id"] != trace_id
    [listed] = [request for request in production_store.received if request.target.startswith("/v1/pets?")]
    assert listed.headers["traceparent"].split("-")[1] == server_span["trace_id"]
    assert int(listed.headers["traceparent"].split("-")[3], 16) & 1, "sampled, whatever the client asked"
    assert "baggage" not in listed.headers and "tracestate" not in listed.headers
    # A span's URL keeps the names of the query's parameters, never their values: nor the callback's code and state.
    assert url_of(server_span) == f"{origin}/animals?q&status"
    [callback] = receiver.wait_for(lambda span: "/login/sso/" in url_of(span))
    assert url_of(callback) == f"{origin}/login/sso/callback?code&state"
    exported = b"".join(receiver.bodies)
    assert b"Rex" not in exported and code.encode() not in exported and state.encode() not in exported
    # A page with no route is named by its method alone, never by the path a client made up.
    assert receiver.wait_for(lambda span: span["name"] == "GET" and span["parent_id"] == "")
    assert not [span for span in receiver.spans if "such" in span["name"]]


def url_of(span):
    """A server span's URL: granian gives no request target, so OpenTelemetry records the whole URL."""
    return span["attributes"].get("http.url", "")


def test_without_the_variables_no_traceparent_is_sent(make_portal, production_store):
    client = make_portal().test_client()
    incoming = f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01"
    assert client.get("/animals", headers={"traceparent": incoming}).status_code == 200
    [listed] = [request for request in production_store.received if request.target.startswith("/v1/pets?")]
    assert "traceparent" not in listed.headers and "tracestate" not in listed.headers


def test_without_the_variables_nothing_of_opentelemetry_is_loaded(tmp_path, production_store):
    program = f"""
import sys
from petportal import create_app
app = create_app({{
    "TESTING": True, "SECRET_KEY": "x" * 32, "SQLALCHEMY_DATABASE_URI": "sqlite:///{tmp_path / "p.sqlite"}",
    "PETSTORE_ENVIRONMENTS": {{"production": {{"url": "{production_store.url}", "key": "{production_store.key}"}},
                               "staging": {{"url": None, "key": None}}}},
    "HTTPS": False, "CACHE_SECONDS": 0, "IMPORT_WATCH_SECONDS": 0,
}})
with app.app_context():
    from petportal.extensions import db
    db.create_all()
assert app.test_client().get("/animals").status_code == 200
print(sorted(name for name in sys.modules if name.startswith("opentelemetry")))
"""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-c", program],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize(
    ("variables", "expected"),
    [
        ({}, "petportal"),
        ({"OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=eu,service.name=portal%20eu"}, "portal eu"),
        ({"OTEL_RESOURCE_ATTRIBUTES": "service.name=from-attributes", "OTEL_SERVICE_NAME": "named"}, "named"),
    ],
)
def test_the_spans_service_is_the_operators_name_wherever_it_is_set(monkeypatch, variables, expected):
    from petportal.telemetry import tracing

    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES", raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    assert tracing.service_name() == expected
