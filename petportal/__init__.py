"""Pet Portal: a server-rendered web portal over the Pet Store v1 API."""

import os
import secrets
from datetime import UTC, datetime
from pathlib import Path

import click
from flask import Flask
from flask_bootstrap import Bootstrap5
from sqlalchemy import event

from . import (
    commands,
    config,
    demo,
    errors,
    logs,
    metrics,
    ops,
    page_cache,
    security,
    session_store,
)
from .admin import bp as admin_bp
from .auth import bp as auth_bp
from .auth import sessions
from .catalog import bp as catalog_bp
from .environments import Environments, page_context
from .extensions import csrf, db, limiter, login, migrate

PACKAGE_DIR = Path(__file__).resolve().parent
# A checkout (editable install) keeps its data beside the package; an installed wheel uses Flask's default.
CHECKOUT = (PACKAGE_DIR.parent / "pyproject.toml").is_file()


def shipped_folder(name):
    """`templates` or `static`: inside the installed package (a wheel), or at the top of the checkout."""
    inside = PACKAGE_DIR / name
    return str(inside if inside.is_dir() else PACKAGE_DIR.parent / name)


def create_app(test_config=None):
    """Build the portal: defaults, then the environment's configuration, then `test_config` on top."""
    app = Flask(
        __name__,
        template_folder=shipped_folder("templates"),
        static_folder=shipped_folder("static"),
        instance_path=str(PACKAGE_DIR.parent / "instance") if CHECKOUT else None,
    )
    # No redirect from /a//b to /a/b: Werkzeug would build its Location, and its body, from the Host header.
    app.url_map.merge_slashes = False
    app.config.from_mapping(
        SQLALCHEMY_DATABASE_URI=f"sqlite:///{Path(app.instance_path) / 'petportal.sqlite'}",
        BOOTSTRAP_SERVE_LOCAL=True,
        WTF_CSRF_TIME_LIMIT=None,
        CLOCK=lambda: datetime.now(UTC),
        LOGIN_LIMIT_PER_ACCOUNT_ADDRESS="5 per minute; 20 per hour",
        LOGIN_LIMIT_PER_ADDRESS="20 per minute; 100 per hour",
        LOGIN_LIMIT_PER_ACCOUNT="30 per minute; 100 per hour",
        # The largest request is the CSV upload of the bulk add (1 MB) with its form around it.
        MAX_CONTENT_LENGTH=1024 * 1024 + 64 * 1024,
    )
    app.config.from_mapping(config.from_environment(os.environ))
    if test_config:
        app.config.from_mapping(test_config)
    demo_mode = config.is_demo(app.config)
    if demo_mode and not app.config.get("SECRET_KEY"):
        app.config["SECRET_KEY"] = secrets.token_urlsafe(32)
    config.check(app.config)
    security.configure_cookies(app.config)
    app.config.setdefault("RATELIMIT_STORAGE_URI", app.config["REDIS_URL"] or "memory://")
    if app.config["REDIS_URL"]:
        app.config.setdefault("RATELIMIT_STORAGE_OPTIONS", {"socket_timeout": 1, "socket_connect_timeout": 1})
    Path(app.instance_path).mkdir(parents=True, exist_ok=True)
    serving_demo = demo_mode and _serving()
    if serving_demo:
        new_demo = demo.prepare(app)

    logs.register(app)
    metrics.register(app)
    register_extensions(app)
    register_blueprints(app)
    security.register(app)
    errors.register(app)
    commands.register(app)
    app.context_processor(page_context)

    if serving_demo and new_demo:
        with app.app_context():
            commands.upgrade_database()
            demo.create_accounts(app.config["PETSTORE_ENVIRONMENTS"])
    return app


def register_extensions(app):
    """Bind the extensions, and the environments with their clients, to this app."""
    sqlite = app.config["SQLALCHEMY_DATABASE_URI"].startswith("sqlite")
    if sqlite:
        # Writers wait for each other instead of failing with "database is locked".
        app.config.setdefault("SQLALCHEMY_ENGINE_OPTIONS", {"connect_args": {"timeout": 30}})
    db.init_app(app)
    # SQLite cannot alter a column in place: batch mode copies the table, as Alembic recommends.
    migrate.init_app(app, db, directory=str(PACKAGE_DIR / "migrations"), render_as_batch=True, compare_type=True)
    if sqlite:
        with app.app_context():
            event.listen(db.engine, "connect", _use_sqlite_wal)
    csrf.init_app(app)
    login.init_app(app)
    limiter.init_app(app)
    session_store.register(app)
    sessions.register(app)
    # "basic": a session seen from another client loses freshness, so it must log in again for a switch.
    # ("strong" would also wipe every session restored from the remember-me cookie on its next request.)
    login.session_protection = "basic"
    Bootstrap5(app)
    page_cache.register(app)
    app.extensions["petportal.environments"] = Environments(app)


def _use_sqlite_wal(connection, _record):
    """WAL lets readers and the one writer proceed at once, as a threaded server needs."""
    connection.execute("PRAGMA journal_mode=WAL")


def register_blueprints(app):
    """One blueprint per area a user recognises."""
    app.register_blueprint(catalog_bp)
    app.register_blueprint(auth_bp)
    app.register_blueprint(admin_bp)
    app.register_blueprint(ops.bp)


def _serving():
    """True when this process will serve requests (not when it runs `init-db` or `user create`)."""
    context = click.get_current_context(silent=True)
    return context is None or context.info_name == "run"
