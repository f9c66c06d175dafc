"""Production serving: `flask --app app serve [--bind HOST:PORT] [--workers N]`, with granian (docs/performance.md,
"granian as the production server"; gunicorn.conf.py still works). The command execs `python -m
petportal.running.serve` (same pid, so signals reach the server), which builds the app once and forks the workers
from it."""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import multiprocessing.util
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from typing import TYPE_CHECKING

import click
from flask.cli import ScriptInfo

from petportal.config import ConfigurationError, secret_variables, settings
from petportal.extensions import db
from petportal.imports import engines
from petportal.running.commands import refuse_unusable_database
from petportal.running.processes import check_free, fewer_malloc_arenas
from petportal.telemetry import logs, tracing

if TYPE_CHECKING:
    from _typeshed.wsgi import WSGIApplication
    from flask import Flask

DEFAULT_BIND = "127.0.0.1:8000"
# Threads per worker: each covers a page's wait on the pet store (measured best on 2 cores; see gunicorn.conf.py).
THREADS = 8
# Requests under way at a stop get this long to finish (as gunicorn.conf.py's graceful_timeout).
GRACE_SECONDS = 30
METRICS_FOLDER_PREFIX = "petportal-metrics-"


def default_workers() -> int:
    """`WEB_CONCURRENCY` when set (as gunicorn reads it), else one worker per core of a 2-core machine."""
    return int(os.environ.get("WEB_CONCURRENCY", "2"))


def parse_bind(bind: str) -> tuple[str, int]:
    """`HOST:PORT` (an IPv6 host in brackets) as (host, port); raises click.BadParameter with the reason."""
    host, _, port = bind.rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise click.BadParameter(f"{bind!r} is not HOST:PORT, for example 127.0.0.1:8000 or 0.0.0.0:8000.")
    return host, int(port)


class PortalCommand(click.Command):
    """A command hidden from every app but the portal (Flask offers plugin commands to the reference store too)."""

    @property  # click sets `hidden` as an attribute; here it follows the app of this `flask --app ...`
    def hidden(self) -> bool:
        context = click.get_current_context(silent=True)
        info = context.find_object(ScriptInfo) if context else None
        if info is None:
            return False
        try:
            app = info.load_app()
        except (Exception, SystemExit):  # noqa: BLE001 - an app that cannot load counts as the portal (its error says why)
            return False
        return app.import_name != "petportal"

    @hidden.setter
    def hidden(self, _value: bool) -> None:
        pass


@click.command("serve", cls=PortalCommand)
@click.option("--bind", default=DEFAULT_BIND, show_default=True, help="HOST:PORT to listen on.")
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=default_workers,
    show_default="WEB_CONCURRENCY, else 2",
    help="Worker processes.",
)
@click.pass_context
def serve_command(context: click.Context, bind: str, workers: int) -> None:
    """Serve the portal in production, with granian; SIGTERM lets requests under way finish."""
    host, port = parse_bind(bind)  # a bad address is refused here, before anything starts
    check_free(host, port, lambda free: f"address with --bind, for example --bind {host}:{free} (free when checked)")
    info = context.ensure_object(ScriptInfo)
    # Must be set before prometheus_client is imported: the reason the server runs in a fresh interpreter.
    environ = dict(os.environ)
    environ.setdefault("PROMETHEUS_MULTIPROC_DIR", tempfile.mkdtemp(prefix=METRICS_FOLDER_PREFIX))
    command = [sys.executable, "-m", "petportal.running.serve", "--bind", bind, "--workers", str(workers)]
    if info.app_import_path:
        command += ["--app", info.app_import_path]
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, command, environ)


def serve(load: Callable[[], WSGIApplication], host: str, port: int, workers: int, log_format: str) -> None:
    """Serve what `load` returns from `workers` forked granian workers (bench/floor_server.py shares these)."""
    from granian.constants import Interfaces
    from granian.http import HTTP1Settings
    from granian.server import Server

    multiprocessing.set_start_method("fork", force=True)
    server = Server(
        "petportal",  # not imported: `main`'s `load` hands each worker the app built here
        address=host,
        port=port,
        interface=Interfaces.WSGI,
        workers=workers,
        blocking_threads=THREADS,
        websockets=False,  # WSGI has none
        http1_settings=HTTP1Settings(header_read_timeout=10_000, keep_alive=True),
        log_access=False,  # the portal writes its own access lines
        log_dictconfig=logs.server_logging(log_format) or None,
        respawn_failed_workers=True,
        workers_kill_timeout=GRACE_SECONDS,
    )
    server.on_shutdown(remove_metrics_folder)
    # After the Server set up granian's logging: its warning about more threads than 2 x cores + 1 is wrong for
    # threads that mostly wait on the pet store.
    logging.getLogger("_granian").addFilter(lambda record: "Python threads" not in record.getMessage())
    server.serve(target_loader=load, wrap_loader=False)


def remove_metrics_folder() -> None:
    """Remove the metrics folder this server made (also gunicorn.conf.py's)."""
    folder = os.environ.get("PROMETHEUS_MULTIPROC_DIR", "")
    if os.path.basename(folder).startswith(METRICS_FOLDER_PREFIX):
        shutil.rmtree(folder, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    """What `flask serve` runs, in a fresh interpreter: build the app once, then serve it from forked workers."""
    parser = argparse.ArgumentParser(prog="python -m petportal.running.serve", description=main.__doc__)
    parser.add_argument("--app", dest="app_import_path", default=None)
    parser.add_argument("--bind", default=DEFAULT_BIND)
    parser.add_argument("--workers", type=int, default=default_workers())
    args = parser.parse_args(argv)
    host, port = parse_bind(args.bind)
    logs.uncaught_exceptions_logged()  # the workers are forked from here: theirs too
    fewer_malloc_arenas()  # before the app is loaded and the workers forked
    app = ScriptInfo(app_import_path=args.app_import_path).load_app()
    if app.import_name != "petportal":
        raise ConfigurationError(f"`flask serve` serves the portal (flask --app app serve), not {app.import_name}.")
    refuse_unusable_database(app)
    # The secret variables go once the app has read them: granian copies the environment into each WSGI environ.
    for name in secret_variables(os.environ):
        del os.environ[name]

    def load() -> Flask:
        """In each forked worker: drop the parent's database connections and run bulk imports, handed back when the
        worker stops."""
        with app.app_context():
            db.engine.dispose(close=False)  # the parent's connections stay the parent's
        engines.watch(app)
        # Run once the worker has answered its last request, before its threads are joined (the runner's pool too).
        multiprocessing.util.Finalize(None, engines.hand_back, args=(app,), exitpriority=20)
        logs.batch_access_lines(settings(app).logging.format)
        # A forked worker ends without running atexit: the spans still in the batch are sent from its finaliser.
        multiprocessing.util.Finalize(None, tracing.flush, exitpriority=10)
        return app

    serve(load, host, port, max(args.workers, 1), settings(app).logging.format)


if __name__ == "__main__":
    main()
