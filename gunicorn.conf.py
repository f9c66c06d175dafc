"""Production serving: `gunicorn -c gunicorn.conf.py app:app`.

Any setting can be overridden on the command line or in GUNICORN_CMD_ARGS, for example
GUNICORN_CMD_ARGS="--bind 127.0.0.1:9000 --workers 4".
"""

import os

bind = "0.0.0.0:8000"
# Threaded workers: a page waiting on a slow pet store holds one thread, not a whole process.
workers = int(os.environ.get("WEB_CONCURRENCY", "2"))
worker_class = "gthread"
threads = 8
# Every worker thread can hold its own keep-alive connection to the pet store.
os.environ.setdefault("PETPORTAL_UPSTREAM_POOL_SIZE", str(threads))
keepalive = 5
# A worker silent for this long is restarted; upstream calls give up long before (PETPORTAL_UPSTREAM_TIMEOUT).
timeout = 30
# On SIGHUP or SIGTERM, requests under way get this long to finish.
graceful_timeout = 30
# Load the app once in the master: workers share its memory, and demo mode starts one pair of stores.
preload_app = True
accesslog = "-"
access_log_format = '%(h)s "%(r)s" %(s)s %(b)s %(M)sms request_id=%({x-request-id}o)s'
