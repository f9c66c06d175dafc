"""Side-by-side benchmark of the pet store and the portal under granian and gunicorn, on this machine.

    python -m bench [--seconds 3] [--rounds 5] [--memory-requests 10000] [--figures] [--checkout NAME=FOLDER ...]
    [--smoke]
    python -m bench --soak MINUTES [--connections 32]

Needs wrk (apt-get install wrk). Starts, on loopback: the reference store seeded with 100 animals under
gunicorn; a slow copy of it (2 s per answer) as the staging environment; then under granian (`flask --app
app serve`, the production server) and under gunicorn (`gunicorn.conf.py`), each with 2 workers: the portal
with the cache off, the portal with its 2 s cache, and the floor (bench/floor_app.py, 9 kB of constant
bytes: what the server does with no work at all). Under granian also the portal traced, its spans sent
over OTLP/HTTP to a sink in this process, and the same portal asked for German pages (`Accept-Language: de`)
beside its English ones (the templates' own text, with no catalog): what translation costs; and a bare Flask page
over the same store (bench/bare_page.py): the least an uncached page costs with this stack. Prints medians,
the target ratios for each server, peak RSS per portal worker, what a slow environment does to the other
pages, and the CPU time per request of the store's workers and of each server's own. Last, on servers of its own, one
portal worker's RSS after a warm-up and after 10,000 mixed requests (bench/memory.py).

`--checkout NAME=FOLDER` also serves the portal of another checkout (another commit: `git worktree add`, with its
catalogs compiled) under granian, cache off and cached, as "portal NAME" and "cached NAME", loaded in the same
rounds: issue 41's four figures are printed for each, side by side. `--figures` loads only what those figures need
(no gunicorn, traced or German portal, no slow environment, no memory section).

`--soak MINUTES` runs only the soak (bench/soak.py): the portal under `flask serve` for that long at `--connections`
clients, over a store with faults and outages, with each worker's RSS and open file descriptors at the start, after
the first minute and at the end.
"""

import argparse
import re
import secrets
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import NamedTuple

from bench import soak
from bench.servers import (
    GUNICORN_SETTINGS,
    KEY,
    PORTAL_THREADS,
    PORTAL_WORKERS,
    STORE_THREADS,
    STORE_WORKERS,
    granian_portal,
    gunicorn,
    gunicorn_portal,
    portal_variables,
    print_settings,
    run_options,
    seeded_store,
    start_servers,
    workers,
    workers_cpu_seconds,
    wrk,
)
from tests.support.portal import PROJECT_ROOT, csrf_token, logged_in, prepare_portal

ADMIN_PASSWORD = secrets.token_urlsafe(12)
SERVERS = ("granian", "gunicorn")
# What each target is loaded with, as (connections, limit); the floor has no limit. Only what the ratios
# need, so that the default run (3 s per run, 5 rounds, then the memory section) stays under 8 minutes.
PLAN = {
    "store": ((1, 20), (8, 20), (1, 100), (8, 100)),
    "portal granian": ((1, 20), (8, 20), (1, 100), (8, 100)),
    "cached granian": ((8, 20), (8, 100)),
    "floor granian": ((8, None),),
    "bare granian": ((1, 20), (8, 20)),
    "traced granian": ((1, 20), (8, 20)),
    "german granian": ((1, 20), (8, 20)),
    "portal gunicorn": ((1, 20), (8, 20)),
    "cached gunicorn": ((8, 20),),
    "floor gunicorn": ((8, None),),
}
TARGETS = tuple(PLAN)


def worker_peak_rss_mb(master):
    """The largest peak resident set (VmHWM) among a gunicorn master's workers, in MB."""
    peaks = []
    for pid in workers(master):
        status = Path(f"/proc/{pid}/status").read_text()
        peaks.append(int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1)) / 1024)
    return max(peaks)


def _figures_options(parser):
    parser.add_argument("--figures", action="store_true", help="load only what issue 41's four figures need")
    parser.add_argument(
        "--checkout",
        type=checkout_option,
        action="append",
        default=[],
        metavar="NAME=FOLDER",
        help="also serve the portal of the checkout in FOLDER, as 'portal NAME' and 'cached NAME'",
    )


