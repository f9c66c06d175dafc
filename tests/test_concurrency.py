"""200 submissions from 20 threads, double clicks mixed in and read timeouts injected upstream.

Every submission must end as exactly one of: created, failed with a message, or outcome unknown;
counted from what the store accepted, none may be duplicated and none lost.
"""

import io
import json
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from support.helpers import PASSWORDS, PRODUCTION_KEY, dispose_store, make_store, portal_config, submission_token
from support.portal import csrf_token
from support.scanning import FIGURES
from support.servers import serve

pytestmark = pytest.mark.slow

TIMEOUT = 1.0
SUBMISSIONS = 200
THREADS = 20


class FaultInjector:
    """Wraps the real store: names starting "slow" are stored but answered after the portal gave up;
    names starting "busy" are answered 503 without reaching the store, which the portal cannot tell from
    a gateway's 503 after the store added it. Records what was accepted."""

    def __init__(self, store):
        self.store = store
        self.accepted = Counter()
        self.lock = threading.Lock()

    def __call__(self, environ, start_response):
        if environ["REQUEST_METHOD"] != "POST":
            return self.store(environ, start_response)
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        name = json.loads(body)["name"]
        if name.startswith("busy"):
            start_response("503 Service Unavailable", [("Content-Type", "application/json")])
            return [b'{"code": "busy", "message": "try later", "status": 503}']
        environ["wsgi.input"] = io.BytesIO(body)
        captured = {}

        def remember(status, headers, exc_info=None):
            captured["status"] = status
            return start_response(status, headers, exc_info)

        answer = b"".join(self.store(environ, remember))
        if captured["status"].startswith("201"):
            with self.lock:
                self.accepted[name] += 1
        if name.startswith("slow"):
            time.sleep(TIMEOUT * 3)
        return [answer]


def classify(responses):
    """What one submission's responses (one, or two for a double click) told the user."""
    outcomes = set()
    for response in responses:
        if response.status_code == 303:
            outcomes.add(("created", response.headers["Location"]))
        elif response.status_code == 503 and "nothing was added" in response.text:
            outcomes.add(("failed", None))
        elif response.status_code == 502 and "cannot tell whether" in response.text:
            outcomes.add(("unknown", None))
        else:
            outcomes.add(("broken", response.status_code))
    return outcomes


def test_two_hundred_submissions_end_honestly_with_no_duplicate_and_none_lost(tmp_path, make_portal):
    store_app = make_store(tmp_path / "store.sqlite", [PRODUCTION_KEY])
    injector = FaultInjector(store_app)
    with serve(injector) as store_origin:
        # Twenty browsers log in as staff at once from one address, and every one may reach the store:
        # this test is about the submission protocol, not the login limits or the bulkhead.
        config = portal_config(
            tmp_path,
            store_origin + "/v1",
            None,
            UPSTREAM_TIMEOUT=TIMEOUT,
            UPSTREAM_CONCURRENCY=64,
            LOGIN_LIMIT_PER_ACCOUNT_ADDRESS="1000 per minute",
            LOGIN_LIMIT_PER_ACCOUNT="1000 per minute",
        )
        portal = make_portal.build(config)
        with serve(portal) as origin:
            local = threading.local()

            def browser():
                if not hasattr(local, "session"):
                    local.session = requests.Session()
                    token = csrf_token(local.session.get(f"{origin}/login").text)
                    local.session.post(
                        f"{origin}/login",
                        data={"username": "staff", "password": PASSWORDS["staff"], "csrf_token": token},
                    )
                return local.session

            def submit(number):
                kind = ("slow", "busy", "fine", "fine", "fine")[number % 5]
                name = f"{kind}-{number}"
                session = browser()
                form = session.get(f"{origin}/animals/new").text
                data = {
                    "csrf_token": csrf_token(form),
                    "submission_token": submission_token(form),
                    "name": name,
                    "category_id": "1",
                }
                clicks = 2 if number % 4 == 0 else 1
                if clicks == 1:
                    return name, [session.post(f"{origin}/animals/new", data=data, allow_redirects=False)]
                with ThreadPoolExecutor(2) as double_click:
                    return name, list(
                        double_click.map(
                            lambda _: session.post(f"{origin}/animals/new", data=data, allow_redirects=False), range(2)
                        )
                    )

            with ThreadPoolExecutor(THREADS) as pool:
                results = dict(pool.map(submit, range(SUBMISSIONS)))
    dispose_store(store_app)

    outcomes = {name: classify(responses) for name, responses in results.items()}
    FIGURES["submissions"] += len(outcomes)
    duplicates = sum(count - 1 for count in injector.accepted.values() if count > 1)
    lost = [
        name
        for name, seen in outcomes.items()
        if {kind for kind, _ in seen} == {"created"} and injector.accepted[name] != 1
    ]
    FIGURES["duplicates"] += duplicates
    FIGURES["lost"] += len(lost)
    told_twice = {name: seen for name, seen in outcomes.items() if len(seen) != 1}
    assert not told_twice, f"a submission told the user two different things: {told_twice}"
    kinds = Counter(next(iter(seen))[0] for seen in outcomes.values())
    assert "broken" not in kinds, kinds
    assert duplicates == 0
    assert lost == []
    assert all(injector.accepted[name] == 0 for name, seen in outcomes.items() if next(iter(seen))[0] == "failed")
    told = {name: next(iter(seen))[0] for name, seen in outcomes.items()}
    # Only 201, 400 and 401 are certain answers to createPet: a 503 may follow the store's adding it.
    assert {told[name] for name in told if name.startswith("busy")} == {"unknown"}
    assert {told[name] for name in told if name.startswith("slow")} == {"unknown"}
    # A healthy store's answer can still miss the timeout on a stalled machine; that is reported honestly.
    assert {told[name] for name in told if name.startswith("fine")} <= {"created", "unknown"}
    assert kinds["created"] > 0, kinds
