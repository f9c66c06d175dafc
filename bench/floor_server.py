"""Bench-only: the floor (bench/floor_app.py) under granian, with the settings `flask serve` runs the portal with.

python -m bench.floor_server --bind HOST:PORT --workers N
"""

import argparse

from bench.floor_app import app
from petportal.processes import fewer_malloc_arenas
from petportal.production import parse_bind, serve


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bind", required=True)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    host, port = parse_bind(args.bind)
    fewer_malloc_arenas()  # as production.run does before its workers are forked
    serve(lambda: app, host, port, args.workers, "text")


if __name__ == "__main__":
    main()
