"""What watching the portal costs: instructions per page, CPU time per page and throughput.

    python -m bench.observability [--seconds 3] [--rounds 5]

Three portals, cache off, in front of the reference store: with metrics and text logs (the default),
without metrics (bench/quiet_app.py), and with metrics and JSON logs.

1. The verdict: instructions the portal's process executes per /animals?limit=20, counted by
   valgrind's callgrind (needs valgrind) as the difference between serving 45 and 5 pages in process.
   Counts repeat to within a fraction of a percent, where throughput on 2 shared cores moves by up to
   a third between identical runs.
2. Context under load: each portal under gunicorn (gunicorn.conf.py, 2 workers x 8 threads), wrk at
   8 connections, rounds alternating the order; the workers' CPU time per request (user + system, from
   /proc) and requests per second.
"""

import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

from bench.servers import (
    PORTAL_THREADS,
    PORTAL_WORKERS,
    STORE_THREADS,
    STORE_WORKERS,
    gunicorn,
    portal_variables,
    print_settings,
    run_options,
    seeded_store,
    workers_cpu_seconds,
    wrk,
)
from tests.support.portal import PROJECT_ROOT, prepare_portal

PAGES = (5, 45)
BASELINE = "no metrics, text logs"
VARIANTS = {
    "metrics, text logs (default)": ("app:app", {}),
    BASELINE: ("bench.quiet_app:app", {}),
    "metrics, JSON logs": ("app:app", {"PETPORTAL_LOG_FORMAT": "json"}),
}


def main():
    args = run_options(__doc__)
    folder = Path(tempfile.mkdtemp(prefix="petportal-bench-"))
    store_env = seeded_store(folder, "store")
    with ExitStack() as stack:
        store, _ = stack.enter_context(
            gunicorn("petportal.reference_store:create_app()", store_env, STORE_WORKERS, STORE_THREADS)
        )
        portal_env = portal_variables(folder, store)
        prepare_portal(portal_env)
        print_settings(args)
        if shutil.which("valgrind"):
            print_instructions(instructions_per_page(portal_env))
        else:
            print("instructions per page: skipped, valgrind is not installed (apt-get install valgrind)\n")
        portals = {}
        for name, (app, extra) in VARIANTS.items():
            portals[name] = stack.enter_context(
                gunicorn(app, {**portal_env, **extra}, PORTAL_WORKERS, PORTAL_THREADS, ["-c", "gunicorn.conf.py"])
            )
        for origin, _ in portals.values():
            wrk(f"{origin}/animals?limit=20", 8, 1)
        rps = {name: [] for name in VARIANTS}
        cpu_ms = {name: [] for name in VARIANTS}
        for round_number in range(args.rounds):
            order = list(VARIANTS) if round_number % 2 == 0 else list(reversed(VARIANTS))
            for name in order:
                origin, master = portals[name]
                before = workers_cpu_seconds(master)
                measured = wrk(f"{origin}/animals?limit=20", 8, args.seconds)
                if measured is None:
                    raise SystemExit(f"discarded: {name} answered something other than 2xx")
                rps[name].append(measured.rps)
                cpu_ms[name].append((workers_cpu_seconds(master) - before) * 1000 / measured.requests)
    print_load(rps, cpu_ms)


def instructions_per_page(portal_env):
    """Instructions per page for each variant: callgrind's count at 45 pages less its count at 5, over 40."""

    def count(variant, pages):
        module, extra = VARIANTS[variant]
        env = {**portal_env, **extra, "PYTHONHASHSEED": "0", "PROMETHEUS_MULTIPROC_DIR": tempfile.mkdtemp()}
        # valgrind runs the interpreter itself, not a shim script, and finds the venv through its path.
        python = Path(sys.prefix) / "bin" / "python"
        command = [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            str(python),
            "-m",
            "bench.page_instructions",
            module.removesuffix(":app"),
            str(pages),
        ]
        result = subprocess.run(command, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, check=False)
        if result.returncode:
            raise SystemExit(f"callgrind run failed: {result.stderr[-500:]}")
        return int(re.search(r"Collected : (\d+)", result.stderr).group(1))

    jobs = [(variant, pages) for variant in VARIANTS for pages in PAGES]
    with ThreadPoolExecutor(os.cpu_count()) as pool:
        counts = dict(zip(jobs, pool.map(lambda job: count(*job), jobs), strict=True))
    few, many = PAGES
    return {variant: (counts[variant, many] - counts[variant, few]) / (many - few) for variant in VARIANTS}


def print_instructions(per_page):
    print("| portal (in process) | instructions per page | cost against no metrics |")
    print("|---|---:|---:|")
    for name, instructions in per_page.items():
        print(f"| {name} | {instructions / 1e6:.2f} M | {(instructions / per_page[BASELINE] - 1) * 100:+.1f}% |")
    print()


def print_load(rps, cpu_ms):
    rps = {name: statistics.median(values) for name, values in rps.items()}
    spread = {name: (min(values), max(values)) for name, values in cpu_ms.items()}
    cpu_ms = {name: statistics.median(values) for name, values in cpu_ms.items()}
    print("| portal | CPU ms per request (median; min-max) | cost against no metrics | req/s (median) |")
    print("|---|---:|---:|---:|")
    for name in VARIANTS:
        low, high = spread[name]
        cost = (cpu_ms[name] / cpu_ms[BASELINE] - 1) * 100
        print(f"| {name} | {cpu_ms[name]:.2f} ({low:.2f}-{high:.2f}) | {cost:+.1f}% | {rps[name]:,.0f} |")


if __name__ == "__main__":
    main()
