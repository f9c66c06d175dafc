"""Production serving: `flask --app app serve [--bind HOST:PORT] [--workers N]`, with granian.

granian (a Rust HTTP server running the portal as a WSGI app) was chosen over gunicorn by the figures of
`python -m bench` (docs/performance.md): the same portal, the same workers and threads, and granian's
floor (a constant page) several times gunicorn's. `gunicorn -c gunicorn.conf.py app:app` keeps working,
and both servers get the same things done for the portal:

- the app is built once, in the first process, and every worker is forked from it (the workers share the
  memory of what was loaded); neither ever runs the demo: without a pet store configured, the build refuses
  with one line (`config.check`), as does a port in use (`--bind`);
- each worker starts its own import runner (`worker_started`);
- metrics add up over the workers (`PROMETHEUS_MULTIPROC_DIR`, a fresh folder per server, removed at its
  stop); a dead worker's live gauges are dropped when the figures are read (`metrics.forget_dead_workers`);
- no forwarded header is believed by the server: only the portal reads them, through
  `PETPORTAL_TRUSTED_PROXIES`;
- a request cannot hold a worker forever: a client slow to send its request line and headers is dropped by
  the server's Rust side after 10 s, before any thread is given; pet store calls end at their deadline
  (`PETPORTAL_UPSTREAM_TIMEOUT`); at a stop, requests under way get `GRACE_SECONDS` to finish before their
  worker is killed. A body sent slowly holds a thread while it arrives (granian, like gunicorn, has no body
  timeout), but only 4 of a worker's 8 threads wait on bodies at once (`front_door.BodyGate`): pages and
  health checks keep their threads; a proxy that buffers request bodies still belongs in front;
- SIGTERM (or Ctrl+C) finishes the requests under way, then the process exits 0;
- the secret variables the portal reads (the keys, the session key, passwords in its URLs, the tracing
  exporter's headers: `config.secret_variables`) never reach a request's WSGI environ, into which granian copies
  the process's environment: they are taken out once the app is built (`forget_secret_variables`). A credential
  that a library reads from the environment again later (libpq's PGPASSWORD) stays, and so is better kept in the
  URL the portal reads;
- the server's own lines take the portal's log format (`logs.server_logging`), and the access lines are
  the portal's own (`logs.AccessLog`); an exception no code caught and a Python warning are logged, not printed
  (`logs.uncaught_exceptions_logged`), so every line, the server's and every library's included, passes the
  egress guard (`egress`).

`flask serve` is a Flask CLI plugin command (an entry point of the package), so it runs without building
the app in the CLI's process: it prepares the variables the workers need before anything reads them, then
replaces itself (same process id, so signals reach the server) with `python -m petportal.production`.
"""

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

from .config import settings

if TYPE_CHECKING:
    from _typeshed.wsgi import WSGIApplication
    from flask import Flask

DEFAULT_BIND = "127.0.0.1:8000"
# Threads per worker running the portal's code: each covers the time a page waits on the pet store. The
# shape measured best on 2 cores for both servers (gunicorn.conf.py records the comparison).
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
    """A command of the portal alone. Flask's CLI offers a plugin command to every app (`flask --app petportal.store`
    too), so this one is hidden from any app but the portal, and refuses to serve one."""

    @property  # click sets `hidden` as an attribute; here it follows the app being run
    def hidden(self) -> bool:
        return not _for_the_portal()

    @hidden.setter
    def hidden(self, _value: bool) -> None:
        pass


def _for_the_portal() -> bool:
    """Whether the app of this `flask --app ...` is the portal (not the reference store); the CLI has already
    loaded it to list its commands, and a portal that cannot load counts as the portal (its error is the answer)."""
    from flask.cli import ScriptInfo

    context = click.get_current_context(silent=True)
    info = context.find_object(ScriptInfo) if context else None
    if info is None:
        return True
    try:
        app = info.load_app()
    except (Exception, SystemExit):  # noqa: BLE001 - any app that cannot load is not known to be another one
        return True
    return is_the_portal(app)


def is_the_portal(app: Flask) -> bool:
    """Whether `app` is the portal (petportal.create_app's), the one app this module serves."""
    return app.import_name == "petportal"


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
    _check_address(host, port)
    from flask.cli import ScriptInfo

    info = context.ensure_object(ScriptInfo)
    # Metrics from every worker go to files in this folder, and /metrics adds them up. It must be set before
    # prometheus_client is first imported, which is why the server runs in a fresh interpreter.
    environ = dict(os.environ)
    environ.setdefault("PROMETHEUS_MULTIPROC_DIR", tempfile.mkdtemp(prefix=METRICS_FOLDER_PREFIX))
    command = [sys.executable, "-m", "petportal.production", "--bind", bind, "--workers", str(workers)]
    if info.app_import_path:
        command += ["--app", info.app_import_path]
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, command, environ)


