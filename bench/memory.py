"""Memory of one portal worker under a mixed load: its RSS after a warm-up, and after 10,000 more requests.

    python -m bench.memory [--requests 10000] [--warmup 1000] [--every 1000] [--clients 4] [--cache-seconds 2]

Starts, on loopback, under gunicorn: the reference store seeded with 100 animals, and the portal as it is
served (gunicorn.conf.py) with one worker of 8 threads, its page cache at its default (2 s, in process).
A few clients, each with an anonymous visitor, a staff browser and an admin browser, send a mix of:
- anonymous lists, /animals with a varied status, limit, search and sort (the search text drawn from
  thousands, so the page cache sees many distinct keys, as it does from real visitors);
- anonymous animal pages, /animals/<id>, now and then with a filter to go back to;
- staff adding an animal: the form, then its POST with the form's submission and CSRF tokens, then the
  animal's page it leads to;
- staff importing a small CSV: the upload form, the upload, its preview, its start and its progress JSON;
- admin pages: /admin/environment, /admin/audit, /admin/users and /admin/status.
Every answer must be the one expected (a load of error pages would measure nothing). Prints the worker's
RSS (VmRSS, from /proc) after the warm-up and after every `every` requests, and the growth after the
warm-up in %: at most 5% is the target.
"""

from __future__ import annotations

import argparse
import io
import itertools
import random
import re
import secrets
import string
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import NamedTuple

import requests

from bench.servers import gunicorn, portal_variables, seeded_store, workers
from tests.support.portal import csrf_token, logged_in, prepare_portal

TARGET_GROWTH_PERCENT = 5.0
STAFF_PASSWORD = secrets.token_urlsafe(12)
ADMIN_PASSWORD = secrets.token_urlsafe(12)
SUBMISSION_PATTERN = re.compile(r'name="submission_token" (?:type="hidden" )?value="([^"]+)"')
STATUSES = ("", "available", "pending", "sold")
LIMITS = ("", "10", "20", "50", "100")
SORTS = ("", "id", "name", "category", "status")
# Search texts: two letters, 676 of them, so list pages alone can make tens of thousands of distinct queries.
SEARCHES = ["", *("".join(pair) for pair in itertools.product(string.ascii_lowercase, repeat=2))]
ADMIN_PAGES = ("/admin/environment", "/admin/audit", "/admin/users", "/admin/status")
# What share of the actions each kind is (an action is one to six requests).
MIX = (("list", 50), ("detail", 25), ("add", 8), ("import", 2), ("admin", 10), ("staff_list", 5))


class Memory(NamedTuple):
    """What one run measured: the RSS (MB) after the warm-up, then after each step of requests."""

    warmup_requests: int
    after_warmup_mb: float
    curve: list[tuple[int, float]]  # (requests after the warm-up, RSS MB)
    answers: Counter[str]

    @property
    def final_mb(self) -> float:
        return self.curve[-1][1] if self.curve else self.after_warmup_mb

    @property
    def growth_percent(self) -> float:
        return (self.final_mb / self.after_warmup_mb - 1) * 100


def rss_mb(pid: int | str) -> float:
    """The resident set (VmRSS) of process `pid`, in MB."""
    status = Path(f"/proc/{pid}/status").read_text()
    match = re.search(r"VmRSS:\s+(\d+) kB", status)
    assert match, f"no VmRSS for process {pid}"
    return int(match.group(1)) / 1024


class Unexpected(AssertionError):
    """The portal answered something the mix did not expect."""


