"""What runs bulk imports outside the request that starts them: RQ workers on the configured Redis, or, without
Redis (demo mode, one process), threads of the portal's own process.

Either way the runner's lease decides who sends (runner.py): a second dispatch of the same import sends nothing
twice. A process that stops hands its imports back (`hand_back`; an RQ worker at its SIGTERM) for another to take.
"""

import logging
import threading
from collections.abc import Callable

import click
from flask import Flask, current_app
from flask.cli import AppGroup

from petportal.config import settings
from petportal.data.database import cause
from petportal.data.unit_of_work import after_commit
from petportal.extensions import DATABASE_OUTAGES, db
from petportal.imports import batches, runner

log = logging.getLogger(__name__)
QUEUE = "petportal-imports"
# An import of 1,000 rows against a store at its timeout would take far less than this.
JOB_TIMEOUT_SECONDS = 6 * 3600
# A stopping process waits this long at most for its runners to settle the rows under way and hand their imports
# back: a createPet call under way ends within PETPORTAL_UPSTREAM_TIMEOUT, and a server must be gone within 10 s.
HAND_BACK_SECONDS = 6.0
_ENGINE = "petportal.import_engine"

import_commands = AppGroup("imports", help="Run bulk imports (with PETPORTAL_REDIS_URL set).")


class Watcher:
    """Every `import_watch_seconds`, has the waiting imports no live runner holds sent: how they go on after a crash."""

    def __init__(self, app: Flask, dispatch: Callable[[str], None]) -> None:
        self._app, self._dispatch, self._every = app, dispatch, settings(app).import_watch_seconds
        self._stopped = threading.Event()
        self._failing = False

    def once(self) -> bool:
        """One look; False when the database could not be read. An outage is logged at its start and its end."""
        with self._app.app_context():
            try:
                waiting = batches.unheld_ids()
            except DATABASE_OUTAGES as error:
                if not self._failing:
                    log.error(
                        "no look for unfinished bulk imports until the portal's database answers (looking again "
                        "every %s s): %s",
                        self._every,
                        cause(error),
                    )
                self._failing = True
                return False
            finally:
                db.session.remove()
        if self._failing:
            log.info("the portal's database answers again: looking for unfinished bulk imports")
            self._failing = False
        for import_id in waiting:
            self._dispatch(import_id)
        return True

    def start(self) -> None:
        if self._every > 0:
            threading.Thread(target=self._watch, name="import-watcher", daemon=True).start()

    def stop(self) -> None:
        self._stopped.set()

    def _watch(self) -> None:
        while not self._stopped.wait(self._every):
            self.once()


class Embedded:
    """Runs each import on a thread of this process, one at most per import, and watches for imports left behind."""

    def __init__(self, app: Flask) -> None:
        self._app = app
        self._lock = threading.Lock()
        self._running: set[str] = set()
        self._watcher: Watcher | None = None
        app.before_request(self.watch)

    def watch(self) -> None:
        """Start this process's watcher, once; not when the app is built, as no thread survives gunicorn's fork
        (gunicorn.conf.py calls this in each new worker; under another server, the first request does)."""
        if self._watcher is not None:
            return  # every request after the first: no lock taken
        with self._lock:
            if self._watcher is not None:
                return
            self._watcher = Watcher(self._app, self.dispatch)
        # Started whatever the first look found: a database down now is looked at again by the watcher, not by requests.
        self._watcher.once()
        self._watcher.start()

    def dispatch(self, import_id: str) -> None:
        """Start a thread for the import, unless one of this process runs it already."""
        with self._lock:
            if import_id in self._running:
                return
            self._running.add(import_id)
        threading.Thread(target=self._run, args=(import_id,), name=f"import-{import_id[:8]}", daemon=True).start()

    def hand_back(self) -> None:
        """Look for no more imports, and hand back those this process sends (it stops)."""
        if self._watcher is not None:
            self._watcher.stop()
        if not runner.hand_back(HAND_BACK_SECONDS):
            log.warning(
                "bulk imports: a runner of this stopping process did not hand its import back within %s s; "
                "another runner goes on with it once its lease runs out",
                HAND_BACK_SECONDS,
            )

    def _run(self, import_id: str) -> None:
        try:
            with self._app.app_context():
                runner.run(import_id)
        except Exception:
            log.exception("bulk import %s: the runner failed; the import goes on when it is next looked for", import_id)
        finally:
            with self._lock:
                self._running.discard(import_id)


