"""What watching the portal costs: throughput with and without metrics, and with JSON logs.

    python -m bench.observability [--seconds 3] [--rounds 5]

Starts the reference store and three portals under gunicorn (gunicorn.conf.py, 2 workers x 8 threads,
cache off): with metrics and text logs (the default), without metrics (bench/quiet_app.py), and with
metrics and JSON logs. wrk loads /animals?limit=20 at 8 connections, rounds alternating the order.
"""

import os
import secrets
import statistics
import subprocess
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

from bench.__main__ import (
    KEY,
    PORTAL_THREADS,
    PORTAL_WORKERS,
    ROOT,
    STORE_THREADS,
    STORE_WORKERS,
    gunicorn,
    print_settings,
    run_options,
    seeded_store,
    wrk,
)

VARIANTS = {
    "metrics, text logs (default)": ("app:app", {}),
    "no metrics, text logs": ("bench.quiet_app:app", {}),
    "metrics, JSON logs": ("app:app", {"PETPORTAL_LOG_FORMAT": "json"}),
}


def main():
    args = run_options(__doc__)
    folder = Path(tempfile.mkdtemp(prefix="petportal-bench-"))
    store_env = seeded_store(folder, "store")
    with ExitStack() as stack:
        store, _ = stack.enter_context(gunicorn("petportal.store:create_app()", store_env, STORE_WORKERS, STORE_THREADS))
        portal_env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("PETSTORE_", "PETPORTAL_", "PROMETHEUS_"))},
            "PETSTORE_PRODUCTION_URL": store + "/v1", "PETSTORE_PRODUCTION_KEY": KEY,
            "PETPORTAL_SECRET_KEY": secrets.token_urlsafe(32), "PETPORTAL_HTTPS": "0",
            "PETPORTAL_DATABASE_URL": f"sqlite:///{folder / 'portal.sqlite'}", "PETPORTAL_CACHE_SECONDS": "0",
        }
        subprocess.run([sys.executable, "-m", "flask", "--app", "app", "init-db"], cwd=ROOT, env=portal_env,
                       check=True, capture_output=True)
        origins = {}
        for name, (app, extra) in VARIANTS.items():
            origins[name], _ = stack.enter_context(
                gunicorn(app, {**portal_env, **extra}, PORTAL_WORKERS, PORTAL_THREADS, ["-c", "gunicorn.conf.py"]))
        print_settings(args)
        for origin in origins.values():
            wrk(f"{origin}/animals?limit=20", 8, 1)
        runs = {name: [] for name in VARIANTS}
        for round_number in range(args.rounds):
            order = list(VARIANTS) if round_number % 2 == 0 else list(reversed(VARIANTS))
            for name in order:
                measured = wrk(f"{origins[name]}/animals?limit=20", 8, args.seconds)
                if measured is None:
                    raise SystemExit(f"discarded: {name} answered something other than 2xx")
                runs[name].append(measured[0])
    medians = {name: statistics.median(values) for name, values in runs.items()}
    baseline = medians["no metrics, text logs"]
    print("| portal | req/s (median), /animals?limit=20, c=8 | cost against no metrics |")
    print("|---|---:|---:|")
    for name, rps in medians.items():
        print(f"| {name} | {rps:,.0f} | {(1 - rps / baseline) * 100:+.1f}% |")


if __name__ == "__main__":
    main()