def _soak_options(parser):
    parser.add_argument(
        "--soak", type=float, metavar="MINUTES", help="run only the soak, this long, over a store with faults"
    )
    parser.add_argument("--connections", type=int, default=32, help="the soak's clients asking at once")


# The targets issue 41's four figures need (`--figures`), and what each checkout adds (`--checkout`).
FIGURES_PLAN = {
    target: PLAN[target] for target in ("portal granian", "cached granian", "floor granian", "bare granian")
}
CHECKOUT_PLAN = {"portal {name}": ((1, 20), (8, 20)), "cached {name}": ((8, 20),)}


def checkout_option(text):
    """`NAME=FOLDER` of `--checkout`: a name and another checkout's folder."""
    name, _, folder = text.partition("=")
    if not name or not (Path(folder) / "app.py").is_file():
        raise argparse.ArgumentTypeError(f"{text!r}: NAME=FOLDER, where FOLDER is a checkout with app.py")
    return name, Path(folder).resolve()


def main():
    args = run_options(__doc__, memory=True, more=lambda parser: (_figures_options(parser), _soak_options(parser)))
    if args.soak:
        soak.run(args.soak, args.connections)
        return
    checkouts = dict(args.checkout)
    plan = dict(FIGURES_PLAN if args.figures else PLAN)
    for name in checkouts:
        plan |= {target.format(name=name): runs for target, runs in CHECKOUT_PLAN.items()}
    if args.smoke:
        args.seconds, args.rounds = 1, 1
    folder = Path(tempfile.mkdtemp(prefix="petportal-bench-"))
    with ThreadPoolExecutor() as seeding:  # each seed is a process of its own
        store_env, slow_env = seeding.map(lambda name: seeded_store(folder, name), ("store", "slow"))

    with ExitStack() as stack:
        store, store_master = stack.enter_context(
            gunicorn("petportal.reference_store:create_app()", store_env, STORE_WORKERS, STORE_THREADS)
        )
        slow, _ = stack.enter_context(gunicorn("bench.slow_store:app", slow_env, 1, 32))
        sink = stack.enter_context(trace_sink())
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
        cached_env = {**portal_env, "PETPORTAL_CACHE_SECONDS": "2"}
        traced_env = {**portal_env, "OTEL_EXPORTER_OTLP_ENDPOINT": sink.origin}
        commands = {
            "portal granian": granian_portal(portal_env),
            "cached granian": granian_portal(cached_env),
            "floor granian": (["-m", "bench.floor_server"], portal_env),
            "bare granian": (["-m", "bench.floor_server", "--app", "bench.bare_page:app"], portal_env),
            "traced granian": granian_portal(traced_env),
            "portal gunicorn": gunicorn_portal("app:app", portal_env),
            "cached gunicorn": gunicorn_portal("app:app", cached_env),
            "floor gunicorn": gunicorn_portal("bench.floor_app:app", portal_env),
        }
        commands = {name: command for name, command in commands.items() if name in plan}
        for name, folder in checkouts.items():
            commands[f"portal {name}"] = granian_portal(portal_env, folder)
            commands[f"cached {name}"] = granian_portal(cached_env, folder)
        servers = start_servers(stack, commands)
        # Each target's (origin, master process); German pages come from the same portal as the English ones.
        targets = {"store": (store, store_master)} | servers | {"german granian": servers["portal granian"]}
        targets = {name: target for name, target in targets.items() if name in plan or name == "store"}
        origins = {name: origin for name, (origin, _) in targets.items()}
        masters = {name: master for name, (_, master) in targets.items()}
        print_settings(args, serving_lines())
        for target in () if args.smoke else plan:  # warm every server, its pools and its caches
            wrk(url(origins, target, 20), 8, 1, headers=auth_header(target))
        results, cpu = {}, {}

        def run(target, connections, limit):
            before = workers_cpu_seconds(store_master), workers_cpu_seconds(masters[target])
            measured = wrk(url(origins, target, limit), connections, args.seconds, headers=auth_header(target))
            after = workers_cpu_seconds(store_master), workers_cpu_seconds(masters[target])
            if measured is None:
                raise SystemExit(f"discarded: {target} answered something other than 2xx")
            results.setdefault((target, connections, limit), []).append(measured)
            cpu.setdefault((target, connections, limit), []).append(
                [(end - start) * 1000 / max(measured.requests, 1) for start, end in zip(before, after, strict=True)]
            )

        for round_number in range(args.rounds):
            order = tuple(plan) if round_number % 2 == 0 else tuple(reversed(plan))
            for target in order:
                for connections, limit in plan[target]:
                    run(target, connections, limit)
        rss = {name: worker_peak_rss_mb(master) for name, (_, master) in servers.items()}
        if not args.figures:
            slow_effect = slow_environment_effect(servers["portal granian"][0], args.seconds, results)
            print_report(results, rss, slow_effect, sink.exports)
            print_cpu(cpu)
        print_figures(results, rss, ["granian", *checkouts])
    if not args.figures:
        print_memory_section(args.memory_requests)