class Queued:
    """Puts each import on an RQ queue in Redis, for `flask --app app imports worker` to run."""

    def __init__(self, app: Flask) -> None:
        from redis import Redis
        from rq import Queue

        redis_url = settings(app).redis_url
        assert redis_url is not None  # the runner is "rq" only where there is a Redis
        self.connection = Redis.from_url(redis_url, socket_timeout=2, socket_connect_timeout=2)
        self.queue = Queue(QUEUE, connection=self.connection)
        self._lease = settings(app).import_lease_seconds

    def dispatch(self, import_id: str, *, again: bool = False) -> None:
        """Queue a job for the import: at most one per lease (a page that keeps asking does not fill the
        queue) unless `again` (a starting worker picks up what a stopped one left)."""
        from redis.exceptions import RedisError  # loaded with the queue's connection (rq's Redis client)

        marker = f"petportal:import-dispatched:{import_id}"
        try:
            if self.connection.set(marker, 1, nx=not again, ex=max(1, int(self._lease))):
                self.queue.enqueue(
                    run_job, import_id, job_timeout=JOB_TIMEOUT_SECONDS, result_ttl=0, failure_ttl=24 * 3600
                )
        except RedisError as error:
            # The import stays queued, and is queued again when its page is next opened or a worker starts.
            log.error("bulk import %s not queued: Redis is unavailable: %s", import_id, type(error).__name__)


def run_job(import_id: str) -> None:
    """The RQ job, in the worker's app context; an import handed back as the worker stops is queued again."""
    runner.run(import_id)
    if runner.stopping() and isinstance(engine := current_app.extensions[_ENGINE], Queued):
        engine.dispatch(import_id, again=True)


def dispatch(import_id: str) -> None:
    """Have the import sent outside this request, once its work is committed (a runner must find it queued)."""
    engine: Embedded | Queued = current_app.extensions[_ENGINE]
    after_commit(lambda: engine.dispatch(import_id))


def watch(app: Flask) -> None:
    """Have this process look for bulk imports a stopped process left, from now on (a new gunicorn worker)."""
    if isinstance(engine := app.extensions.get(_ENGINE), Embedded):
        engine.watch()


def hand_back(app: Flask) -> None:
    """This process stops (after its last request): hand back its imports, for another process to take at once."""
    if isinstance(engine := app.extensions.get(_ENGINE), Embedded):
        engine.hand_back()


def register(app: Flask) -> None:
    """Give `app` its import engine, and the `imports worker` command."""
    app.extensions[_ENGINE] = Queued(app) if settings(app).import_runner == "rq" else Embedded(app)
    app.cli.add_command(import_commands)


@import_commands.command("worker")
@click.option("--burst", is_flag=True, help="Stop once the queue is empty (for scripts and tests).")
def worker(burst: bool) -> None:
    """Run bulk imports from the Redis queue until stopped; first pick up any import a stopped worker left."""
    from rq import SimpleWorker

    class HandingBack(SimpleWorker):
        """RQ's worker, whose SIGTERM also has the import under way handed back (RQ then stops once the job
        returns: a warm shutdown that waits for one row at a time, not the import's end)."""

        def request_stop(self, signum: int, frame: object) -> None:
            runner.stopping_now()
            super().request_stop(signum, frame)  # type: ignore[no-untyped-call]  # rq leaves it unannotated

    if not isinstance(engine := current_app.extensions[_ENGINE], Queued):
        raise click.ClickException(
            "PETPORTAL_REDIS_URL is not set: without Redis, the portal runs bulk imports itself, and needs no worker."
        )
    for import_id in batches.unheld_ids():
        engine.dispatch(import_id, again=True)
    app: Flask = current_app._get_current_object()  # type: ignore[attr-defined]  # the app, for the watcher's thread
    watcher = Watcher(app, engine.dispatch)
    watcher.start()
    try:
        # SimpleWorker runs each job in this process, inside the app context this command runs in.
        HandingBack([engine.queue], connection=engine.connection).work(burst=burst, with_scheduler=False)
    finally:
        watcher.stop()
