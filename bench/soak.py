"""A soak: the portal under `flask serve` for N minutes at a given concurrency, over a store with faults and outages.

    python -m bench --soak MINUTES [--connections 32]      (or python -m bench.soak --minutes M [--connections N])

Starts, on loopback: the reference store seeded with 100 animals under gunicorn, failing as bench/faulty_store.py
says (of every 20 answers, one past the portal's deadline, one 503, one reset, one broken off; and 10 s of every
minute out altogether); the portal under granian as production serves it (`flask --app app serve`: 2 workers of 8
threads, its page cache at its default, PETPORTAL_UPSTREAM_TIMEOUT=2). `connections` clients ask, each as fast as
it is answered, for lists (varied status, limit, search and sort), animal pages and /healthz; one of them is a
logged-in staff member's browser.

Prints each portal worker's RSS and open file descriptors at the start (after 10 s of load), after the first
minute and at the end, a line a minute between, and the answers by status. The target for an hour: RSS and
descriptors at most 10% above their values after the first minute; no 500, no dropped connection.
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import os
import random
import secrets
import string
import tempfile
import threading
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path
from typing import NamedTuple

from bench.memory import rss_mb
from bench.servers import granian_portal, gunicorn, portal_variables, seeded_store, start_servers, workers
from tests.support.portal import logged_in, prepare_portal

TARGET_GROWTH_PERCENT = 10.0
WARMUP_SECONDS = 10.0
STAFF_PASSWORD = secrets.token_urlsafe(12)
SEARCHES = ["", *("".join(pair) for pair in itertools.product(string.ascii_lowercase, repeat=2))]
STATUSES = ("", "available", "pending", "sold")


class Sample(NamedTuple):
    """One look at the portal's workers: when (seconds into the soak), and each worker's (RSS MB, open fds)."""

    seconds: float
    workers: dict[str, tuple[float, int]]


def open_descriptors(pid: str) -> int:
    """How many file descriptors process `pid` holds open."""
    return len(os.listdir(f"/proc/{pid}/fd"))


def sample(master, started: float) -> Sample:
    return Sample(
        time.monotonic() - started, {pid: (rss_mb(pid), open_descriptors(pid)) for pid in sorted(workers(master))}
    )


def page(rng: random.Random) -> str:
    """A page a visitor asks for: mostly lists, some animal pages, now and then the health check."""
    kind = rng.choices(("list", "detail", "health"), (70, 25, 5))[0]
    if kind == "detail":
        return f"/animals/{rng.randint(1, 100)}"
    if kind == "health":
        return "/healthz"
    query = {"status": rng.choice(STATUSES), "q": rng.choice(SEARCHES), "limit": rng.choice(("", "10", "20", "50"))}
    return "/animals?" + "&".join(f"{name}={value}" for name, value in query.items() if value)


class Load:
    """`connections` clients asking for pages until stopped; the answers counted by status ("dropped": none)."""

    def __init__(self, origin: str, connections: int) -> None:
        self.port = int(origin.rsplit(":", 1)[1])
        self.origin = origin
        self.answers: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._visit, args=(n,), daemon=True) for n in range(connections - 1)]
        self._threads.append(threading.Thread(target=self._staff, daemon=True))

    def _count(self, status: str) -> None:
        with self._lock:
            self.answers[status] += 1

    def _visit(self, seed: int) -> None:
        rng = random.Random(seed)
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        while not self._stop.is_set():
            try:
                connection.request("GET", page(rng))
                response = connection.getresponse()
                response.read()
                self._count(str(response.status))
            except (OSError, http.client.HTTPException):
                self._count("dropped")
                connection.close()
                connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        connection.close()

    def _staff(self) -> None:
        import requests

        rng = random.Random(-1)
        browser = None
        while browser is None and not self._stop.is_set():
            try:  # the login lands on the list, which the store's faults may make a 503: log in again
                browser = logged_in(self.origin, "staff", STAFF_PASSWORD)
            except (AssertionError, requests.RequestException):
                self._count("staff login retried")
        while browser is not None and not self._stop.is_set():
            try:
                self._count(str(browser.get(self.origin + page(rng), timeout=30).status_code))
            except requests.RequestException:
                self._count("dropped")

    def __enter__(self) -> Load:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(40)


def soak(minutes: float, connections: int, report=print) -> list[Sample]:
    """Run the soak; the samples: at the start, after each minute, at the end."""
    folder = Path(tempfile.mkdtemp(prefix="petportal-bench-soak-"))
    store_env = seeded_store(folder, "store")
    with ExitStack() as stack:
        store, _ = stack.enter_context(gunicorn("bench.faulty_store:app", store_env, 2, 16))
        portal_env = {
            **portal_variables(folder, store, PETPORTAL_UPSTREAM_TIMEOUT="2"),
            "PETPORTAL_CACHE_SECONDS": "2",
        }
        prepare_portal(portal_env, [("staff", "staff", STAFF_PASSWORD)])
        [(origin, master)] = start_servers(stack, {"soak": granian_portal(portal_env)}).values()
        report(
            f"soak: {minutes:g} min, {connections} connections; portal under granian, 2 workers x 8 threads, "
            "page cache 2 s, upstream timeout 2 s; store: of every 20 answers 1 slow (3 s), 1 503, 1 reset, "
            "1 broken off, and out (every connection reset) 10 s of every minute"
        )
        samples = []
        with Load(origin, connections) as load:
            started = time.monotonic()
            time.sleep(WARMUP_SECONDS)
            samples.append(sample(master, started))
            report(line("start", samples[-1], load.answers))
            end = started + minutes * 60
            minute = 1
            while time.monotonic() < end:
                time.sleep(max(0.0, min(started + minute * 60, end) - time.monotonic()))
                samples.append(sample(master, started))
                report(line(f"minute {minute}" if time.monotonic() < end - 1 else "end", samples[-1], load.answers))
                minute += 1
        report("answers: " + ", ".join(f"{status} {count:,}" for status, count in sorted(load.answers.items())))
        return samples


def line(label: str, taken: Sample, answers: Counter[str]) -> str:
    workers = "; ".join(f"worker {pid}: {rss:.1f} MB, {fds} fds" for pid, (rss, fds) in taken.workers.items())
    return f"{label:>9} ({taken.seconds:5.0f} s, {sum(answers.values()):,} answers): {workers}"


def print_verdict(samples: list[Sample], print_line=print) -> None:
    """Each worker's RSS and descriptors at the start, after the first minute and at the end, and the growth."""
    if len(samples) < 3:
        print_line("(shorter than two minutes: no growth after the first minute to report)")
        return
    first_minute, end = samples[1], samples[-1]
    print_line("| worker | RSS MB: start / 1 min / end | growth | fds: start / 1 min / end | growth | target |")
    print_line("|---|---|---:|---|---:|---|")
    for pid, (rss, fds) in end.workers.items():
        if pid not in first_minute.workers:
            print_line(f"| {pid} | (started after the first minute: a worker was replaced) | | | | |")
            continue
        rss_start, fds_start = samples[0].workers.get(pid, (float("nan"), 0))
        rss_minute, fds_minute = first_minute.workers[pid]
        rss_growth, fds_growth = (rss / rss_minute - 1) * 100, (fds / max(fds_minute, 1) - 1) * 100
        verdict = "ok" if max(rss_growth, fds_growth) <= TARGET_GROWTH_PERCENT else "OVER"
        print_line(
            f"| {pid} | {rss_start:.1f} / {rss_minute:.1f} / {rss:.1f} | {rss_growth:+.1f}% | "
            f"{fds_start} / {fds_minute} / {fds} | {fds_growth:+.1f}% | <= +{TARGET_GROWTH_PERCENT:.0f}% ({verdict}) |"
        )


def run(minutes: float, connections: int) -> None:
    """`python -m bench --soak MINUTES`."""
    samples = soak(minutes, connections, report=lambda text: print(text, flush=True))
    print()
    print_verdict(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=60, help="how long the soak lasts")
    parser.add_argument("--connections", type=int, default=32, help="clients asking at once")
    args = parser.parse_args()
    run(args.minutes, args.connections)


if __name__ == "__main__":
    main()