def url(origins, target, limit):
    """The page `target` is loaded on: the store's JSON list, the portal's list page, the floor's one page."""
    origin = origins[target]
    if target == "store":
        return f"{origin}/v1/pets?limit={limit}"
    if target.startswith("floor"):
        return f"{origin}/"
    if target.startswith("bare"):
        return f"{origin}/animals"  # always 20 animals
    return f"{origin}/animals?limit={limit}"


class TraceSink(NamedTuple):
    """The OTLP/HTTP receiver the traced portal exports to, and the count of exports it took."""

    origin: str
    exports: list[int]


@contextmanager
def trace_sink():
    """An OTLP/HTTP endpoint on a free loopback port, in a thread of this process: it answers 200 to every
    POST /v1/traces and discards the spans, as a collector with nothing behind it would."""
    exports = [0]

    class Receiver(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # the exporter keeps its connection

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            known = self.path == "/v1/traces"
            exports[0] += known
            self.send_response(200 if known else 404)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format, *args):
            """Silent: the bench prints its own lines."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield TraceSink(f"http://127.0.0.1:{server.server_address[1]}", exports)
    finally:
        server.shutdown()
        server.server_close()


def auth_header(target):
    """What a target's requests carry besides the URL: the store's key; German for the German visitor."""
    if target == "store":
        return [f"Authorization: Bearer {KEY}"]
    return ["Accept-Language: de"] if target.startswith("german") else []


def slow_environment_effect(portal, seconds, results):
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
    baseline = statistics.median(run.rps for run in results[("portal granian", 8, 20)])
    return {"baseline": baseline, "during": during.rps if during else None, "slow_rps": slow_rps}


def print_memory_section(requests):
    """One worker's RSS after a warm-up and after `requests` mixed requests, by `python -m bench.memory` (which
    starts its servers with bench/servers.py, as this bench does) in a process of its own."""
    print(f"\n## Memory: one portal worker under {requests:,} mixed requests (python -m bench.memory)\n", flush=True)
    warmup, every = min(1_000, requests), max(requests // 10, 1)
    command = ["-m", "bench.memory", "--requests", str(requests), "--warmup", str(warmup), "--every", str(every)]
    subprocess.run([sys.executable, *command], cwd=PROJECT_ROOT, check=True)


def serving_lines():
    """How this bench serves the portal and the floor."""
    return [
        f"granian: flask --app app serve --workers {PORTAL_WORKERS} (petportal/running/serve.py: "
        f"{PORTAL_WORKERS} workers x {PORTAL_THREADS} blocking threads); floor: bench/floor_server.py, same settings",
        f"gunicorn: {GUNICORN_SETTINGS}; floor: bench.floor_app:app under the same",
        f"portal: cache off, upstream pool {PORTAL_THREADS}; cached: 2 s micro-cache; traced (granian): cache off, "
        "spans over OTLP/HTTP to a sink in the bench's process; floor: 9 kB of constant HTML (bench/floor_app.py)",
        "german (granian): the portal, cache off, its pages asked for in German; against its English pages (the "
        "templates' own text, no catalog)",
        "bare (granian): bench/bare_page.py, a bare Flask app making one listPets call and a 20-row page of the list "
        "page's size, through bench/floor_server.py",
    ]


# Each ratio divides a target's run by another's of the same round: (label, over, under, connections, the
# limit of the run under ("same": the column's; None: the floor's one page), field, target). "{server}" is
# each column's server; a cell whose runs the plan does not make is left empty.
RATIOS = (
    # The figures issue 41 keeps (with the cached portal over the floor, and peak RSS): the portal over the bare page.
    ("portal p50 / bare page p50, c=1, cache off", "portal {server}", "bare {server}", 1, "same", "p50_ms", "report"),
    ("portal rps / bare page rps, c=8, cache off", "portal {server}", "bare {server}", 8, "same", "rps", "report"),
    # The targets that divided by the store were withdrawn by issue 41 (they measure the machine): shown only.
    ("portal p50 / store p50, c=1, cache off", "portal {server}", "store", 1, "same", "p50_ms", "report"),
    ("portal rps / store rps, c=8, cache off", "portal {server}", "store", 8, "same", "rps", "report"),
    (
        "bare Flask page p50 / store p50, c=1 (the least a page over the store costs)",
        "bare {server}",
        "store",
        1,
        "same",
        "p50_ms",
        "report",
    ),
    (
        "bare Flask page rps / store rps, c=8 (the least a page over the store costs)",
        "bare {server}",
        "store",
        8,
        "same",
        "rps",
        "report",
    ),
    ("cached portal rps / store rps, c=8", "cached {server}", "store", 8, "same", "rps", "report"),
    (
        "cached portal rps / floor rps, c=8 (the server's constant 9 kB)",
        "cached {server}",
        "floor {server}",
        8,
        None,
        "rps",
        ">= 0.5",
    ),
    (
        "German page p50 / English page p50, c=1 (translation's cost)",
        "german {server}",
        "portal {server}",
        1,
        "same",
        "p50_ms",
        "<= 1.05",
    ),
    (
        "German page rps / English page rps, c=8 (translation's cost)",
        "german {server}",
        "portal {server}",
        8,
        "same",
        "rps",
        ">= 0.95",
    ),
    (
        "traced portal p50 / portal p50, c=1 (tracing's cost)",
        "traced {server}",
        "portal {server}",
        1,
        "same",
        "p50_ms",
        "report",
    ),
    (
        "traced portal rps / portal rps, c=8 (tracing's cost)",
        "traced {server}",
        "portal {server}",
        8,
        "same",
        "rps",
        "report",
    ),
)
COLUMNS = (("granian", 20), ("granian", 100), ("gunicorn", 20))


def ratio_cell(results, over, under, connections, under_limit, field, limit):
    """The median of the per-round ratios with their min-max, or "" when the plan makes no such runs."""
    keys = (over, connections, limit), (under, connections, limit if under_limit == "same" else under_limit)
    if not all(key in results for key in keys):
        return ""
    pairs = zip(*map(results.get, keys), strict=True)
    ratios = [getattr(top, field) / getattr(bottom, field) for top, bottom in pairs if getattr(bottom, field)]
    if not ratios:  # a --smoke run on a busy machine can count no request
        return "-"
    return f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})"


def print_row(label, cells, target):
    """One row of the ratios' table."""
    print(f"| {label} | {' | '.join(cells)} | {target} |")


