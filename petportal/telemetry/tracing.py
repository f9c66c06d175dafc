"""Traces with OpenTelemetry: a span for every request and every pet store call, sent over OTLP/HTTP.

On only when `OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT` is set (the SDK reads the other `OTEL_*` variables); off, nothing
of OpenTelemetry is imported. Incoming trace headers are dropped unless PETPORTAL_TRUST_TRACE_HEADERS=1; `baggage` is
never read nor sent; every span passes the egress guard before export.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, cast

from petportal import egress
from petportal.config import settings

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment
    from flask import Flask
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
    from opentelemetry.trace import Tracer

# What the request and call spans carry besides OpenTelemetry's HTTP attributes.
ENVIRONMENT = "petportal.environment"
OPERATION = "petstore.operation"
# The attributes (old and new HTTP conventions) that hold a URL, or its query alone.
URL_ATTRIBUTES = frozenset({"http.target", "http.url", "url.full"})
QUERY_ATTRIBUTES = frozenset({"url.query"})


class _ThisProcess:
    tracer: Tracer | None = None


def register(app: Flask) -> None:
    if not settings(app).logging.tracing:
        return
    from flask import Response, g, request
    from opentelemetry import propagate
    from opentelemetry.instrumentation.wsgi import OpenTelemetryMiddleware

    _start()

    @app.after_request
    def describe_the_span(response: Response) -> Response:
        serving = g.get("serving")
        route = request.url_rule.rule if request.url_rule else None
        describe_request(request.method, route, serving.environment.name if serving is not None else None)
        return response

    # Outermost: the span covers the page cache and every other layer, and ends after the body is sent.
    traced = OpenTelemetryMiddleware(app.wsgi_app)
    # The incoming headers it must not read: untrusted, every propagator's; trusted, `baggage` alone.
    fields = {"baggage"}
    if not settings(app).logging.trust_trace_headers:
        fields |= {"traceparent", "tracestate", *propagate.get_global_textmap().fields}
    keys = tuple("HTTP_" + field.upper().replace("-", "_") for field in sorted(fields))

    def without_trace_headers(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        for key in keys:
            environ.pop(key, None)
        return cast("Iterable[bytes]", traced(environ, start_response))

    app.wsgi_app = without_trace_headers  # type: ignore[method-assign]  # Flask's own WSGI hook


def _start() -> None:
    """One tracer provider per process (the SDK restarts the batch thread in forked workers)."""
    if _ThisProcess.tracer is not None:
        return
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

    provider = TracerProvider(resource=Resource.create({"service.name": service_name()}))
    exporter = cast(SpanExporter, GuardedExporter(OTLPSpanExporter()))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    _ThisProcess.tracer = trace.get_tracer("petportal")


def service_name() -> str:
    """The service the spans name: OTEL_SERVICE_NAME, else a `service.name` in OTEL_RESOURCE_ATTRIBUTES, else
    "petportal" (`Resource.create` lets the attributes it is given win over both, so they are read here)."""
    from opentelemetry.sdk.resources import OTELResourceDetector

    return str(OTELResourceDetector().detect().attributes.get("service.name") or "petportal")


def describe_request(method: str, route: str | None, environment: str | None) -> None:
    """Name the request's span after its route (else its method) and record its environment."""
    if _ThisProcess.tracer is None:
        return
    from opentelemetry import trace

    span = trace.get_current_span()
    if route is not None:
        span.update_name(f"{method} {route}")
        span.set_attribute("http.route", route)
    elif method:
        span.update_name(method)  # no route: never the path a client made up
    if environment is not None:
        span.set_attribute(ENVIRONMENT, environment)


@contextmanager
def pet_store_call(environment: str, operation: str) -> Iterator[dict[str, str]]:
    """A client span around one pet store call; yields the headers that carry it to the store."""
    if _ThisProcess.tracer is None:
        yield {}
        return
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    attributes = {ENVIRONMENT: environment, OPERATION: operation}
    with _ThisProcess.tracer.start_as_current_span(operation, kind=trace.SpanKind.CLIENT, attributes=attributes):
        headers: dict[str, str] = {}
        # The call's own span, whatever OTEL_PROPAGATORS says: never baggage.
        TraceContextTextMapPropagator().inject(headers)
        yield headers


class GuardedExporter:
    """An exporter in front of OTLP's passing each span through `guarded_span` (in the batch's thread)."""

    def __init__(self, exporter: SpanExporter) -> None:
        self.exporter = exporter

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return self.exporter.export([guarded_span(span) for span in spans])

    def shutdown(self) -> None:
        self.exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self.exporter.force_flush(timeout_millis)


def guarded_span(span: ReadableSpan) -> ReadableSpan:
    """`span`, or a copy with URLs cut to their query's names and every text quoting a secret withheld."""
    from opentelemetry.sdk.trace import Event
    from opentelemetry.sdk.trace import ReadableSpan as Copy
    from opentelemetry.trace import Link, Status

    changed = False
    attributes = guarded_attributes(span.attributes)
    events = []
    for event in span.events:
        event_name, event_attributes = egress.withheld(event.name), guarded_attributes(event.attributes)
        same = event_name == event.name and event_attributes is None
        changed = changed or not same
        events.append(event if same else Event(event_name, event_attributes or event.attributes, event.timestamp))
    links = []
    for link in span.links:
        link_attributes = guarded_attributes(link.attributes)
        changed = changed or link_attributes is not None
        links.append(link if link_attributes is None else Link(link.context, link_attributes))
    status = span.status
    if status.description and egress.withheld(status.description) != status.description:
        status = Status(status.status_code, egress.WITHHELD_VALUE)
    name = egress.withheld(span.name)
    if not changed and attributes is None and status is span.status and name == span.name:
        return span
    return Copy(
        name=name,
        context=span.context,
        parent=span.parent,
        resource=span.resource,
        attributes=span.attributes if attributes is None else attributes,
        events=events,
        links=links,
        kind=span.kind,
        status=status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


def guarded_attributes(attributes: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """None when nothing in `attributes` changes; else a guarded copy."""
    if not attributes:
        return None
    guarded = {}
    for key, value in attributes.items():
        if isinstance(value, str) and key in URL_ATTRIBUTES:
            guarded[key] = egress.withheld(without_query_values(value))
        elif isinstance(value, str) and key in QUERY_ATTRIBUTES:
            guarded[key] = egress.withheld(query_names(value))
        else:
            guarded[key] = egress.withheld(value)
    return None if guarded == dict(attributes) else guarded


def without_query_values(url: str) -> str:
    """`url` (or a request target) with its query cut to the names of its parameters and its fragment dropped:
    "/sso/callback?code=...&state=..." becomes "/sso/callback?code&state"."""
    base, mark, query = url.partition("#")[0].partition("?")
    return base + ("?" + query_names(query) if mark else "")


def query_names(query: str) -> str:
    return "&".join(part.partition("=")[0] for part in query.split("&") if part)


def trace_id() -> str | None:
    if _ThisProcess.tracer is None:
        return None
    from opentelemetry import trace

    context = trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else None


def flush(timeout_millis: int = 5_000) -> None:
    if _ThisProcess.tracer is None:
        return
    from opentelemetry import trace

    provider: Any = trace.get_tracer_provider()
    if hasattr(provider, "force_flush"):
        provider.force_flush(timeout_millis)
