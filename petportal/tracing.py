"""Traces with OpenTelemetry: a span for every request and for every pet store call, sent over OTLP/HTTP.

On only when `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set, and then
configured by the standard `OTEL_*` variables, which the SDK reads itself (the service name, the sampler,
the batch sizes, the exporter's headers and timeout). Off, nothing of OpenTelemetry is imported and every
function here returns at its first line.

- A request's span is made by OpenTelemetry's own WSGI middleware, in front of everything else (the page
  cache included), so it continues an incoming W3C `traceparent` and ends once the body is sent. It is
  named after the route once one is known, with the environment served as an attribute.
- A pet store call's span is a child of it (or a root span, for an import's rows sent outside any request)
  named after the operation; its `traceparent` goes to the store with the call.
- Log lines carry the current trace id (logs.RequestContextFilter asks `trace_id()`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from flask import Flask
    from opentelemetry.trace import Tracer

TRACER_NAME = "petportal"
# What the request and call spans carry besides OpenTelemetry's HTTP attributes.
ENVIRONMENT = "petportal.environment"
OPERATION = "petstore.operation"


class _ThisProcess:
    """The tracer of this process, once tracing has started (None: off)."""

    tracer: Tracer | None = None


def wanted(environ: Mapping[str, str]) -> bool:
    """Whether these variables ask for traces (`config` records the answer as `TRACING`)."""
    endpoint = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "") or environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
    disabled = environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"
    return bool(endpoint.strip()) and not disabled


def register(app: Flask) -> None:
    """With tracing asked for: start the SDK (once per process) and trace every request of `app`."""
    if not app.config["TRACING"]:
        return
    from flask import Response, g, request
    from opentelemetry.instrumentation.wsgi import OpenTelemetryMiddleware

    _start()

    @app.after_request
    def describe_the_span(response: Response) -> Response:
        serving = g.get("serving")
        route = request.url_rule.rule if request.url_rule else None
        describe_request(request.method, route, serving.environment.name if serving is not None else None)
        return response

    # Outermost: the span covers the page cache and every other layer, and ends after the body is sent.
    app.wsgi_app = OpenTelemetryMiddleware(app.wsgi_app)  # type: ignore[method-assign]  # Flask's own WSGI hook


def _start() -> None:
    """One tracer provider per process, exporting in batches over OTLP/HTTP. The batch processor's thread is
    started again in each forked worker by the SDK itself."""
    if _ThisProcess.tracer is not None:
        return
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    # OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, when set, win over this default.
    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME") or "petportal"})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
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
    from opentelemetry import propagate, trace

    attributes = {ENVIRONMENT: environment, OPERATION: operation}
    # A call that raises ends its span with the error recorded and the status set, by the SDK.
    with _ThisProcess.tracer.start_as_current_span(operation, kind=trace.SpanKind.CLIENT, attributes=attributes):
        headers: dict[str, str] = {}
        propagate.inject(headers)
        yield headers


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
