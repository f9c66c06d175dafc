"""Bench-only: the reference store, answering every request 2 seconds late."""

import os
import time

from petportal.reference_store import create_app

DELAY_SECONDS = float(os.environ.get("BENCH_STORE_DELAY", "2"))
store = create_app()


def app(environ, start_response):
    """The store, after the delay."""
    time.sleep(DELAY_SECONDS)
    return store(environ, start_response)
