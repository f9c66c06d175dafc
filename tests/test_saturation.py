"""Under load, a failing pet store cannot take the portal's threads: health checks stay fast."""

import http.client
import os
import subprocess
import sys
import threading
import time
from collections import Counter

import pytest

from petportal.running.processes import stop, wait_for_port

from support.helpers import PRODUCTION_KEY, SECRET_KEY
from support.portal import PROJECT_ROOT, portal_environment
from support.servers import FaultServer, answer, delay, free_port, reset

# 15 s: the store cycles through its five faults many times over; longer soaks: set the variable.
SOAK_SECONDS = float(os.environ.get("PETPORTAL_SOAK_SECONDS", "15"))
CONNECTIONS = 32


def worker_rss_kb(master_pid):
    """The resident memory of each gunicorn worker of `master_pid`, in KiB."""
    sizes = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as stat:
                if int(stat.read().rsplit(")", 1)[1].split()[1]) != master_pid:
                    continue
            with open(f"/proc/{pid}/status") as status:
                sizes += [int(line.split()[1]) for line in status if line.startswith("VmRSS:")]
        except (OSError, ValueError, IndexError):
            continue
    return sizes


@pytest.mark.slow
def test_a_store_cycling_through_failures_never_delays_healthz_past_a_second(tmp_path):
    with FaultServer() as store:
        store.cycle(
            delay(30, answer(200, [])),  # hangs past every deadline
            answer(503, {"message": "down"}),
            reset,
            answer(200, b"[{"),
            delay(0.3, answer(200, [])),
        )
        env = portal_environment(
            PETSTORE_PRODUCTION_URL=store.base_url,
            PETSTORE_PRODUCTION_KEY=PRODUCTION_KEY,
            PETPORTAL_SECRET_KEY=SECRET_KEY,
            PETPORTAL_HTTPS="0",
            PETPORTAL_UPSTREAM_TIMEOUT="2",
            PETPORTAL_CACHE_SECONDS="0",
            PETPORTAL_DATABASE_URL=f"sqlite:///{tmp_path / 'portal.sqlite'}",
        )
        subprocess.run(
            [sys.executable, "-m", "flask", "--app", "app", "init-db"],
            cwd=PROJECT_ROOT,
            env=env,
            check=True,
            capture_output=True,
        )
        port = free_port()
        portal = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py", "--bind", f"127.0.0.1:{port}", "app:app"],
            cwd=PROJECT_ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_for_port(port, portal)
            statuses, health = Counter(), []
            until = time.monotonic() + SOAK_SECONDS

            def load():
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                while time.monotonic() < until:
                    try:
                        connection.request("GET", "/animals")
                        response = connection.getresponse()
                        response.read()
                        statuses[response.status] += 1
                    except (OSError, http.client.HTTPException):
                        statuses["dropped"] += 1
                        connection.close()
                        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                connection.close()

            threads = [threading.Thread(target=load) for _ in range(CONNECTIONS)]
            for thread in threads:
                thread.start()
            time.sleep(min(5, SOAK_SECONDS / 4))
            rss_before = sum(worker_rss_kb(portal.pid))
            while time.monotonic() < until:
                started = time.monotonic()
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                connection.request("GET", "/healthz")
                status = connection.getresponse().status
                connection.close()
                health.append((status, time.monotonic() - started))
                time.sleep(0.2)
            for thread in threads:
                thread.join(30)
            rss_after = sum(worker_rss_kb(portal.pid))
        finally:
            stop([portal], seconds=30)
    slowest = max(seconds for _, seconds in health)
    print(
        f"soak: {SOAK_SECONDS:.0f} s, {CONNECTIONS} connections, pages {dict(statuses)}, "
        f"{len(health)} health checks, slowest {slowest * 1000:.0f} ms, "
        f"worker memory {rss_before // 1024} -> {rss_after // 1024} MB"
    )
    assert statuses[500] == 0 and statuses["dropped"] == 0
    assert set(statuses) <= {200, 502, 503}
    assert all(status == 200 for status, _ in health)
    assert slowest < 1.0
    assert rss_after - rss_before < 30 * 1024, "the workers' memory grew under the failing store"
