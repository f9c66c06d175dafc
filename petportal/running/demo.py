"""Demo mode: two reference stores on their own ports, seeded and keyed, and two demo accounts."""

import atexit
import ctypes
import json
import logging
import os
import secrets
import shutil
import signal
import string
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable, Mapping
from contextlib import suppress
from pathlib import Path

import click
from flask import Flask
from werkzeug.serving import is_running_from_reloader

from petportal.catalog import categories
from petportal.config import DEMO_STARTED_VARIABLE, INSTANCE_PATH, Environment, demo_wanted, settings
from petportal.data import audit
from petportal.data.models import Role, User
from petportal.extensions import db
from petportal.running.commands import refuse_unusable_database, upgrade_database
from petportal.running.processes import check_free, free_port, stop, wait_for_port

STORE_COMMAND = [sys.executable, "-m", "flask", "--app", "petportal.reference_store"]
DEMO_ACCOUNTS = (("staff", Role.STAFF), ("admin", Role.ADMIN))
# The sample animals' categories, by name, in both environments (the import page's example row uses "Cats").
DEMO_LABELS = {1: "Dogs", 2: "Cats", 3: "Fish", 4: "Birds", 5: "Rabbits", 6: "Turtles"}
# The same labels as German and Spanish readers see them (catalog.categories.name's `own_labels`).
DEMO_OWN_LABELS = {
    1: {"de": "Hunde", "es": "Perros"},
    2: {"de": "Katzen", "es": "Gatos"},
    3: {"de": "Fische", "es": "Peces"},
    4: {"de": "Vögel", "es": "Aves"},
    5: {"de": "Kaninchen", "es": "Conejos"},
    6: {"de": "Schildkröten", "es": "Tortugas"},
}
PR_SET_PDEATHSIG = 1
log = logging.getLogger(__name__)


def portal(create_app: Callable[..., Flask], host: str, port: int) -> Flask:
    """The portal for a demo entry point (`python app.py`, `flask --app app run`) to serve on host:port: in demo
    mode when no pet store is configured. The port is checked before any store starts. A reloader child reuses its
    parent's stores, database and accounts, so reloads neither start stores twice nor change the passwords."""
    if not demo_wanted(os.environ):
        app = create_app()
        _check_port(host, port)
        refuse_unusable_database(app)
        return app
    if started := os.environ.get(DEMO_STARTED_VARIABLE):
        return create_app(demo=json.loads(started))
    _check_port(host, port)
    instance_path = INSTANCE_PATH or "instance"  # always a checkout's: the demo's entry points live in one
    stores = start_stores(instance_path)
    demo = {
        "PETSTORE_ENVIRONMENTS": stores,
        "SQLALCHEMY_DATABASE_URI": fresh_portal_database(instance_path),
        "PUBLIC_URL": f"http://localhost:{port}",  # single sign-on's way back and the passkeys' origin
    }
    app = create_app(demo=demo)
    # For a reloader child of this process (the only process that starts from this one's environment).
    os.environ[DEMO_STARTED_VARIABLE] = json.dumps(demo)
    with app.app_context():
        upgrade_database()
        for environment in Environment:
            for category_id, label in DEMO_LABELS.items():
                categories.name(environment, category_id, label, audit.DEMO, DEMO_OWN_LABELS[category_id])
        create_accounts(stores)
    return app


def _check_port(host: str, port: int) -> None:
    if not is_running_from_reloader():  # a reloader child serves on its parent's socket
        check_free(host, port, lambda free: f"port with --port, for example --port {free} (free when checked)")