def _order(target):
    """Where a target's rows come in the tables: the plan's order, then the checkouts'."""
    return TARGETS.index(target) if target in TARGETS else len(TARGETS)


def print_cpu(cpu):
    """CPU time per request of the store's workers and of the target's own (the same for the store), from /proc: what
    the store costs alone and what it costs behind each portal, whose own work runs between its requests."""
    print("\nCPU per request, ms (median of the rounds; user + system time of each server's workers, from /proc):\n")
    print("| target | c | limit | the store's workers | the target's own workers |")
    print("|---|---:|---:|---:|---:|")
    for (target, connections, limit), runs in sorted(
        cpu.items(), key=lambda item: (item[0][1], item[0][2] or 0, _order(item[0][0]))
    ):
        store = statistics.median(run[0] for run in runs)
        own = "" if target == "store" else f"{statistics.median(run[1] for run in runs):.3f}"
        print(f"| {target} | {connections} | {limit or '-'} | {store:.3f} | {own} |")


def print_figures(results, rss, names):
    """Issue 41's four figures for the portal under granian and each checkout's, side by side (the median of the
    per-round ratios, min-max), over this checkout's bare page and floor."""
    print(f"\nIssue 41's figures, over the bare page and the floor of this checkout: {' | '.join(names)}\n")
    print("| figure | " + " | ".join(names) + " |")
    print("|---|" + "---:|" * len(names))
    for label, over, under, connections, field in (
        ("uncached portal / bare page, p50 at c=1", "portal", "bare granian", 1, "p50_ms"),
        ("uncached portal / bare page, rps at c=8", "portal", "bare granian", 8, "rps"),
        ("cached portal / floor, rps at c=8", "cached", "floor granian", 8, "rps"),
    ):
        under_limit = None if under.startswith("floor") else "same"
        cells = [ratio_cell(results, f"{over} {name}", under, connections, under_limit, field, 20) for name in names]
        print(f"| {label} | {' | '.join(cells)} |")
    peaks = [f"{max(rss[f'portal {name}'], rss[f'cached {name}']):.0f}" for name in names]
    print(f"| peak RSS per worker (MB) | {' | '.join(peaks)} |")
    for name in names:
        runs = [results[(f"{target} {name}", c, 20)] for target, c in (("portal", 1), ("portal", 8), ("cached", 8))]
        p50, rps, cached = (
            statistics.median(getattr(run, field) for run in of)
            for of, field in zip(runs, ("p50_ms", "rps", "rps"), strict=True)
        )
        print(f"{name}: portal p50 {p50:.2f} ms at c=1, {rps:,.0f} req/s at c=8; cached {cached:,.0f} req/s at c=8")
    bare, floor = results[("bare granian", 1, 20)], results[("floor granian", 8, None)]
    print(
        f"bare page p50 {statistics.median(run.p50_ms for run in bare):.2f} ms at c=1; "
        f"floor {statistics.median(run.rps for run in floor):,.0f} req/s at c=8"
    )


