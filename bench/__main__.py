"""Side-by-side benchmark of the pet store, the portal and a bare render, on this machine.

    python -m bench [--seconds 3] [--rounds 5]

Needs wrk (apt-get install wrk). Starts, on loopback, under gunicorn: the reference store seeded with
100 animals; a slow copy of it (2 s per answer) as the staging environment; the portal with the cache
off and, separately, on; and the bench-only bare render. Prints medians, the target ratios, peak RSS
per portal worker, and what a slow environment does to the other pages. Last, on servers of its own,
one portal worker's RSS after a warm-up and after 10,000 mixed requests (bench/memory.py).
"""

import argparse
import os
import platform
import re
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import NamedTuple

from bench.portal import PROJECT_ROOT, csrf_token, logged_in, portal_environment, prepare_portal
from petportal.processes import free_port, stop, wait_for_port

KEY = secrets.token_urlsafe(16)
ADMIN_PASSWORD = secrets.token_urlsafe(12)
PORTAL_WORKERS, PORTAL_THREADS = 2, 8
STORE_WORKERS, STORE_THREADS = 2, 8
TARGETS = ("store", "portal", "bare", "cached")
LIMITS = (20, 100)
CONCURRENCY = (1, 8)


@contextmanager
def gunicorn(app, env, workers, threads, extra=()):
    """One gunicorn server on a free loopback port; yields (origin, master process)."""
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "gunicorn",
        "--bind",
        f"127.0.0.1:{port}",
        "--workers",
        str(workers),
        "--worker-class",
        "gthread",
        "--threads",
        str(threads),
        "--keep-alive",
        "5",
        *extra,
        app,
    ]
    process = subprocess.Popen(command, cwd=PROJECT_ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port, process, seconds=60)
        yield f"http://127.0.0.1:{port}", process
    finally:
        stop([process], seconds=30)


def workers(master):
    """The process ids of a gunicorn master's workers."""
    return Path(f"/proc/{master.pid}/task/{master.pid}/children").read_text().split()


def workers_cpu_seconds(master):
    """CPU time (user + system) spent so far by a gunicorn master's workers, in seconds."""
    ticks = 0
    for pid in workers(master):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks += int(fields[11]) + int(fields[12])  # utime and stime: fields 14 and 15 of proc(5)
    return ticks / os.sysconf("SC_CLK_TCK")


def worker_peak_rss_mb(master):
    """The largest peak resident set (VmHWM) among a gunicorn master's workers, in MB."""
    peaks = []
    for pid in workers(master):
        status = Path(f"/proc/{pid}/status").read_text()
        peaks.append(int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1)) / 1024)
    return max(peaks)


class Load(NamedTuple):
    """What one wrk run measured."""

    rps: float
    p50_ms: float
    requests: int


def wrk(url, connections, seconds, headers=()):
    """Requests per second, p50 latency and requests served of one wrk run; None if any answer was not 2xx."""
    command = ["wrk", f"-t{min(connections, 2)}", f"-c{connections}", f"-d{seconds}s", "--latency", url]
    for header in headers:
        command += ["-H", header]
    output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    if "Non-2xx or 3xx responses" in output or "Socket errors" in output:
        return None
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1))
    value, unit = re.search(r"\s50%\s+([\d.]+)(us|ms|s)\b", output).groups()
    requests = int(re.search(r"(\d+) requests in", output).group(1))
    return Load(rps, float(value) * {"us": 0.001, "ms": 1, "s": 1000}[unit], requests)


def run_options(description, memory=False):
    """`--seconds` and `--rounds`, as every benchmark here takes them (and, with `memory`, `--memory-requests`)."""
    parser = argparse.ArgumentParser(description=description.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=3, help="length of each wrk run")
    parser.add_argument("--rounds", type=int, default=5, help="rounds, alternating the order of targets")
    if memory:
        parser.add_argument(
            "--memory-requests", type=int, default=10_000, help="mixed requests after the memory warm-up"
        )
    return parser.parse_args()


def portal_variables(folder, production, **extra):
    """A bench portal's environment: `portal_environment`, over the store at `production` as its production,
    the cache off, its data in `folder`; then `extra`."""
    return portal_environment(
        PETSTORE_PRODUCTION_URL=production + "/v1",
        PETSTORE_PRODUCTION_KEY=KEY,
        PETPORTAL_SECRET_KEY=secrets.token_urlsafe(32),
        PETPORTAL_HTTPS="0",
        PETPORTAL_DATABASE_URL=f"sqlite:///{folder / 'portal.sqlite'}",
        PETPORTAL_CACHE_SECONDS="0",
        **extra,
    )