def _check_address(host: str, port: int) -> None:
    """Refuse, in one line naming --bind, an address this server could not listen on (a port in use)."""
    from .config import ConfigurationError
    from .processes import listen_error

    reason = listen_error(host, port)
    if reason:
        raise ConfigurationError(
            f"cannot listen on {host}:{port} ({reason}): stop what uses it, or choose another address with --bind, "
            f"for example --bind {host}:{port + 1 if port < 65535 else 8000}."
        )


def worker_started(app: Flask) -> None:
    """In each new worker, forked from the process that built `app`: no database connection of the parent is
    reused, and the worker runs bulk imports (and watches for those a stopped worker left)."""
    from . import logs, tracing
    from .extensions import db
    from .imports import engines

    with app.app_context():
        db.engine.dispose(close=False)  # the parent's connections stay the parent's
    engines.watch(app)
    logs.batch_access_lines(settings(app).log_format)
    # A forked worker ends without running atexit: the spans still in the batch are sent from its finaliser.
    multiprocessing.util.Finalize(None, tracing.flush, exitpriority=10)


def run(app_import_path: str | None, bind: str, workers: int) -> None:
    """Build the app once, then serve it from `workers` forked granian workers until stopped."""
    from flask.cli import ScriptInfo

    from .commands import warn_before_init_db
    from .logs import uncaught_exceptions_logged
    from .processes import fewer_malloc_arenas

    host, port = parse_bind(bind)
    uncaught_exceptions_logged()  # the workers are forked from here: theirs too
    fewer_malloc_arenas()  # before the app is loaded and the workers forked (see fewer_malloc_arenas)
    app = ScriptInfo(app_import_path=app_import_path).load_app()
    if not is_the_portal(app):
        from .config import ConfigurationError

        raise ConfigurationError(f"`flask serve` serves the portal (flask --app app serve), not {app.import_name}.")
    warn_before_init_db(app)
    forget_secret_variables()
    serve(_loader(app), host, port, workers, settings(app).log_format)


def forget_secret_variables() -> None:
    """Take the secret variables (`config.secret_variables`) out of this process's environment once the app has
    read them: granian copies the whole environment into every request's WSGI environ, and the workers are forked
    from here. So no key is in a request's environ for a page, a log line or Werkzeug's debugger to show. (The
    environment the process was started with stays readable in /proc by its own user, as any process's does.)"""
    from .config import secret_variables

    for name in secret_variables(os.environ):
        del os.environ[name]


def serve(load: Callable[[], WSGIApplication], host: str, port: int, workers: int, log_format: str) -> None:
    """Serve what `load` returns in each worker from `workers` forked granian workers until stopped: the
    settings of `flask serve`, which the benchmark's floor shares (bench/floor_server.py)."""
    from granian.constants import Interfaces
    from granian.http import HTTP1Settings
    from granian.server import Server

    from .logs import server_logging

    # The workers are forked from this process, which built the app: they inherit it, loaded once.
    multiprocessing.set_start_method("fork", force=True)
    server = Server(
        "petportal",  # not imported: `_loader` hands each worker the app built here
        address=host,
        port=port,
        interface=Interfaces.WSGI,
        workers=workers,
        blocking_threads=THREADS,
        websockets=False,  # WSGI has none
        http1_settings=HTTP1Settings(header_read_timeout=10_000, keep_alive=True),
        log_access=False,  # the portal writes its own access lines
        log_dictconfig=server_logging(log_format) or None,
        respawn_failed_workers=True,
        workers_kill_timeout=GRACE_SECONDS,
    )
    server.on_shutdown(_remove_metrics_folder)
    logging.getLogger("_granian").addFilter(_no_threads_warning)  # after the Server set up granian's logging
    server.serve(target_loader=load, wrap_loader=False)


def _no_threads_warning(record: logging.LogRecord) -> bool:
    """granian warns when a worker has more Python threads than 2 x cores + 1 ("Configuration allows spawning up to
    8 Python threads ..."): right for threads that compute, not for the portal's, which mostly wait on the pet store
    (THREADS says why 8). Every other line of granian's passes."""
    return "Python threads" not in record.getMessage()


def _loader(app: Flask) -> Callable[[], Flask]:
    def load() -> Flask:
        worker_started(app)
        return app

    return load


def _remove_metrics_folder() -> None:
    folder = os.environ.get("PROMETHEUS_MULTIPROC_DIR", "")
    if os.path.basename(folder).startswith(METRICS_FOLDER_PREFIX):
        shutil.rmtree(folder, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    """What `flask serve` runs, in a fresh interpreter. Not a click command: the app is built outside any
    command, as a server builds it."""
    parser = argparse.ArgumentParser(prog="python -m petportal.production", description=main.__doc__)
    parser.add_argument("--app", dest="app_import_path", default=None)
    parser.add_argument("--bind", default=DEFAULT_BIND)
    parser.add_argument("--workers", type=int, default=default_workers())
    args = parser.parse_args(argv)
    run(args.app_import_path, args.bind, max(args.workers, 1))


if __name__ == "__main__":
    main()
