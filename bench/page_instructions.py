"""Bench-only: serve /animals?limit=20 a given number of times in this process, for callgrind to count.

    python -m bench.page_instructions MODULE COUNT

MODULE is `app` (the portal as served) or `bench.quiet_app` (its metrics switched off); the
environment says where the store is. bench/observability.py runs this under valgrind.
"""

import importlib
import sys


def main():
    module, count = sys.argv[1], int(sys.argv[2])
    client = importlib.import_module(module).app.test_client()
    for _ in range(count):
        response = client.get("/animals?limit=20")
        if response.status_code != 200:
            raise SystemExit(f"{module}: /animals answered {response.status_code}")


if __name__ == "__main__":
    main()