def print_report(results, rss, slow, exports):
    """The medians of every run, the ratios for each server, memory, traces and the slow environment."""
    print("| target | c | limit | req/s (median) | p50 ms (median) |")
    print("|---|---:|---:|---:|---:|")
    for (target, connections, limit), runs in sorted(
        results.items(), key=lambda item: (item[0][1], item[0][2] or 0, _order(item[0][0]))
    ):
        rps, p50 = statistics.median(run.rps for run in runs), statistics.median(run.p50_ms for run in runs)
        print(f"| {target} | {connections} | {limit or '-'} | {rps:,.0f} | {p50:.2f} |")
    print("\nThe median of the per-round ratios (min-max), each from two runs of the same round:\n")
    print("| ratio | " + " | ".join(f"{server}, limit {limit}" for server, limit in COLUMNS) + " | target |")
    print("|---|" + "---:|" * len(COLUMNS) + "---|")
    for label, over, under, connections, under_limit, field, target in RATIOS:
        cells = [
            ratio_cell(
                results,
                over.format(server=server),
                under.format(server=server),
                connections,
                under_limit,
                field,
                limit,
            )
            for server, limit in COLUMNS
        ]
        print_row(label, cells, target)
    portal_rss = {server: max(rss[f"portal {server}"], rss[f"cached {server}"]) for server in SERVERS}
    print_row(
        "peak RSS per portal worker (MB)",
        [f"{portal_rss['granian']:.0f}", "", f"{portal_rss['gunicorn']:.0f}"],
        "<= 80",
    )
    print_row("peak RSS per traced portal worker (MB)", [f"{rss['traced granian']:.0f}", "", ""], "report")
    print(
        "\npeak RSS per worker (MB), the larger of each server's two workers: "
        + ", ".join(f"{name} {mb:.0f}" for name, mb in rss.items())
    )
    print(f"\ntraces: the sink took {exports[0]:,} OTLP exports from the traced portal")
    during = f"{slow['during']:,.0f}" if slow["during"] else "discarded (non-2xx)"
    print(
        f"slow environment (granian): while an admin previews a staging store that takes 2 s (8 connections, "
        f"{slow['slow_rps']:.1f} req/s), customers' /animals?limit=20 at c=8 serves {during} req/s "
        f"(alone: {slow['baseline']:,.0f} req/s)"
    )


if __name__ == "__main__":
    main()
