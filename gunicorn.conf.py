"""Production serving: `gunicorn -c gunicorn.conf.py app:app`.

Listens on 127.0.0.1:8000 only, so nothing is exposed by accident: in a container or behind a proxy
on another host, say where to listen with `--bind 0.0.0.0:8000` or GUNICORN_CMD_ARGS="--bind ...".
Any other setting can be overridden the same way, for example GUNICORN_CMD_ARGS="--workers 4".
"""

import os
import shutil
import tempfile

bind = "127.0.0.1:8000"
# Threaded workers: a page waiting on a slow pet store holds one thread, not a whole process.
# The shape, measured on 2 cores (wrk on /animals?limit=20, cache off, the store on the same machine; 2 rounds
# of 4 s, medians; issue 14): 2 x 8 gave 344 req/s at 8 connections and 358 at 32; 4 x 4 gave 321 and 324;
# 3 x 4, 272 and 321; 4 x 2, 311 and 303; 2 x 4, 230 and 321; 1 x 16, 232 and 228. p50 at one connection
# was 5.3-5.5 ms for all. One process per core keeps both cores busy (Python runs one thread at a time per
# process); 8 threads each cover the time pages spend waiting on the store. More processes only add memory.
workers = int(os.environ.get("WEB_CONCURRENCY", "2"))
worker_class = "gthread"
# The portal's upstream pool defaults to the same 8 (config.DEFAULT_POOL_SIZE), one keep-alive connection
# per thread; with more threads, raise PETPORTAL_UPSTREAM_POOL_SIZE to match.
threads = 8
keepalive = 5
# A worker silent for this long is restarted; upstream calls give up long before (PETPORTAL_UPSTREAM_TIMEOUT).
timeout = 30
# On SIGHUP or SIGTERM, requests under way get this long to finish.
graceful_timeout = 30
# Load the app once in the master: workers share its memory, and a configuration it refuses (no pet store, say)
# stops the master with the portal's one line, before any worker starts. (gunicorn never runs the demo.)
preload_app = True
# gunicorn itself believes no forwarded header from anyone (its default trusts 127.0.0.1, and so a
# local proxy's clients): the portal reads them through PETPORTAL_TRUSTED_PROXIES alone.
forwarded_allow_ips = ""
secure_scheme_headers = {}
forwarder_headers = ""
# The portal writes one access line per request itself (petportal/logs.py), as text or JSON, so gunicorn
# writes none; its own start, stop and worker lines take the portal's format too.
accesslog = None

# Metrics: each worker writes its figures to files in this folder, and /metrics adds them up. A fresh
# folder per server, set before prometheus_client is first imported (it chooses its mode then), so no
# figure of an earlier run is counted.
if "PROMETHEUS_MULTIPROC_DIR" not in os.environ:
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="petportal-metrics-")

# Imported only now: importing petportal imports prometheus_client, which must find the folder above.
from petportal.logs import server_logging, uncaught_exceptions_logged  # noqa: E402
from petportal.processes import fewer_malloc_arenas  # noqa: E402

logconfig_dict = server_logging(os.environ.get("PETPORTAL_LOG_FORMAT", "").strip().lower() or "text")
uncaught_exceptions_logged()  # so they pass the egress guard, as every log line does

# Before the app is loaded and the workers are forked: their threads share two malloc arenas, so a worker's
# memory stays flat under load instead of creeping up (see fewer_malloc_arenas).
fewer_malloc_arenas()


def when_ready(server):
    """Once the app is loaded and the server listens: one line if the portal's database has no tables yet."""
    from petportal import commands

    if not server.cfg.preload_app:
        return  # the workers load the app; the master has none to ask
    app = server.app.wsgi()
    if "LOG_FORMAT" in getattr(app, "config", {}):  # the portal (this file also serves the reference store)
        commands.warn_before_init_db(app)


def post_worker_init(worker):
    """Without Redis each worker sends bulk imports itself, and watches for those a killed worker left; each
    writes its access lines in batches (as under `flask serve`)."""
    from petportal import logs
    from petportal.imports import engines

    if hasattr(worker.wsgi, "extensions"):
        engines.watch(worker.wsgi)
    if "LOG_FORMAT" in getattr(worker.wsgi, "config", {}):  # the portal (this file also serves the reference store)
        logs.batch_access_lines(worker.wsgi.config["LOG_FORMAT"])


def pre_request(worker, req):
    """A body over the portal's limit is refused unread (413): the answer closes the connection, as the portal's
    `Connection: close` asks (gunicorn writes that header itself, and would say keep-alive)."""
    from petportal import front_door

    headers = dict(req.headers)
    limit = getattr(worker.wsgi, "config", {}).get("MAX_CONTENT_LENGTH")
    if limit and front_door.too_large(headers.get("CONTENT-TYPE", ""), headers.get("CONTENT-LENGTH", ""), limit):
        req.force_close()


def on_exit(server):
    """Remove the metrics folder this server made."""
    folder = os.environ.get("PROMETHEUS_MULTIPROC_DIR", "")
    if os.path.basename(folder).startswith("petportal-metrics-"):
        shutil.rmtree(folder, ignore_errors=True)