def seeded_store(folder, name):
    """The environment of a reference store keeping 100 sample animals in `folder`/`name`.sqlite."""
    env = {**os.environ, "PETSTORE_API_KEYS": KEY, "PETSTORE_DATABASE_URL": f"sqlite:///{folder / name}.sqlite"}
    subprocess.run(
        [sys.executable, "-m", "flask", "--app", "petportal.store", "seed", "--count", "100"],
        cwd=PROJECT_ROOT,
        env=env,
        check=True,
        capture_output=True,
    )
    return env


def main():
    args = run_options(__doc__, memory=True)
    folder = Path(tempfile.mkdtemp(prefix="petportal-bench-"))
    store_env, slow_env = seeded_store(folder, "store"), seeded_store(folder, "slow")

    with ExitStack() as stack:
        store, _ = stack.enter_context(
            gunicorn("petportal.store:create_app()", store_env, STORE_WORKERS, STORE_THREADS)
        )
        slow, _ = stack.enter_context(gunicorn("bench.slow_store:app", slow_env, 1, 32))
        portal_env = portal_variables(
            folder,
            store,
            PETSTORE_STAGING_URL=slow + "/v1",
            PETSTORE_STAGING_KEY=KEY,
            PETPORTAL_UPSTREAM_POOL_SIZE=str(PORTAL_THREADS),
            # The bench's admin previews staging; it measures pages, not the second factor.
            PETPORTAL_REQUIRE_ADMIN_MFA="0",
        )
        prepare_portal(portal_env, [("bench", "admin", ADMIN_PASSWORD)])
        portal_config = ["-c", "gunicorn.conf.py"]
        portal, portal_master = stack.enter_context(
            gunicorn("app:app", portal_env, PORTAL_WORKERS, PORTAL_THREADS, portal_config)
        )
        bare, _ = stack.enter_context(
            gunicorn("bench.bare_app:app", portal_env, PORTAL_WORKERS, PORTAL_THREADS, portal_config)
        )
        cached, cached_master = stack.enter_context(
            gunicorn(
                "app:app", {**portal_env, "PETPORTAL_CACHE_SECONDS": "2"}, PORTAL_WORKERS, PORTAL_THREADS, portal_config
            )
        )
        urls = {
            "store": lambda limit: f"{store}/v1/pets?limit={limit}",
            "portal": lambda limit: f"{portal}/animals?limit={limit}",
            "bare": lambda limit: f"{bare}/bare?limit={limit}",
            "cached": lambda limit: f"{cached}/animals?limit={limit}",
        }
        print_settings(args)
        for target in TARGETS:  # warm every server, its pools and its caches
            wrk(urls[target](20), 8, 1, headers=auth_header(target))
        results = {}
        for round_number in range(args.rounds):
            order = TARGETS if round_number % 2 == 0 else tuple(reversed(TARGETS))
            for target in order:
                for connections in CONCURRENCY:
                    for limit in LIMITS:
                        measured = wrk(urls[target](limit), connections, args.seconds, headers=auth_header(target))
                        if measured is None:
                            raise SystemExit(f"discarded: {target} answered something other than 2xx")
                        results.setdefault((target, connections, limit), []).append(measured)
        medians = {
            key: (statistics.median(run.rps for run in runs), statistics.median(run.p50_ms for run in runs))
            for key, runs in results.items()
        }
        rss = max(worker_peak_rss_mb(portal_master), worker_peak_rss_mb(cached_master))
        slow_effect = slow_environment_effect(portal, args.seconds, medians)
        print_report(medians, results, rss, slow_effect)
    print_memory_section(args.memory_requests)


def auth_header(target):
    return [f"Authorization: Bearer {KEY}"] if target == "store" else []


def slow_environment_effect(portal, seconds, medians):
    """An admin previewing the 2 s staging store under load, while customers load production pages."""
    admin = logged_in(portal, "bench", ADMIN_PASSWORD)
    page = admin.get(f"{portal}/admin/environment").text
    token = csrf_token(page)
    admin.post(f"{portal}/admin/environment/preview", data={"environment": "staging", "csrf_token": token})
    cookie = f"Cookie: session={admin.cookies['session']}"
    slow_run = subprocess.Popen(
        ["wrk", "-t2", "-c8", f"-d{seconds + 2}s", "--timeout", "10s", f"{portal}/animals?limit=20", "-H", cookie],
        stdout=subprocess.PIPE,
        text=True,
    )
    time.sleep(1)
    during = wrk(f"{portal}/animals?limit=20", 8, seconds)
    slow_output = slow_run.communicate()[0]
    slow_rps = float(re.search(r"Requests/sec:\s+([\d.]+)", slow_output).group(1))
    return {"baseline": medians[("portal", 8, 20)][0], "during": during.rps if during else None, "slow_rps": slow_rps}


