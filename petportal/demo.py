"""Demo mode: two reference stores on their own ports, seeded and keyed, and two demo accounts."""

import atexit
import os
import secrets
import socket
import subprocess
import sys
import time
from pathlib import Path

import click

from .config import ENVIRONMENT_NAMES
from .extensions import db
from .models import User

STORE_COMMAND = [sys.executable, "-m", "flask", "--app", "petportal.store"]
DEMO_ACCOUNTS = (("staff", "staff"), ("admin", "admin"))


def start_stores(instance_path):
    """Start one reference store per environment and return their settings (URL and key)."""
    folder = Path(instance_path) / "demo"
    folder.mkdir(parents=True, exist_ok=True)
    stores, processes = {}, []
    for name in ENVIRONMENT_NAMES:
        database = folder / f"{name}.sqlite"
        env = {
            **os.environ,
            "PETSTORE_API_KEYS": secrets.token_urlsafe(24),
            "PETSTORE_DATABASE_URL": f"sqlite:///{database}",
        }
        if not database.exists():
            subprocess.run([*STORE_COMMAND, "seed"], env=env, check=True, stdout=subprocess.DEVNULL)
        port = free_port()
        process = subprocess.Popen(
            [*STORE_COMMAND, "run", "--host", "127.0.0.1", "--port", str(port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        processes.append(process)
        stores[name] = {"url": f"http://127.0.0.1:{port}/v1", "key": env["PETSTORE_API_KEYS"], "port": port}
    atexit.register(_stop, processes, os.getpid())
    for settings in stores.values():
        wait_for_port(settings.pop("port"))
    return stores


def fresh_portal_database(instance_path):
    """A new, empty SQLite file for the portal's own demo data (accounts, audit, settings) on each start."""
    database = Path(instance_path) / "demo" / "portal.sqlite"
    database.unlink(missing_ok=True)
    return f"sqlite:///{database}"


def create_accounts(stores):
    """Create (or reset) the demo accounts; print the stores' addresses and the new passwords once."""
    lines = [f"  {name:<10} store: {settings['url']}" for name, settings in stores.items()]
    for username, role in DEMO_ACCOUNTS:
        password = secrets.token_urlsafe(9)
        user = db.session.scalar(db.select(User).filter_by(username=username))
        if user is None:
            user = User(username=username, role=role)
            db.session.add(user)
        user.set_password(password)
        lines.append(f"  {role:<6} user name: {username:<6} password: {password}")
    db.session.commit()
    click.echo("Pet Portal demo mode: both environments are served by bundled reference stores.")
    click.echo("\n".join(lines))


def free_port():
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port, process=None, seconds=30):
    """Wait until something listens on loopback `port`; fail if `process` exits first or it takes too long."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"the process for port {port} exited with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port} after {seconds} s")


def _stop(processes, owner):
    if os.getpid() != owner:
        return  # a forked server worker exiting; the stores belong to the process that started them
    for process in processes:
        process.terminate()
    for process in processes:
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            process.kill()