class Client:
    """One simulated group of users: an anonymous visitor, a staff member and an admin, each with a browser."""

    def __init__(self, origin: str, seed: int, staff: tuple[str, str], admin: tuple[str, str]) -> None:
        self.origin = origin
        self.random = random.Random(seed)
        self.anonymous = requests.Session()
        self.staff = logged_in(origin, *staff)
        self.admin = logged_in(origin, *admin)
        self.ids: list[int] = []
        self.seed = seed
        self.added = 0

    def _get(self, browser: requests.Session, path: str, expect: int = 200) -> requests.Response:
        return self._check(browser.get(self.origin + path, timeout=30, allow_redirects=False), expect, path)

    def _post(self, browser: requests.Session, path: str, expect: int, **kwargs: object) -> requests.Response:
        answer = browser.post(self.origin + path, timeout=30, allow_redirects=False, **kwargs)  # type: ignore[arg-type]
        return self._check(answer, expect, path)

    @staticmethod
    def _check(answer: requests.Response, expect: int, path: str) -> requests.Response:
        if answer.status_code != expect:
            raise Unexpected(f"{path}: {answer.status_code}, expected {expect}")
        return answer

    def known_ids(self) -> list[int]:
        if not self.ids:
            page = self._get(self.anonymous, "/animals?limit=100").text
            self.ids = sorted({int(found) for found in re.findall(r'href="/animals/(\d+)', page)})
            assert self.ids, "the list shows no animal"
        return self.ids

    def _filter(self) -> str:
        values = {
            "status": self.random.choice(STATUSES),
            "limit": self.random.choice(LIMITS),
            "q": self.random.choice(SEARCHES),
            "sort": self.random.choice(SORTS),
        }
        query = "&".join(f"{name}={value}" for name, value in values.items() if value)
        return "?" + query if query else ""

    def list(self) -> int:
        self.anonymous.cookies.clear()  # a visitor without cookies, as most are: its page may be shared
        self._get(self.anonymous, "/animals" + self._filter())
        return 1

    def staff_list(self) -> int:
        self._get(self.staff, "/animals" + self._filter())
        return 1

    def detail(self) -> int:
        self.anonymous.cookies.clear()
        pet_id = self.random.choice(self.known_ids())
        back = self._filter() if self.random.random() < 0.3 else ""
        self._get(self.anonymous, f"/animals/{pet_id}{back}")
        return 1

    def add(self) -> int:
        page = self._get(self.staff, "/animals/new").text
        submission = SUBMISSION_PATTERN.search(page)
        assert submission, "no submission token on the add form"
        self.added += 1
        data = {
            "csrf_token": csrf_token(page),
            "submission_token": submission.group(1),
            "name": f"Memory {self.seed}-{self.added}",
            "category_id": str(self.random.randint(1, 5)),
            "status": self.random.choice(STATUSES),
        }
        answer = self._post(self.staff, "/animals/new", 303, data=data)
        self._get(self.staff, answer.headers["Location"])  # the new animal's page shows the flash
        return 3

    def import_(self) -> int:
        page = self._get(self.staff, "/animals/import").text
        self.added += 1
        rows = "".join(f"Imported {self.seed}-{self.added}-{n},1,available\n" for n in range(3))
        content = "name,categoryId,status\n" + rows
        answer = self._post(
            self.staff,
            "/animals/import",
            303,
            data={"csrf_token": csrf_token(page)},
            files={"file": ("memory.csv", io.BytesIO(content.encode()))},
        )
        path = answer.headers["Location"]
        preview = self._get(self.staff, path).text
        self._post(self.staff, f"{path}/start", 303, data={"csrf_token": csrf_token(preview)})
        self._get(self.staff, f"{path}.json")
        self._get(self.staff, path)
        return 5

    def admin_page(self) -> int:
        path = self.random.choice(ADMIN_PAGES)
        if path == "/admin/audit" and self.random.random() < 0.5:
            path += f"?page={self.random.randint(1, 5)}"
        self._get(self.admin, path)
        return 1


# The method of each kind of action (`import` is a keyword, and `admin` names the admin's browser).
MIX_METHODS = {
    "list": "list",
    "staff_list": "staff_list",
    "detail": "detail",
    "add": "add",
    "import": "import_",
    "admin": "admin_page",
}