def print_memory_section(requests):
    """One worker's RSS after a warm-up and after `requests` mixed requests, by `python -m bench.memory` (which
    builds on this module's servers) in a process of its own."""
    print(f"\n## Memory: one portal worker under {requests:,} mixed requests (python -m bench.memory)\n", flush=True)
    warmup, every = min(1_000, requests), max(requests // 10, 1)
    command = ["-m", "bench.memory", "--requests", str(requests), "--warmup", str(warmup), "--every", str(every)]
    subprocess.run([sys.executable, *command], cwd=PROJECT_ROOT, check=True)


def machine():
    """This machine, as every benchmark prints it first."""
    cpu = re.search(r"model name\s*:\s*(.*)", Path("/proc/cpuinfo").read_text())
    return (
        f"machine: {os.cpu_count()} cores, {cpu.group(1) if cpu else platform.processor()}, "
        f"Python {platform.python_version()}, {platform.system()} {platform.release()}"
    )


def print_settings(args):
    print(machine())
    print(f"store: gunicorn gthread, {STORE_WORKERS} workers x {STORE_THREADS} threads, SQLite, 100 animals")
    print(
        f"portal and bare render: gunicorn.conf.py (gthread, preload, keep-alive 5), "
        f"{PORTAL_WORKERS} workers x {PORTAL_THREADS} threads, upstream pool {PORTAL_THREADS}; cached: 2 s micro-cache"
    )
    print(f"load: wrk, {args.seconds} s per run, {args.rounds} rounds alternating the order; all on loopback\n")


def round_ratios(results, over, under, connections, limit, field):
    """One ratio per round, each from the two runs of that round (the targets alternate within a round)."""
    return [
        getattr(top, field) / getattr(bottom, field)
        for top, bottom in zip(results[(over, connections, limit)], results[(under, connections, limit)], strict=True)
    ]


def print_report(medians, results, rss, slow):
    print("| target | c | limit | req/s (median) | p50 ms (median) |")
    print("|---|---:|---:|---:|---:|")
    for (target, connections, limit), (rps, p50) in sorted(
        medians.items(), key=lambda item: (item[0][1], item[0][2], TARGETS.index(item[0][0]))
    ):
        print(f"| {target} | {connections} | {limit} | {rps:,.0f} | {p50:.2f} |")
    print("\nAgainst the reference store's own JSON endpoint; the median of the per-round ratios (min-max):\n")
    print("| ratio | limit 20 | limit 100 | target |")
    print("|---|---:|---:|---|")
    rows = [
        ("portal p50 / store p50, c=1, cache off", ("portal", "store", 1, "p50_ms"), "<= 2.5"),
        ("bare render p50 / store p50, c=1 (no upstream call)", ("bare", "store", 1, "p50_ms"), "reference"),
        ("portal rps / store rps, c=8, cache off", ("portal", "store", 8, "rps"), ">= 0.40"),
        ("bare render rps / store rps, c=8 (no upstream call)", ("bare", "store", 8, "rps"), "reference"),
        ("cached portal rps / store rps, c=8", ("cached", "store", 8, "rps"), ">= 3"),
    ]
    for label, (over, under, connections, field), target in rows:
        cells = []
        for limit in LIMITS:
            ratios = round_ratios(results, over, under, connections, limit, field)
            cells.append(f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})")
        print(f"| {label} | {cells[0]} | {cells[1]} | {target} |")
    print(f"| peak RSS per portal worker (MB) | {rss:.0f} | | <= 80 |")
    during = f"{slow['during']:,.0f}" if slow["during"] else "discarded (non-2xx)"
    print(
        f"\nslow environment: while an admin previews a staging store that takes 2 s (8 connections, "
        f"{slow['slow_rps']:.1f} req/s), customers' /animals?limit=20 at c=8 serves {during} req/s "
        f"(alone: {slow['baseline']:,.0f} req/s)"
    )


if __name__ == "__main__":
    main()
