"""What names chosen to be expensive for the key guard cost the animal list, beside plain names of the same length.

    python -m bench.guard [--requests 30]

Starts one reference store per kind of name on loopback (a process of its own, as a store is), each holding 100
names of 100 characters of that kind, and a portal over each (page cache off), in this process. Asks each portal
for `/animals?limit=100` in turn, after a warm-up, and prints the median time of a page of each kind and its ratio
to the plain names' (the target: at most 2).
"""

import argparse
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

from petportal import create_app
from petportal.extensions import db
from petportal.running.processes import free_port, stop, wait_for_port

NAMES, LENGTH = 100, 100
# Each kind: one name of LENGTH characters. The first is what issue 48's attacker found: every character expands
# 18-fold under NFKD, and a tag character made the old guard read each name, and the list, three times.
KINDS = {
    "plain": lambda n: f"Plain animal {n:03d} ".ljust(LENGTH, "x"),
    "U+FDFA and a tag": lambda n: "\ufdfa" * (LENGTH - 1) + "\U000e0041",
    "tag characters": lambda n: "".join(chr(0xE0041 + (n + i) % 26) for i in range(LENGTH)),
    "U+33AF (5 letters each)": lambda n: "\u33af" * LENGTH,
    "HTML escapes in escapes": lambda n: ("&amp;#x41;" * LENGTH)[:LENGTH],
    "percent escapes in escapes": lambda n: ("%2541" * LENGTH)[:LENGTH],
    "JSON escapes": lambda n: ("\\u0041" * LENGTH)[:LENGTH],
    "look-alikes": lambda n: ("\u0430\u0441\u0435\u043e\u0440\u0443\u0410\u0421" * LENGTH)[:LENGTH],
}


def store_of(folder, kind, key):
    """A reference store holding NAMES names of `kind`, started; returns its base URL and process."""
    port = free_port()
    env = {**os.environ, "PETSTORE_API_KEYS": key, "PETSTORE_DATABASE_URL": f"sqlite:///{folder / kind}.sqlite"}
    command = [sys.executable, "-m", "flask", "--app", "petportal.reference_store", "run", "--port", str(port)]
    store = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_port(port, store)
    origin = f"http://127.0.0.1:{port}"
    for n in range(NAMES):
        added = requests.post(
            f"{origin}/v1/pets",
            json={"name": KINDS[kind](n), "categoryId": 1, "status": "available"},
            headers={"Authorization": f"Bearer {key}"},
            timeout=10,
        )
        assert added.status_code == 201, added.text
    return f"{origin}/v1", store


def portal_over(folder, url, key):
    app = create_app(
        {
            "SECRET_KEY": secrets.token_urlsafe(32),
            "SQLALCHEMY_DATABASE_URI": f"sqlite:///{folder / 'portal'}-{secrets.token_hex(4)}.sqlite",
            "PETSTORE_ENVIRONMENTS": {"production": {"url": url, "key": key}, "staging": {"url": None, "key": None}},
            "HTTPS": False,
            "CACHE_SECONDS": 0,
        }
    )
    with app.app_context():
        db.create_all()
    return app.test_client()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=30, help="pages of each kind; the median is reported")
    args = parser.parse_args()
    key = secrets.token_urlsafe(24)
    with tempfile.TemporaryDirectory(prefix="petportal-guard-") as folder:
        stores, clients = [], {}
        for kind in KINDS:
            url, store = store_of(Path(folder), kind, key)
            stores.append(store)
            clients[kind] = portal_over(Path(folder), url, key)
        times = {kind: [] for kind in KINDS}
        for round_ in range(args.requests + 3):  # three rounds of warm-up; each round asks every kind once
            for kind, client in clients.items():
                started = time.perf_counter()
                page = client.get("/animals?limit=100")
                elapsed = (time.perf_counter() - started) * 1000
                assert page.status_code == 200, (kind, page.status_code)
                if round_ >= 3:
                    times[kind].append(elapsed)
        stop(stores)
    plain = statistics.median(times["plain"])
    print(f"| 100 names of 100 characters | ms per page (median of {args.requests}) | against plain (target <= 2) |")
    print("|---|---:|---:|")
    for kind, measured in times.items():
        print(f"| {kind} | {statistics.median(measured):.1f} | {statistics.median(measured) / plain:.2f} |")


if __name__ == "__main__":
    main()
