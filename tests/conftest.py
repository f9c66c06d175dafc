"""Shared fixtures: the reference store on a real port, a fault server, and the optional real services."""

import os
import uuid

import pytest
import sqlalchemy
from servers import FaultServer, serve

from petportal.store import create_app as create_store
from petportal.store.models import db as store_db

STORE_KEY = "store-key-" + uuid.uuid4().hex
POSTGRES_URL = os.environ.get("PETPORTAL_TEST_DATABASE_URL")


def postgres_schema_url():
    """A PostgreSQL URL whose search_path is a fresh, empty schema; skips when no server is configured."""
    if not POSTGRES_URL:
        pytest.skip("PETPORTAL_TEST_DATABASE_URL is not set: no PostgreSQL to test against")
    schema = "t_" + uuid.uuid4().hex[:12]
    engine = sqlalchemy.create_engine(POSTGRES_URL)
    with engine.begin() as conn:
        conn.execute(sqlalchemy.text(f"CREATE SCHEMA {schema}"))
    engine.dispose()
    separator = "&" if "?" in POSTGRES_URL else "?"
    return schema, f"{POSTGRES_URL}{separator}options=-csearch_path%3D{schema}"


def drop_postgres_schema(schema):
    """Remove a schema made by `postgres_schema_url`."""
    engine = sqlalchemy.create_engine(POSTGRES_URL)
    with engine.begin() as conn:
        conn.execute(sqlalchemy.text(f"DROP SCHEMA {schema} CASCADE"))
    engine.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def store_database_url(request, tmp_path):
    """The reference store's database: a SQLite file, and the local PostgreSQL when configured."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'store.sqlite'}"
        return
    schema, url = postgres_schema_url()
    yield url
    drop_postgres_schema(schema)


@pytest.fixture
def store_app(tmp_path):
    """A reference store on a SQLite file, accepting `STORE_KEY` and one other key."""
    app = create_store(
        {
            "PETSTORE_API_KEYS": [STORE_KEY, "second-key"],
            "SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path / 'store.sqlite'}",
        }
    )
    yield app
    with app.app_context():
        store_db.engine.dispose()


@pytest.fixture
def store_url(store_app):
    """The base URL (ending in /v1) of a reference store served on a real port."""
    with serve(store_app) as origin:
        yield origin + "/v1"


@pytest.fixture
def fault_server():
    """A loopback server that misbehaves on cue and records what it received."""
    with FaultServer() as server:
        yield server
