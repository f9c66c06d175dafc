"""Test-only: the portal with one more page, `/test/environ`, showing its own WSGI environ: what a page, a log line
or a debugger could show of a request (tests/test_production.py)."""

from flask import request

from petportal import create_app

app = create_app()


@app.get("/test/environ")
def environ() -> dict[str, list[str]]:
    return {
        "names": sorted(request.environ),
        "values": [value for value in request.environ.values() if isinstance(value, str)],
    }
