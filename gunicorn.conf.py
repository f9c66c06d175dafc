"""Production serving: `gunicorn -c gunicorn.conf.py app:app`.

Listens on 127.0.0.1:8000 only, so nothing is exposed by accident; override with `--bind 0.0.0.0:8000` or
GUNICORN_CMD_ARGS="--bind ... --workers 4".
"""

import os
import tempfile

from gunicorn.workers.gthread import ThreadWorker


class RefusingThreadWorker(ThreadWorker):
    """gunicorn's `gthread` worker, which at SIGTERM takes the connections already waiting, then stops listening.
    gthread's own keeps listening until it exits: the connections that arrive while its requests finish wait in
    the kernel and are reset at its exit. Closed at once, the socket refuses them: the client (or nginx) knows that
    nothing was sent, and tries another instance."""

    def handle_exit(self, sig, frame):
        if self.alive:
            self.method_queue.defer(self.stop_listening)
        super().handle_exit(sig, frame)

    def stop_listening(self):
        self.set_accept_enabled(False)
        for listener in self.sockets:
            taken = -1
            while taken != self.nr_conns:  # accept() takes one waiting connection, or none (EAGAIN)
                taken = self.nr_conns
                self.accept(listener)
            listener.close()


bind = "127.0.0.1:8000"
# Threaded workers, one process per core, 8 threads each covering a page's wait on the store: the best shape
# measured on 2 cores (docs/performance.md, "8 threads a worker, 2 workers").
workers = int(os.environ.get("WEB_CONCURRENCY", "2"))
worker_class = RefusingThreadWorker
# The upstream pool defaults to the same 8; with more threads, raise PETPORTAL_UPSTREAM_POOL_SIZE to match.
threads = 8
keepalive = 5
# A worker silent for this long is restarted; upstream calls give up long before (PETPORTAL_UPSTREAM_TIMEOUT).
timeout = 30
# On SIGHUP or SIGTERM, requests under way get this long to finish.
graceful_timeout = 30
# Load the app once in the master: workers share its memory, and a refused configuration stops the master.
preload_app = True
# gunicorn believes no forwarded header: the portal reads them through PETPORTAL_TRUSTED_PROXIES alone.
forwarded_allow_ips = ""
secure_scheme_headers = {}
forwarder_headers = ""
# The portal writes its own access lines (telemetry/logs.py); gunicorn's other lines take the portal's format.
accesslog = None

# A fresh metrics folder per server, set before prometheus_client is imported (it chooses its mode then).
if "PROMETHEUS_MULTIPROC_DIR" not in os.environ:
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="petportal-metrics-")

# Imported only now: importing petportal imports prometheus_client, which must find the folder above.
from petportal.config import SETTINGS  # noqa: E402
from petportal.imports import engines  # noqa: E402
from petportal.running import commands  # noqa: E402
from petportal.running.processes import fewer_malloc_arenas  # noqa: E402
from petportal.running.serve import remove_metrics_folder  # noqa: E402
from petportal.telemetry import logs  # noqa: E402
from petportal.web import front_door  # noqa: E402

logconfig_dict = logs.server_logging(os.environ.get("PETPORTAL_LOG_FORMAT", "").strip().lower() or "text")
logs.uncaught_exceptions_logged()  # so they pass the egress guard, as every log line does

fewer_malloc_arenas()


def on_starting(server):
    """Refuse to start, before listening, on a database the portal cannot use (as `flask serve` does)."""
    if not server.cfg.preload_app:
        return  # the workers load the app; the master has none to ask
    app = server.app.wsgi()
    if SETTINGS in getattr(app, "extensions", {}):  # the portal (this file also serves the reference store)
        commands.refuse_unusable_database(app)


def post_worker_init(worker):
    """Each worker runs bulk imports and batches its access lines (as under `flask serve`)."""
    settings = getattr(worker.wsgi, "extensions", {}).get(SETTINGS)
    if settings is not None:  # the portal (this file also serves the reference store)
        engines.watch(worker.wsgi)
        logs.batch_access_lines(settings.logging.format)


def worker_exit(server, worker):
    """A stopping worker, its last request answered, hands back the bulk imports it sends (as under `flask serve`)."""
    app = getattr(worker, "wsgi", None)  # none when the worker failed to boot
    if SETTINGS in getattr(app, "extensions", {}):  # the portal (this file also serves the reference store)
        engines.hand_back(app)


def pre_request(worker, req):
    """Close the connection after a body refused unread (413): gunicorn writes `Connection` itself."""
    headers = dict(req.headers)
    limit = getattr(worker.wsgi, "config", {}).get("MAX_CONTENT_LENGTH")
    if limit and front_door.too_large(headers.get("CONTENT-TYPE", ""), headers.get("CONTENT-LENGTH", ""), limit):
        req.force_close()


def on_exit(server):
    remove_metrics_folder()
