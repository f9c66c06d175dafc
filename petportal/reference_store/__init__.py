"""The reference Pet Store v1 server: `flask --app petportal.reference_store run --port 8001`."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click
from flask import Flask
from flask.cli import with_appcontext
from werkzeug.exceptions import HTTPException

from petportal.reference_store import api
from petportal.reference_store.models import Pet, db

SAMPLE_ANIMALS = [
    ("Rex", 1, "available"),
    ("Mittens", 2, "available"),
    ("Goldie", 3, "sold"),
    ("Polly", 4, "pending"),
    ("Bella", 1, "available"),
    ("Shadow", 2, "sold"),
    ("Nibbles", 5, None),
    ("Kiwi", 4, "available"),
    ("Loki & Thor", 1, "pending"),
    ("Zoë", 2, "available"),
    ("Sir Hopsalot", 5, "sold"),
    ("Tortuga", 6, None),
]
# Another store's animals (the demo's staging): after a switch, the list itself shows that something changed.
STAGING_ANIMALS = [
    ("Biscuit", 1, "available"),
    ("Pepper", 2, "pending"),
    ("Bubbles", 3, "available"),
    ("Sunny", 4, "sold"),
    ("Clover", 5, "available"),
    ("Shelly", 6, "pending"),
    ("Luna", 2, "available"),
    ("Max", 1, None),
]
SAMPLES = {"production": SAMPLE_ANIMALS, "staging": STAGING_ANIMALS}


def create_app(test_config: Mapping[str, Any] | None = None) -> Flask:
    """Build the reference store: defaults, then environment, then `test_config` on top."""
    app = Flask(__name__, instance_path=str(Path.cwd() / "instance"))
    app.config.from_mapping(
        PETSTORE_API_KEYS=[key for key in os.environ.get("PETSTORE_API_KEYS", "").split(",") if key.strip()],
        SQLALCHEMY_DATABASE_URI=os.environ.get(
            "PETSTORE_DATABASE_URL", f"sqlite:///{Path(app.instance_path) / 'petstore.sqlite'}"
        ),
        SQLALCHEMY_ENGINE_OPTIONS={},
        MAX_CONTENT_LENGTH=64 * 1024,
    )
    app.config.from_mapping(test_config)
    app.json.sort_keys = False  # type: ignore[attr-defined]  # Flask's DefaultJSONProvider has it
    if app.config["SQLALCHEMY_DATABASE_URI"].startswith("sqlite"):
        # Writers wait for each other instead of failing with "database is locked".
        app.config["SQLALCHEMY_ENGINE_OPTIONS"].setdefault("connect_args", {"timeout": 30})
        Path(app.instance_path).mkdir(parents=True, exist_ok=True)
    if not app.config["PETSTORE_API_KEYS"]:
        app.logger.warning("PETSTORE_API_KEYS is empty: every request will be refused with 401.")

    db.init_app(app)
    app.register_blueprint(api.bp)
    app.register_error_handler(HTTPException, api.unsupported_route)
    app.register_error_handler(Exception, api.internal_error)
    app.cli.add_command(seed)
    with app.app_context():
        db.create_all()
    return app


@click.command("seed")
@with_appcontext
@click.option("--count", type=int, default=None, help="How many animals the store should hold [default: the sample's].")
@click.option(
    "--sample", type=click.Choice(sorted(SAMPLES)), default="production", show_default=True, help="Which animals."
)
def seed(count: int | None, sample: str) -> None:
    """Fill the store with sample animals up to COUNT animals; running it again adds none."""
    animals = SAMPLES[sample]
    count = len(animals) if count is None else count
    present = db.session.scalar(db.select(db.func.count()).select_from(Pet))
    for number in range(present, count):
        name, category, status = animals[number % len(animals)]
        if number >= len(animals):
            name = f"{name} {number // len(animals) + 1}"
        db.session.add(Pet(name=name, category_id=category, status=status))
    db.session.commit()
    added = max(count - present, 0)
    click.echo(f"Added {added} animals; the store holds {present + added}.")
