"""What the benches share: the servers they start, with their settings, the load they put on them, and the lines
every bench prints first.

The reference store seeded with 100 animals (`seeded_store`) and a bench portal's environment over it
(`portal_variables`); one gunicorn server (`gunicorn`); the portal as production serves it under granian
(`granian_portal`) or under gunicorn.conf.py (`gunicorn_portal`), started at once by `start_servers`; a server's
workers (`workers`) and their CPU time; one wrk run (`wrk`); the options every bench takes (`run_options`); the
machine and the settings every bench prints first (`print_settings`).

Used by `python -m bench` (bench/__main__.py), bench/soak.py, bench/memory.py, bench/imports.py and
bench/observability.py; it imports none of them.
"""

import argparse
import os
import platform
import re
import secrets
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

from petportal.running.processes import free_port, stop, wait_for_port
from tests.support.portal import PROJECT_ROOT, portal_environment

KEY = secrets.token_urlsafe(24)
PORTAL_WORKERS, PORTAL_THREADS = 2, 8
STORE_WORKERS, STORE_THREADS = 2, 8
GUNICORN_SETTINGS = (
    f"gunicorn.conf.py (gthread, preload, keep-alive 5), {PORTAL_WORKERS} workers x {PORTAL_THREADS} threads"
)


def seeded_store(folder, name):
    """The environment of a reference store keeping 100 sample animals in `folder`/`name`.sqlite."""
    env = {**os.environ, "PETSTORE_API_KEYS": KEY, "PETSTORE_DATABASE_URL": f"sqlite:///{folder / name}.sqlite"}
    subprocess.run(
        [sys.executable, "-m", "flask", "--app", "petportal.reference_store", "seed", "--count", "100"],
        cwd=PROJECT_ROOT,
        env=env,
        check=True,
        capture_output=True,
    )
    return env


def portal_variables(folder, production, **extra):
    """A bench portal's environment: `portal_environment`, over the store at `production` as its production,
    the cache off, its data in `folder`; then `extra`."""
    env = portal_environment(
        PETSTORE_PRODUCTION_URL=production + "/v1",
        PETSTORE_PRODUCTION_KEY=KEY,
        PETPORTAL_SECRET_KEY=secrets.token_urlsafe(32),
        PETPORTAL_HTTPS="0",
        PETPORTAL_DATABASE_URL=f"sqlite:///{folder / 'portal.sqlite'}",
        PETPORTAL_CACHE_SECONDS="0",
        **extra,
    )
    # Traced only when a bench asks for it (OTEL_EXPORTER_OTLP_ENDPOINT in `extra`), whatever this shell says.
    return {name: value for name, value in env.items() if not name.startswith("OTEL_") or name in extra}


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


def granian_portal(env, folder=PROJECT_ROOT):
    """The portal as production serves it, from `folder`: what `flask --app app serve` runs
    (petportal/running/serve.py), started without the `flask serve` command, which names the installed package."""
    metrics = tempfile.mkdtemp(prefix="petportal-metrics-")  # as `flask serve` makes it; the server removes it
    environ = {**env, "PYTHONPATH": str(folder), "PROMETHEUS_MULTIPROC_DIR": metrics}
    # A checkout from before issue 41's layout has the command at petportal/production.py.
    new_layout = (Path(folder) / "petportal/running/serve.py").is_file()
    module = "petportal.running.serve" if new_layout else "petportal.production"
    return ["-m", module, "--app", "app"], environ, folder


def gunicorn_portal(app, env):
    """`app` under gunicorn.conf.py, as `gunicorn -c gunicorn.conf.py` serves the portal."""
    return ["-m", "gunicorn", "-c", "gunicorn.conf.py", app], env


def start_servers(stack, commands):
    """Start every `python <arguments> --bind 127.0.0.1:PORT --workers 2` of `commands` (name: (arguments, env[,
    folder to run in])) at once, each on a free port; {name: (origin, master process)} once all listen and have
    their workers. They are stopped when `stack` closes."""
    started, processes = {}, []
    stack.callback(lambda: stop(processes, seconds=30))
    for name, (arguments, env, *folder) in commands.items():
        port = free_port()
        bind = ["--bind", f"127.0.0.1:{port}", "--workers", str(PORTAL_WORKERS)]
        process = subprocess.Popen(
            [sys.executable, *arguments, *bind],
            cwd=folder[0] if folder else PROJECT_ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        processes.append(process)
        started[name] = (f"http://127.0.0.1:{port}", process)
    for origin, process in started.values():
        wait_for_port(int(origin.rsplit(":", 1)[1]), process, seconds=300)  # many start at once, on two cores
        workers(process, PORTAL_WORKERS, seconds=300)  # granian listens before its workers are forked
    return started


def workers(master, expected=None, seconds=60):
    """The process ids of a server master's workers: its child processes, forked by any of its threads (gunicorn's
    arbiter, or granian's server after `flask serve` replaced itself with it). With `expected`, wait until there
    are that many, and fail if there are more: a child that is not a worker would be counted as one."""
    deadline = time.monotonic() + seconds
    while True:
        children = [
            pid
            for task in Path(f"/proc/{master.pid}/task").iterdir()
            for pid in (task / "children").read_text().split()
        ]
        if expected is None or len(children) == expected:
            return children
        if len(children) > expected or time.monotonic() > deadline:
            raise RuntimeError(f"{master.args}: {len(children)} child processes, not the {expected} workers expected")
        time.sleep(0.1)


def workers_cpu_seconds(master):
    """CPU time (user + system) spent so far by a gunicorn master's workers, in seconds."""
    ticks = 0
    for pid in workers(master):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks += int(fields[11]) + int(fields[12])  # utime and stime: fields 14 and 15 of proc(5)
    return ticks / os.sysconf("SC_CLK_TCK")


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


def run_options(description, memory=False, more=None):
    """`--seconds` and `--rounds`, as every benchmark here takes them (and, with `memory`, `--memory-requests`;
    `more` adds a bench's own)."""
    parser = argparse.ArgumentParser(description=description.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=3, help="length of each wrk run")
    parser.add_argument("--rounds", type=int, default=5, help="rounds, alternating the order of targets")
    if memory:
        parser.add_argument(
            "--memory-requests", type=int, default=10_000, help="mixed requests after the memory warm-up"
        )
        parser.add_argument(
            "--smoke",
            action="store_true",
            help="check that it runs end to end, in seconds: one round of 1 s runs, no warm-up; its "
            "figures mean nothing",
        )
    if more:
        more(parser)
    return parser.parse_args()


def machine():
    """This machine, as every benchmark prints it first."""
    cpu = re.search(r"model name\s*:\s*(.*)", Path("/proc/cpuinfo").read_text())
    return (
        f"machine: {os.cpu_count()} cores, {cpu.group(1) if cpu else platform.processor()}, "
        f"Python {platform.python_version()}, {platform.system()} {platform.release()}"
    )


def print_settings(args, serving=()):
    """What was measured and how: the machine, the store, how the portal is served (`serving`, one line each;
    by default the portal under gunicorn.conf.py), and the load."""
    print(machine())
    print(f"store: gunicorn gthread, {STORE_WORKERS} workers x {STORE_THREADS} threads, SQLite, 100 animals")
    for line in serving or [f"portal: {GUNICORN_SETTINGS}, upstream pool {PORTAL_THREADS}"]:
        print(line)
    print(f"load: wrk, {args.seconds} s per run, {args.rounds} rounds alternating the order; all on loopback\n")
