"""Pet Portal: a server-rendered web portal over the Pet Store v1 API."""

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from flask import Flask
from flask_bootstrap import Bootstrap5
from sqlalchemy import event

from . import (
    commands,
    compression,
    config,
    environments,
    errors,
    front_door,
    i18n,
    logs,
    metrics,
    ops,
    page_cache,
    reading,
    security,
    session_store,
    static_files,
    template_text,
    tracing,
    unit_of_work,
)
from .account import bp as account_bp
from .admin import bp as admin_bp
from .admin import categories_bp, users_bp
from .auth import bp as auth_bp
from .auth import sessions, sso, throttle
from .catalog import bp as catalog_bp
from .extensions import csrf, db, login, migrate
from .imports import bp as imports_bp
from .imports import engines as import_engines
from .serving import page_context

PACKAGE_DIR = Path(__file__).resolve().parent
# A checkout (editable install) keeps its data beside the package; an installed wheel uses Flask's default.
CHECKOUT = (PACKAGE_DIR.parent / "pyproject.toml").is_file()
INSTANCE_PATH = str(PACKAGE_DIR.parent / "instance") if CHECKOUT else None


def shipped_folder(name: str) -> str:
    """`templates` or `static`: inside the installed package (a wheel), or at the top of the checkout."""
    inside = PACKAGE_DIR / name
    return str(inside if inside.is_dir() else PACKAGE_DIR.parent / name)


def create_app(test_config: dict[str, Any] | None = None, *, demo: Mapping[str, Any] | None = None) -> Flask:
    """Build the portal: its settings (config.py), then each part in the order it depends on the others. `demo` is
    the settings of the demo that a demo entry point started (demo.portal); without it, and without a pet store
    configured, the portal refuses to start."""
    app = Flask(
        __name__,
        template_folder=shipped_folder("templates"),
        static_folder=shipped_folder("static"),
        instance_path=INSTANCE_PATH,
    )
    # Each language's templates compiled apart. Issue 41's bench without it: uncached portal/bare p50 +86%, rps -40%.
    app.jinja_environment = template_text.TranslatedEnvironment
    # No redirect from /a//b to /a/b: Werkzeug would build its Location, and its body, from the Host header.
    app.url_map.merge_slashes = False
    # Ids in paths are ASCII digits, read as the forms read them (an Arabic-Indic 1 names no animal).
    app.url_map.converters["int"] = reading.WholeNumberConverter
    loaded = config.load(app.instance_path, os.environ, test_config, demo)
    app.config.from_mapping(loaded)
    app.extensions[config.SETTINGS] = config.Settings.of(loaded)
    Path(app.instance_path).mkdir(parents=True, exist_ok=True)

    unit_of_work.register(app, errors.handle_database_error)  # first: its commit runs after every other hook
    compression.register(app)  # then: the body it compresses is final once every later hook has run
    logs.register(app)
    metrics.register(app)
    front_door.register(app)  # after the request id and the metrics' start, before any other reading
    register_extensions(app)
    i18n.register(app)
    environments.register(app)
    import_engines.register(app)
    register_blueprints(app)
    security.register(app)
    errors.register(app)
    commands.register(app)
    app.context_processor(page_context)
    front_door.gate_bodies(app)  # in front of the page cache and Flask: bodies are read whole, a few at a time
    logs.register_access(app)  # in front of every other WSGI layer, the page cache included
    tracing.register(app)  # in front of the access lines, which carry its trace id
    return app


def register_extensions(app: Flask) -> None:
    """Bind the Flask extensions to this app."""
    db.init_app(app)
    # SQLite cannot alter a column in place: batch mode copies the table, as Alembic recommends.
    migrate.init_app(app, db, directory=str(PACKAGE_DIR / "migrations"), render_as_batch=True, compare_type=True)
    if app.config["SQLALCHEMY_DATABASE_URI"].startswith("sqlite"):
        with app.app_context():
            event.listen(db.engine, "connect", _use_sqlite_wal)
    csrf.init_app(app)
    login.init_app(app)
    # "basic": a session seen from another client loses freshness, so it must log in again for a switch.
    # ("strong" would also wipe every session restored from the remember-me cookie on its next request.)
    login.session_protection = "basic"
    sso.register(app)
    session_store.register(app)
    sessions.register(app)
    throttle.register(app)
    Bootstrap5(app)
    page_cache.register(app)
    static_files.register(app)


def _use_sqlite_wal(connection: Any, _record: Any) -> None:
    """WAL lets readers and the one writer proceed at once, as a threaded server needs."""
    connection.execute("PRAGMA journal_mode=WAL")


def register_blueprints(app: Flask) -> None:
    """One blueprint per area a user recognises."""
    app.register_blueprint(catalog_bp)
    app.register_blueprint(imports_bp)
    app.register_blueprint(auth_bp)
    app.register_blueprint(account_bp)
    app.register_blueprint(admin_bp)
    app.register_blueprint(users_bp)
    app.register_blueprint(categories_bp)
    app.register_blueprint(ops.bp)