def drive(clients: list[Client], count: int, answers: Counter[str]) -> int:
    """Send about `count` requests of the mix, the clients in parallel; the number sent."""
    sent = [0] * len(clients)
    lock = threading.Lock()
    share = -(-count // len(clients))

    def run(index: int) -> None:
        client = clients[index]
        kinds, weights = zip(*MIX, strict=True)
        while sent[index] < share:
            kind = client.random.choices(kinds, weights)[0]
            sent[index] += getattr(client, MIX_METHODS[kind])()
            with lock:
                answers[kind] += 1

    with ThreadPoolExecutor(len(clients)) as pool:
        list(pool.map(run, range(len(clients))))
    return sum(sent)


def measure(
    requests_after: int = 10_000,
    warmup: int = 1_000,
    every: int = 1_000,
    clients: int = 4,
    cache_seconds: str = "2",
    report=print,
) -> Memory:
    """Start a store and a one-worker portal, warm it up, send `requests_after` more requests of the mix;
    the worker's RSS after the warm-up and every `every` requests after it. `report` gets each line."""
    folder = Path(tempfile.mkdtemp(prefix="petportal-bench-memory-"))
    store_env = seeded_store(folder, "store")
    with ExitStack() as stack:
        store, _ = stack.enter_context(gunicorn("petportal.reference_store:create_app()", store_env, 1, 8))
        portal_env = {
            **portal_variables(folder, store, PETPORTAL_REQUIRE_ADMIN_MFA="0"),
            "PETPORTAL_CACHE_SECONDS": cache_seconds,
        }
        prepare_portal(portal_env, [("staff", "staff", STAFF_PASSWORD), ("boss", "admin", ADMIN_PASSWORD)])
        origin, master = stack.enter_context(gunicorn("app:app", portal_env, 1, 8, ["-c", "gunicorn.conf.py"]))
        (worker,) = workers(master, expected=1)  # the port answers before the worker is forked
        report(f"portal: gunicorn.conf.py, 1 worker x 8 threads, page cache {cache_seconds} s; {clients} clients")
        group = [Client(origin, seed, ("staff", STAFF_PASSWORD), ("boss", ADMIN_PASSWORD)) for seed in range(clients)]
        answers: Counter[str] = Counter()
        started = time.perf_counter()
        warmed = drive(group, warmup, answers)
        after_warmup = rss_mb(worker)
        report(f"after a warm-up of {warmed:,} requests: {after_warmup:.1f} MB")
        curve, done = [], 0
        while done < requests_after:
            done += drive(group, min(every, requests_after - done), answers)
            curve.append((done, rss_mb(worker)))
            report(f"  +{done:,} requests: {curve[-1][1]:.1f} MB ({time.perf_counter() - started:.0f} s)")
        return Memory(warmed, after_warmup, curve, answers)


def print_memory(memory: Memory, print_line=print) -> None:
    """The section `python -m bench` ends with."""
    print_line(
        f"| one portal worker's RSS (MB) | after a warm-up of {memory.warmup_requests:,} requests | "
        f"after {memory.curve[-1][0]:,} more | growth | target |"
    )
    print_line("|---|---:|---:|---:|---|")
    verdict = "ok" if memory.growth_percent <= TARGET_GROWTH_PERCENT else "OVER"
    print_line(
        f"| mixed load (list, detail, add, import, admin) | {memory.after_warmup_mb:.1f} | {memory.final_mb:.1f} | "
        f"{memory.growth_percent:+.1f}% | <= +{TARGET_GROWTH_PERCENT:.0f}% ({verdict}) |"
    )
    print_line("curve (requests after the warm-up: MB): " + ", ".join(f"{n:,}: {mb:.1f}" for n, mb in memory.curve))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000, help="requests after the warm-up")
    parser.add_argument("--warmup", type=int, default=1_000, help="requests of the warm-up")
    parser.add_argument("--every", type=int, default=1_000, help="measure the RSS every this many requests")
    parser.add_argument("--clients", type=int, default=4, help="clients sending at once")
    parser.add_argument("--cache-seconds", default="2", help="PETPORTAL_CACHE_SECONDS (0: cache off)")
    args = parser.parse_args()
    memory = measure(args.requests, args.warmup, args.every, args.clients, args.cache_seconds)
    print()
    print_memory(memory)
    print("actions: " + ", ".join(f"{kind} {count:,}" for kind, count in sorted(memory.answers.items())))


if __name__ == "__main__":
    main()
