"""Bench-only: a bench WSGI app, by default the floor (bench/floor_app.py), under granian, with the settings
`flask serve` runs the portal with.

python -m bench.floor_server --bind HOST:PORT --workers N [--app MODULE:NAME]
"""

import argparse
import importlib

from petportal.running.processes import fewer_malloc_arenas
from petportal.running.serve import parse_bind, serve


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bind", required=True)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--app", default="bench.floor_app:app", help="the WSGI app to serve, as MODULE:NAME")
    args = parser.parse_args()
    module, _, name = args.app.partition(":")
    app = getattr(importlib.import_module(module), name)
    host, port = parse_bind(args.bind)
    fewer_malloc_arenas()  # as production.run does before its workers are forked
    serve(lambda: app, host, port, args.workers, "text")


if __name__ == "__main__":
    main()
