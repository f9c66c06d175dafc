"""Bench-only: the portal with its metrics switched off, to measure what the metrics cost."""

from petportal import create_app
from petportal.petstore import environments

# Before the app is made: each environment's client binds the observer when it is built.
environments.observe_upstream = lambda *call: None
app = create_app()
for hooks in (app.before_request_funcs[None], app.after_request_funcs[None]):
    hooks[:] = [hook for hook in hooks if hook.__module__ != "petportal.telemetry.metrics"]
