"""Traces with OpenTelemetry: a span for every request and for every pet store call, sent over OTLP/HTTP.

On only when `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set, and then
configured by the standard `OTEL_*` variables, which the SDK reads itself (the service name, the sampler,
the batch sizes, the exporter's headers and timeout). Off, nothing of OpenTelemetry is imported and every
function here returns at its first line.

- A request's span is made by OpenTelemetry's own WSGI middleware, in front of everything else (the page
  cache included), and ends once the body is sent. It continues an incoming W3C `traceparent` only when the
  operator trusts whoever sends it (`PETPORTAL_TRUST_TRACE_HEADERS=1`, behind their own proxy or mesh): else
  every trace header is dropped before the middleware reads it, so a client neither joins a trace of its own
  choosing nor switches tracing off with a `-00`. `baggage` is never read. The span is named after the route
  once one is known, with the environment served as an attribute.
- A pet store call's span is a child of it (or a root span, for an import's rows sent outside any request)
  named after the operation; its own W3C `traceparent` (and `tracestate`) goes to the store with the call, and
  nothing else (no `baggage`).
- Every span passes the egress guard before it is exported (`GuardedExporter`): URLs keep the names of their
  query's parameters, never the values (an SSO callback's `code` and `state`), and an attribute, event, status
  or name that quotes a secret is replaced whole (`egress`).
- Log lines carry the current trace id (logs.RequestContextFilter asks `trace_id()`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, cast

from . import egress

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment
    from flask import Flask
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
    from opentelemetry.trace import Tracer
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

TRACER_NAME = "petportal"
# What the request and call spans carry besides OpenTelemetry's HTTP attributes.
ENVIRONMENT = "petportal.environment"
OPERATION = "petstore.operation"
# The attributes (old and new HTTP conventions) that hold a URL, or its query alone.
URL_ATTRIBUTES = frozenset({"http.target", "http.url", "url.full"})
QUERY_ATTRIBUTES = frozenset({"url.query"})


class _ThisProcess:
    """The tracer of this process, once tracing has started (None: off)."""

    tracer: Tracer | None = None
    # What carries a store call's span on: W3C Trace Context alone.
    propagator: TraceContextTextMapPropagator | None = None


def wanted(environ: Mapping[str, str]) -> bool:
    """Whether these variables ask for traces (`config` records the answer as `TRACING`)."""
    endpoint = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "") or environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
    disabled = environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"
    return bool(endpoint.strip()) and not disabled


def register(app: Flask) -> None:
    """With tracing asked for: start the SDK (once per process) and trace every request of `app`."""
    from .config import settings  # config imports this module

    if not settings(app).tracing:
        return
    from flask import Response, g, request
    from opentelemetry.instrumentation.wsgi import OpenTelemetryMiddleware

    _start()
    trusted = settings(app).trust_trace_headers

    @app.after_request
    def describe_the_span(response: Response) -> Response:
        serving = g.get("serving")
        route = request.url_rule.rule if request.url_rule else None
        describe_request(request.method, route, serving.environment.name if serving is not None else None)
        return response

    # Outermost: the span covers the page cache and every other layer, and ends after the body is sent.
    middleware = OpenTelemetryMiddleware(app.wsgi_app)
    app.wsgi_app = TraceHeaders(middleware, trusted)  # type: ignore[method-assign]  # Flask's own WSGI hook


class TraceHeaders:
    """WSGI layer in front of OpenTelemetry's middleware: the incoming trace headers it may read. Untrusted, none
    (every field of the configured propagators: `traceparent`, `tracestate`, `baggage`, any other the operator
    chose); trusted, all but `baggage`, which the portal has no use for."""

    def __init__(self, wsgi_app: WSGIApplication, trusted: bool) -> None:
        from opentelemetry import propagate

        self.wsgi_app = wsgi_app
        fields = {"baggage"}
        if not trusted:
            fields |= {"traceparent", "tracestate", *propagate.get_global_textmap().fields}
        self.keys = tuple("HTTP_" + field.upper().replace("-", "_") for field in sorted(fields))

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        for key in self.keys:
            environ.pop(key, None)
        return self.wsgi_app(environ, start_response)


def _start() -> None:
    """One tracer provider per process, exporting in batches over OTLP/HTTP. The batch processor's thread is
    started again in each forked worker by the SDK itself."""
    if _ThisProcess.tracer is not None:
        return
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    # OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, when set, win over this default.
    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME") or "petportal"})
    provider = TracerProvider(resource=resource)
    # Every span passes the guard on its way out, whoever made it: the exporter's only way in.
    exporter = cast(SpanExporter, GuardedExporter(OTLPSpanExporter()))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    _ThisProcess.propagator = TraceContextTextMapPropagator()
    _ThisProcess.tracer = trace.get_tracer(TRACER_NAME)


def describe_request(method: str, route: str | None, environment: str | None) -> None:
    """Name the current request's span after its route (by its method alone without one), and record the
    environment it is served from. Called by Flask's hook above and, for a page it replays, by the page
    cache, which answers before Flask."""
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
    """A client span around one pet store call; yields the headers that carry it to the store (`traceparent`),
    none when tracing is off."""
    if _ThisProcess.tracer is None:
        yield {}
        return
    from opentelemetry import trace

    attributes = {ENVIRONMENT: environment, OPERATION: operation}
    # A call that raises ends its span with the error recorded and the status set, by the SDK.
    with _ThisProcess.tracer.start_as_current_span(operation, kind=trace.SpanKind.CLIENT, attributes=attributes):
        headers: dict[str, str] = {}
        if _ThisProcess.propagator is not None:  # the call's own span, whatever OTEL_PROPAGATORS says: never baggage
            _ThisProcess.propagator.inject(headers)
        yield headers


class GuardedExporter:
    """An exporter in front of another (OTLP's): each span as `guarded_span` makes it, so no attribute, event,
    status or name leaves quoting a secret, and no URL with its query's values. It runs in the batch's own
    thread, out of the requests' way; a span with nothing to change is passed on as it is."""

    def __init__(self, exporter: SpanExporter) -> None:
        self.exporter = exporter

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return self.exporter.export([guarded_span(span) for span in spans])

    def shutdown(self) -> None:
        self.exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self.exporter.force_flush(timeout_millis)


def guarded_span(span: ReadableSpan) -> ReadableSpan:
    """`span`, or a copy of it with URLs cut to their query's names and every text quoting a secret withheld
    (`egress.withheld`): its attributes, its events' names and attributes (an exception's message and its
    stack trace, chained causes included), its links' attributes, its status's description and its name."""
    from opentelemetry.sdk.trace import Event
    from opentelemetry.sdk.trace import ReadableSpan as Copy
    from opentelemetry.trace import Link, Status

    changed = False
    attributes = guarded_attributes(span.attributes)
    events = []
    for event in span.events:
        event_name, event_attributes = egress.withheld(event.name), guarded_attributes(event.attributes)
        if event_name != event.name or event_attributes is not None:
            changed = True
            events.append(Event(event_name, event_attributes or event.attributes, event.timestamp))
        else:
            events.append(event)
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
    """None when nothing in `attributes` needs to change; else a copy with each URL cut to its query's names
    (`without_query_values`) and each value quoting a secret withheld."""
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
    if all(guarded[key] == value for key, value in attributes.items()):
        return None
    return guarded


def without_query_values(url: str) -> str:
    """`url` (or a request target) with its query cut to the names of its parameters and its fragment dropped:
    "/sso/callback?code=...&state=..." becomes "/sso/callback?code&state"."""
    rest, fragment, _ = url.partition("#")
    base, mark, query = rest.partition("?")
    if not mark and not fragment:
        return url
    return base + ("?" + query_names(query) if mark else "")


def query_names(query: str) -> str:
    """The names of a query's parameters, in their order, without their values: "code&state"."""
    return "&".join(part.partition("=")[0] for part in query.split("&") if part)


def trace_id() -> str | None:
    """The current trace's id as 32 hex digits, or None (tracing off, or outside any span)."""
    if _ThisProcess.tracer is None:
        return None
    from opentelemetry import trace

    context = trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else None


def flush(timeout_millis: int = 5_000) -> None:
    """Send the spans still waiting in the batch (at a server's stop)."""
    if _ThisProcess.tracer is None:
        return
    from opentelemetry import trace

    provider: Any = trace.get_tracer_provider()
    if hasattr(provider, "force_flush"):
        provider.force_flush(timeout_millis)
