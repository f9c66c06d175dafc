"""Bench-only: the portal with its metrics switched off, to measure what the metrics cost."""

from petportal import create_app
from petportal.telemetry import metrics

metrics.observe_upstream = lambda environment: None
app = create_app()
for hooks in (app.before_request_funcs[None], app.after_request_funcs[None]):
    hooks[:] = [hook for hook in hooks if hook.__module__ != "petportal.telemetry.metrics"]
