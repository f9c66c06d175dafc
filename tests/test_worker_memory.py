"""A worker loads only what its pages use: the libraries of features it has not been asked for stay on disk, so
each worker stays under its memory target (issue 28: 80 MB; `python -m bench` prints the figure)."""

import json
import subprocess
import sys

from support.portal import PROJECT_ROOT

# Each loaded by the feature that needs it, the first time it is used (or, for single sign-on and Redis, at
# start-up when configured); together about 50 MB a process.
ON_FIRST_USE = (
    "alembic",  # migrations: `flask db`, `init-db`
    "authlib",  # single sign-on
    "joserfc",
    "requests",
    "webauthn",  # passkeys
    "cryptography",  # the second factor's secrets, passkeys
    "limits",  # the login counters
    "redis",  # sessions, counters and imports kept in Redis
    "zxcvbn",  # password strength
    "segno",  # the second factor's QR code
    "ua_parser",  # the sessions page
    "opentelemetry",  # tracing
)


def test_a_worker_serving_anonymous_visitors_loads_no_library_of_an_unused_feature(tmp_path, production_store):
    program = f"""
import json
import sys
from petportal import create_app
app = create_app({{
    "SECRET_KEY": "x" * 32, "SQLALCHEMY_DATABASE_URI": "sqlite:///{tmp_path / "p.sqlite"}",
    "PETSTORE_ENVIRONMENTS": {{"production": {{"url": "{production_store.url}", "key": "{production_store.key}"}},
                               "staging": {{"url": None, "key": None}}}},
    "HTTPS": False, "CACHE_SECONDS": 0, "IMPORT_WATCH_SECONDS": 0,
}})
with app.app_context():
    from petportal.extensions import db
    db.create_all()
client = app.test_client()
for path, status in (
    ("/animals", 200),
    ("/animals?status=available&limit=5", 200),
    ("/login", 200),
    ("/healthz", 200),
    ("/static/css/site.css", 200),
    ("/login/sso/callback?code=x&state=y", 404),  # single sign-on is not configured: anyone may still ask
):
    assert client.get(path).status_code == status, path
print(json.dumps(sorted({{name.split(".")[0] for name in sys.modules}})))
"""
    result = subprocess.run(
        [sys.executable, "-c", program],
        cwd=PROJECT_ROOT,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    loaded = set(json.loads(result.stdout.strip().splitlines()[-1]))
    assert loaded & set(ON_FIRST_USE) == set()
    assert {"flask", "sqlalchemy", "jinja2"} <= loaded  # the program did serve pages
