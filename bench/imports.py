"""Bulk import throughput, against the reference store's own createPet rate in the same run.

    python -m bench.imports [--rows 500] [--rounds 3]

Starts, on loopback, under gunicorn: the reference store, and the portal (gunicorn.conf.py, SQLite, the
embedded runner). Each round, alternating the order: the store alone takes `rows` createPet calls,
IMPORT_CONCURRENCY (the portal's setting) at a time as an import sends them; then the portal previews and
imports a file of `rows` animals. Prints rows per second for both, their ratio, the preview's time, and the
list page's latency while an import runs.
"""

import argparse
import io
import os
import secrets
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import requests

from bench.servers import KEY, STORE_THREADS, STORE_WORKERS, gunicorn, machine, portal_variables
from petportal.config import IMPORT_CONCURRENCY
from tests.support.portal import csrf_token, logged_in, prepare_portal

STAFF_PASSWORD = secrets.token_urlsafe(12)


def options():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=500, help="animals per import (at most 1,000)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, alternating which goes first")
    return parser.parse_args()


def store_alone(store, rows, round_number):
    """Seconds the store takes for `rows` createPet calls, IMPORT_CONCURRENCY at a time."""
    session = requests.Session()
    session.mount("http://", requests.adapters.HTTPAdapter(pool_maxsize=IMPORT_CONCURRENCY))
    headers = {"Authorization": f"Bearer {KEY}"}

    def create(number):
        payload = {"name": f"Direct {round_number}-{number}", "categoryId": 1}
        answer = session.post(f"{store}/v1/pets", json=payload, headers=headers, timeout=10)
        answer.raise_for_status()

    started = time.perf_counter()
    with ThreadPoolExecutor(IMPORT_CONCURRENCY) as pool:
        list(pool.map(create, range(rows)))
    return time.perf_counter() - started


def portal_import(portal, browser, rows, round_number):
    """(seconds to upload and preview, seconds from start to done, list page p50 ms while it ran)."""
    content = "name,categoryId,status\n" + "".join(f"Import {round_number}-{n},1,available\n" for n in range(rows))
    token = csrf_token(browser.get(f"{portal}/animals/import").text)
    started = time.perf_counter()
    answer = browser.post(
        f"{portal}/animals/import",
        data={"csrf_token": token},
        files={"file": ("bench.csv", io.BytesIO(content.encode()))},
        allow_redirects=False,
    )
    path = answer.headers["Location"]
    page = browser.get(f"{portal}{path}").text
    previewed = time.perf_counter() - started
    token = csrf_token(page)
    started = time.perf_counter()
    browser.post(f"{portal}{path}/start", data={"csrf_token": token}, allow_redirects=False)
    pages = []
    while True:
        progress = browser.get(f"{portal}{path}.json").json()
        if progress["state"] not in ("queued", "running"):
            break
        before = time.perf_counter()
        requests.get(f"{portal}/animals", timeout=10).raise_for_status()
        pages.append((time.perf_counter() - before) * 1000)
    elapsed = time.perf_counter() - started
    if progress != {"state": "done", "total": rows, "created": rows, "failed": 0, "unknown": 0}:
        raise SystemExit(f"discarded: the import ended as {progress}")
    return previewed, elapsed, statistics.median(pages) if pages else float("nan")


def idle_page_ms(portal, count=50):
    timings = []
    for _ in range(count):
        before = time.perf_counter()
        requests.get(f"{portal}/animals", timeout=10).raise_for_status()
        timings.append((time.perf_counter() - before) * 1000)
    return statistics.median(timings)


def main():
    args = options()
    folder = Path(tempfile.mkdtemp(prefix="petportal-bench-imports-"))
    store_env = {**os.environ, "PETSTORE_API_KEYS": KEY, "PETSTORE_DATABASE_URL": f"sqlite:///{folder}/store.sqlite"}
    with ExitStack() as stack:
        store, _ = stack.enter_context(
            gunicorn("petportal.reference_store:create_app()", store_env, STORE_WORKERS, STORE_THREADS)
        )
        portal_env = portal_variables(folder, store)
        prepare_portal(portal_env, [("bench", "staff", STAFF_PASSWORD)])
        portal, _ = stack.enter_context(gunicorn("app:app", portal_env, 2, 8, ["-c", "gunicorn.conf.py"]))
        browser = logged_in(portal, "bench", STAFF_PASSWORD)
        print(machine())
        print(f"store: gunicorn gthread, {STORE_WORKERS} workers x {STORE_THREADS} threads, SQLite")
        print("portal: gunicorn.conf.py (2 workers x 8 threads), SQLite, the embedded import runner; all on loopback")
        idle = idle_page_ms(portal)
        alone, imported, previews, busy_pages = [], [], [], []
        for round_number in range(args.rounds):
            steps = ["store", "portal"] if round_number % 2 == 0 else ["portal", "store"]
            for step in steps:
                if step == "store":
                    alone.append(store_alone(store, args.rows, round_number))
                else:
                    previewed, elapsed, page_ms = portal_import(portal, browser, args.rows, round_number)
                    previews.append(previewed)
                    imported.append(elapsed)
                    busy_pages.append(page_ms)
        store_rate = args.rows / statistics.median(alone)
        import_rate = args.rows / statistics.median(imported)
        ratios = [a / i for a, i in zip(alone, imported, strict=True)]
        print(f"\n{args.rows} rows, {IMPORT_CONCURRENCY} at a time; median of {args.rounds} rounds (min-max)\n")
        print("| measure | value |")
        print("|---|---:|")
        print(f"| store alone: createPet per second | {store_rate:.0f} |")
        print(f"| portal import: rows per second | {import_rate:.0f} |")
        print(f"| import of {args.rows} rows, start to done (s) | {statistics.median(imported):.2f} |")
        print(f"| import rate / store rate | {statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}) |")
        print(f"| upload and preview of {args.rows} rows (s) | {statistics.median(previews):.2f} |")
        print(f"| list page p50, idle (ms) | {idle:.1f} |")
        print(f"| list page p50, while an import runs (ms) | {statistics.median(busy_pages):.1f} |")


if __name__ == "__main__":
    main()