def start_stores(instance_path: str) -> dict[str, dict[str, str]]:
    folder = Path(instance_path) / "demo"
    folder.mkdir(parents=True, exist_ok=True)
    if threading.current_thread() is threading.main_thread():  # before seeding: a stop while seeding cleans up too
        for number in (signal.SIGTERM, signal.SIGHUP):  # a normal exit, so the atexit hook stops the stores
            signal.signal(number, lambda received, _frame: sys.exit(128 + received))
    stores: dict[str, dict[str, str]] = {}
    processes: list[subprocess.Popen[bytes]] = []
    ports: list[int] = []
    for name in Environment:
        database = folder / f"{name}.sqlite"
        env = {
            # Not the portal's own Flask settings: `--debug` would give each store a reloader too.
            **{k: v for k, v in os.environ.items() if not k.startswith(("FLASK_", "WERKZEUG_", DEMO_STARTED_VARIABLE))},
            "PETSTORE_API_KEYS": secrets.token_urlsafe(24),
            "PETSTORE_DATABASE_URL": f"sqlite:///{database}",
        }
        if not database.exists():
            _seed(database, env, name)
        port = free_port()
        process = subprocess.Popen(
            [*STORE_COMMAND, "run", "--host", "127.0.0.1", "--port", str(port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=_die_with_parent,  # noqa: PLW1509 - before any thread of the portal starts serving
        )
        processes.append(process)
        ports.append(port)
        stores[name] = {"url": f"http://127.0.0.1:{port}/v1", "key": env["PETSTORE_API_KEYS"]}
    atexit.register(_stop, processes, os.getpid())
    for port in ports:
        wait_for_port(port)
    return stores


def _seed(database: Path, env: Mapping[str, str], name: str) -> None:
    """Seed a new store's `database` under a temporary name, then link it into place unless another demo did."""
    handle, path = tempfile.mkstemp(prefix=f"{database.stem}-seeding-", suffix=".sqlite", dir=database.parent)
    os.close(handle)  # an empty file, which SQLite takes as a new database
    seeding = Path(path)
    try:
        command = [*STORE_COMMAND, "seed", "--sample", name]
        subprocess.run(
            command, env={**env, "PETSTORE_DATABASE_URL": f"sqlite:///{seeding}"}, check=True, stdout=subprocess.DEVNULL
        )
        with suppress(FileExistsError):  # another demo seeded it first: its animals are the ones kept
            os.link(seeding, database)
    finally:
        seeding.unlink(missing_ok=True)


def fresh_portal_database(instance_path: str) -> str:
    """A new SQLite file for this demo's portal data, removed when the demo stops."""
    folder = tempfile.mkdtemp(prefix="portal-", dir=Path(instance_path) / "demo")
    atexit.register(_remove, folder, os.getpid())
    return f"sqlite:///{Path(folder) / 'portal.sqlite'}"


def _remove(folder: str, owner: int) -> None:
    if os.getpid() == owner:  # not a process forked from the demo's: the database is still the demo's
        shutil.rmtree(folder, ignore_errors=True)


# Letters and digits only: a printed password that began with "-" was read as an option by shells and commands.
PASSWORD_CHARACTERS = string.ascii_letters + string.digits
PASSWORD_LENGTH = 14


def create_accounts(stores: Mapping[str, Mapping[str, str]]) -> None:
    lines = [f"  {name:<10} store: {store['url']}" for name, store in stores.items()]
    for username, role in DEMO_ACCOUNTS:
        password = "".join(secrets.choice(PASSWORD_CHARACTERS) for _ in range(PASSWORD_LENGTH))
        user = db.session.scalar(db.select(User).filter_by(username=username))
        if user is None:
            user = User(username=username, role=role)
            db.session.add(user)
        user.set_password(password)
        lines.append(f"  {role:<6} user name: {username:<6} password: {password}")
    db.session.commit()
    title = "Pet Portal demo mode: both environments are served by bundled reference stores."
    if settings().logging.format == "json":  # every line the portal writes is then one JSON object
        log.info(title, extra={"demo": [line.strip() for line in lines]})
        return
    click.echo(title)
    click.echo("\n".join(lines))


def _stop(processes: Iterable[subprocess.Popen[bytes]], owner: int) -> None:
    if os.getpid() == owner:  # not a forked process: the stores belong to the process that started them
        stop(processes, seconds=5)


def _die_with_parent() -> None:
    """In a store process: get SIGTERM when the portal dies, even by SIGKILL (Linux)."""
    with suppress(OSError, AttributeError):  # not Linux: the atexit hook and the signal handlers still stop the stores
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
