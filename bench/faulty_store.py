"""Bench-only: the reference store with faults and outages, for the soak (bench/soak.py), served by gunicorn.

Of every 20 requests a store worker answers, 16 are answered as the store answers them; the others fail as stores
fail: one after `BENCH_STORE_SLOW_SECONDS` (past the portal's deadline), one with a 503, one with the connection
reset, one with a 200 whose body breaks off. Besides, for `BENCH_STORE_OUTAGE_SECONDS` of every
`BENCH_STORE_OUTAGE_EVERY` seconds (by the wall clock, so every worker agrees), every connection is reset: an outage.
"""

import itertools
import os
import socket
import struct
import time

from petportal.reference_store import create_app

SLOW_SECONDS = float(os.environ.get("BENCH_STORE_SLOW_SECONDS", "3"))
OUTAGE_SECONDS = float(os.environ.get("BENCH_STORE_OUTAGE_SECONDS", "10"))
OUTAGE_EVERY = float(os.environ.get("BENCH_STORE_OUTAGE_EVERY", "60"))
FAULTS = ("slow", *["ok"] * 4, "503", *["ok"] * 4, "reset", *["ok"] * 4, "broken", *["ok"] * 4)
store = create_app()
_turns = itertools.count()


def in_outage():
    """Whether the store is out now."""
    return OUTAGE_EVERY > 0 and time.time() % OUTAGE_EVERY >= OUTAGE_EVERY - OUTAGE_SECONDS


def reset(environ, start_response):
    """Close the connection with a TCP reset and no answer (gunicorn hands the socket over in the environ)."""
    connection = environ["gunicorn.socket"]
    connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    connection.close()
    start_response("500 Reset", [("Content-Length", "0")])  # never sent: gunicorn finds the socket closed
    return [b""]


def app(environ, start_response):
    """The store, or one of its faults."""
    fault = "reset" if in_outage() else FAULTS[next(_turns) % len(FAULTS)]
    if fault == "slow":
        time.sleep(SLOW_SECONDS)
    elif fault == "503":
        body = b'{"code": "unavailable", "message": "down for a moment"}'
        headers = [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
        start_response("503 Service Unavailable", headers)
        return [body]
    elif fault == "reset":
        return reset(environ, start_response)
    elif fault == "broken":
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", "400")])
        return [b'[{"id": 1, "na']
    return store(environ, start_response)
