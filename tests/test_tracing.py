"""Traces: a real OTLP/HTTP receiver gets the portal's spans, a real store sees the trace carried on, and without
the OpenTelemetry variables nothing of it is loaded or sent."""

import json
import secrets
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from bench.portal import PROJECT_ROOT

from helpers import production_variables
from servers import running


class Receiver(ThreadingHTTPServer):
    """An OTLP/HTTP trace receiver: keeps every span posted to /v1/traces, decoded."""

    def __init__(self):
        super().__init__(("127.0.0.1", 0), ReceiverHandler)
        self.spans = []
        self.paths = []

    @property
    def endpoint(self):
        return f"http://127.0.0.1:{self.server_address[1]}"

    def wait_for(self, predicate, seconds=15):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            found = [span for span in list(self.spans) if predicate(span)]
            if found:
                return found
            time.sleep(0.1)
        names = [span["name"] for span in self.spans]
        pytest.fail(f"no such span arrived; received: {names}")


class ReceiverHandler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.paths.append(self.path)
        export = ExportTraceServiceRequest()
        export.ParseFromString(body)
        for resource_spans in export.resource_spans:
            service = {a.key: a.value.string_value for a in resource_spans.resource.attributes}.get("service.name")
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    self.server.spans.append(
                        {
                            "service": service,
                            "name": span.name,
                            "trace_id": span.trace_id.hex(),
                            "span_id": span.span_id.hex(),
                            "parent_id": span.parent_span_id.hex(),
                            "attributes": {a.key: _value(a.value) for a in span.attributes},
                        }
                    )
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def _value(value):
    return getattr(value, value.WhichOneof("value")) if value.WhichOneof("value") else None


@pytest.fixture
def receiver():
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.mark.slow
def test_spans_reach_a_real_receiver_and_the_incoming_trace_goes_on_to_the_store(tmp_path, production_store, receiver):
    env = production_variables(
        tmp_path,
        production_store.url,
        PETPORTAL_LOG_FORMAT="json",
        OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint,
        OTEL_SERVICE_NAME="portal-under-test",
        OTEL_BSP_SCHEDULE_DELAY="100",
    )
    trace_id, parent_id = secrets.token_hex(16), secrets.token_hex(8)
    output = tmp_path / "out.log"
    with running("flask serve", env, output) as (origin, _process):
        page = requests.get(f"{origin}/animals", headers={"traceparent": f"00-{trace_id}-{parent_id}-01"}, timeout=10)
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
    # The access line carries the trace id.
    records = [json.loads(line) for line in output.read_text().splitlines()]
    [access] = [r for r in records if r.get("logger") == "petportal.access" and r["path"] == "/animals"]
    assert access["trace_id"] == trace_id and access["request_id"] == page.headers["X-Request-ID"]


@pytest.mark.slow
def test_a_request_without_traceparent_starts_a_trace_of_its_own_and_a_stop_sends_what_is_left(
    tmp_path, production_store, receiver
):
    # Spans are batched for a minute: only the workers' stop can send them.
    env = production_variables(
        tmp_path, production_store.url, OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint, OTEL_BSP_SCHEDULE_DELAY="60000"
    )
    with running("flask serve", env, tmp_path / "out.log") as (origin, process):
        assert requests.get(f"{origin}/animals", timeout=10).status_code == 200
        assert requests.get(f"{origin}/no/such%0Apage", timeout=10).status_code == 404
        time.sleep(0.5)
        assert receiver.spans == []
        process.terminate()
        assert process.wait(30) == 0
    [server_span] = receiver.wait_for(lambda span: span["name"] == "GET /animals")
    assert server_span["parent_id"] == "" and server_span["service"] == "petportal"
    [listed] = [request for request in production_store.received if request.target.startswith("/v1/pets?")]
    assert listed.headers["traceparent"].split("-")[1] == server_span["trace_id"]
    # A page with no route is named by its method alone, never by the path a client made up.
    assert receiver.wait_for(lambda span: span["name"] == "GET" and span["parent_id"] == "")
    assert not [span for span in receiver.spans if "such" in span["name"]]


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
