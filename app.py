"""The portal's entry point: `python app.py [--host H] [--port N]`, `flask --app app run` and `gunicorn app:app`."""

import argparse
import os
import sys

from petportal import create_app
from petportal.processes import fewer_malloc_arenas


def main(argv: list[str]) -> None:
    """`python app.py`: the portal on the development server; in demo mode unless a pet store is configured. The
    options are read before the app is built, so `--help` starts nothing."""
    parser = argparse.ArgumentParser(
        prog="python app.py",
        description="Run Pet Portal on Flask's development server. With no pet store configured (no "
        "PETSTORE_*_URL), it runs in demo mode: two bundled reference stores and two demo accounts. "
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
    # Where this server is reached: single sign-on's way back and the passkeys' origin, unless set otherwise.
    os.environ.setdefault("PETPORTAL_PUBLIC_URL", f"http://localhost:{options.port}")
    fewer_malloc_arenas()  # one thread per request: keep their freed memory in two arenas
    create_app().run(host=options.host, port=options.port)


if __name__ == "__main__":
    main(sys.argv[1:])
else:
    app = create_app()
