"""The portal's entry point: `python app.py [--host H] [--port N]`, `flask --app app run` and `gunicorn app:app`.

Only the first two run the demo when no pet store is configured; every other way refuses to start then.
"""

import argparse
import os
import sys

import click

from petportal import create_app
from petportal.running import demo
from petportal.running.processes import fewer_malloc_arenas


def main(argv: list[str]) -> None:
    """`python app.py`: the portal on the development server (options read first, so `--help` starts nothing)."""
    parser = argparse.ArgumentParser(
        prog="python app.py",
        description="Run Pet Portal on Flask's development server. With no pet store configured (no "
        "PETSTORE_* variable), it runs in demo mode: two bundled reference stores and two demo accounts. "
        "For production serving, use `flask --app app serve` (see the README).",
    )
    parser.add_argument("--host", default="127.0.0.1", help="the address to listen on (default: 127.0.0.1)")
    parser.add_argument(
        "--port",
        type=int,
        default=int(os.environ.get("FLASK_RUN_PORT", "5000")),
        help="the port to listen on (default: 5000, or FLASK_RUN_PORT)",
    )
    options = parser.parse_args(argv)
    fewer_malloc_arenas()  # one thread per request: keep their freed memory in two arenas
    demo.portal(create_app, options.host, options.port).run(host=options.host, port=options.port)


def _flask_run_address() -> tuple[str, int] | None:
    """Where `flask --app app run` will serve, when it is the command loading this module; else None."""
    context = click.get_current_context(silent=True)
    if context is None or context.info_name != "run":
        return None
    return context.params["host"], context.params["port"]


if __name__ == "__main__":
    main(sys.argv[1:])
elif address := _flask_run_address():
    app = demo.portal(create_app, *address)
else:
    app = create_app()
