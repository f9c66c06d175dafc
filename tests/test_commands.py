"""The operator command `flask --app app user create` (init-db: test_migrations.py), and every way of starting the
portal by mistake: one line on standard error naming the fix, a non-zero status, no traceback."""

import contextlib
import re
import socket
import subprocess
import sys

import pytest
from sqlalchemy import String, type_coerce

from petportal import create_app
from petportal.config import ConfigurationError
from petportal.data.models import User
from petportal.extensions import db
from petportal.running import commands

from support.helpers import portal_config
from support.portal import FLASK_PORTAL, PROJECT_ROOT, portal_environment
from support.servers import free_port


def users(app):
    with app.app_context():
        return {user.username: user.role for user in db.session.scalars(db.select(User))}


def environments(app, name):
    with app.app_context():
        return db.session.scalar(db.select(type_coerce(User.environments, String)).filter_by(username=name))


def test_user_create_reads_the_password_from_stdin(portal_app, runner):
    result = runner.invoke(
        args=["user", "create", "carol", "--role", "admin", "--password-stdin"], input="correct horse battery\n"
    )
    assert result.exit_code == 0, result.output
    assert users(portal_app)["carol"] == "admin"
    with portal_app.app_context():
        assert (
            db.session.scalars(db.select(User).filter_by(username="carol"))
            .one()
            .check_password("correct horse battery")
        )
    assert "correct horse battery" not in result.output


def test_user_create_prompts_twice_for_the_password(portal_app, runner):
    result = runner.invoke(
        args=["user", "create", "dave", "--role", "staff"], input="battery staple fix\nbattery staple fix\n"
    )
    assert result.exit_code == 0, result.output
    assert users(portal_app)["dave"] == "staff"
    assert environments(portal_app, "dave") == "production staging"  # the default: both


@pytest.mark.parametrize("chosen, kept", [("staging", "staging"), (" staging , production", "production staging")])
def test_user_create_gives_the_environments_asked_for(portal_app, runner, chosen, kept):
    args = ["user", "create", "erin", "--role", "staff", "--environments", chosen, "--password-stdin"]
    result = runner.invoke(args=args, input="long enough password\n")
    assert result.exit_code == 0, result.output
    assert environments(portal_app, "erin") == kept


@pytest.mark.parametrize(
    "args, stdin, message",
    [
        (
            ["user", "create", "staff", "--role", "staff", "--password-stdin"],
            "long enough password\n",
            "already exists",
        ),
        (["user", "create", "erin", "--role", "staff", "--password-stdin"], "short\n", "at least 12"),
        (["user", "create", "erin", "--role", "staff", "--password-stdin"], "password\n", "at least 12"),
        (["user", "create", "erin", "--role", "staff", "--password-stdin"], "12345678\n", "at least 12"),
        (["user", "create", "erin", "--role", "staff", "--password-stdin"], "qwertyuiop\n", "at least 12"),
        (["user", "create", "erin", "--role", "staff", "--password-stdin"], "1qaz2wsx3edc\n", "most common"),
        (["user", "create", "erin", "--role", "staff", "--password-stdin"], "aaaaaaaaaaaaaaaa\n", "easy to guess"),
        (["user", "create", "erin", "--role", "staff", "--password-stdin"], "P@ssw0rd1234\n", "easy to guess"),
        (["user", "create", "erin", "--role", "owner", "--password-stdin"], "long enough password\n", "owner"),
        (["user", "create", "erin", "--password-stdin"], "long enough password\n", "--role"),
        *(
            (["user", "create", "erin", "--role", "staff", "--environments", bad], "long enough password\n", message)
            for bad, message in [
                ("moon", "--environments is production, staging or both, comma-separated; not 'moon'."),
                ("", "--environments is production, staging or both, comma-separated; not ''."),
                ("staging,", "not 'staging,'"),
                ("staging,moon", "not 'staging,moon'"),
            ]
        ),
    ],
)
def test_user_create_refuses_bad_input_with_a_clear_message(portal_app, runner, args, stdin, message):
    result = runner.invoke(args=args, input=stdin)
    assert result.exit_code != 0
    assert message in result.output
    assert "erin" not in users(portal_app)


# --- start-up mistakes: one line each, naming the fix (issue 42) ---------------------------------------------------

CONFIGURED = {
    "PETSTORE_PRODUCTION_URL": "http://127.0.0.1:9/v1",
    "PETSTORE_PRODUCTION_KEY": "production-key-0123456789ab",
    "PETPORTAL_SECRET_KEY": "s" * 32,
}
GUNICORN = [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py"]
# The production entry points: none of them may start the demo.
PRODUCTION_ENTRY_POINTS = {
    "flask serve": [*FLASK_PORTAL, "serve", "--bind", "127.0.0.1:{port}"],
    "gunicorn app:app": [*GUNICORN, "--bind", "127.0.0.1:{port}", "app:app"],
    "gunicorn petportal:create_app()": [*GUNICORN, "--bind", "127.0.0.1:{port}", "petportal:create_app()"],
    "flask --app petportal run": [sys.executable, "-m", "flask", "--app", "petportal", "run", "--port", "{port}"],
}


def refused(command, env, port=None, stdin=None):
    """Run `command` (as an operator types it, from the checkout) with `env`; assert it stopped with a non-zero
    status and exactly one line on standard error, no traceback; return that line and the standard output."""
    port = port or free_port()
    result = subprocess.run(
        [part.format(port=port) for part in command],
        cwd=PROJECT_ROOT,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode != 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0], result.stdout


@pytest.mark.parametrize("entry", PRODUCTION_ENTRY_POINTS)
def test_a_production_entry_point_without_a_pet_store_refuses_and_starts_no_demo(entry):
    line, output = refused(PRODUCTION_ENTRY_POINTS[entry], portal_environment())
    assert "PETSTORE_PRODUCTION_URL" in line and "PETSTORE_PRODUCTION_KEY" in line
    assert "password" not in output + line and "store:" not in output, "no demo store, no demo account"


@pytest.mark.parametrize(
    "entry, variables, named",
    [
        ("flask serve", {"PETSTORE_PRODUCTION_URL": "http://127.0.0.1:9/v1"}, "PETSTORE_PRODUCTION_KEY is not"),
        ("python app.py", {"PETSTORE_PRODUCTION_KEY": "production-key-0123456789ab"}, "PETSTORE_PRODUCTION_URL is not"),
        ("flask run", {**CONFIGURED, "PETSTORE_STAGING_URL": "http://127.0.0.1:9/v1"}, "PETSTORE_STAGING_KEY is not"),
        (
            "flask serve",
            {**CONFIGURED, "PETSTORE_STAGING_KEY": "staging-key-0123456789ab"},
            "PETSTORE_STAGING_URL is not",
        ),
        ("flask serve", {**CONFIGURED, "PETPORTAL_SECRET_KEY": "abc"}, "PETPORTAL_SECRET_KEY must be at least 32"),
        ("python app.py", {**CONFIGURED, "PETPORTAL_SECRET_KEY": "abc"}, "PETPORTAL_SECRET_KEY must be at least 32"),
        (
            "flask serve",
            {**CONFIGURED, "PETSTORE_PRODUCTION_KEY": "x" * 15},
            "PETSTORE_PRODUCTION_KEY must be at least 16",
        ),
        ("flask serve", {**CONFIGURED, "PETSTORE_PRODUCTION_KEY": "sk_live_a1b2c3d4e5"}, "at least 12 letters and"),
    ],
    ids=[
        "production URL alone",
        "production key alone",
        "staging URL alone",
        "staging key alone",
        "short secret",
        "short secret, python app.py",
        "short store key",
        "store key short after its label",
    ],
)
def test_a_store_half_configured_or_a_short_secret_key_is_refused_at_start(entry, variables, named):
    """The check is config.check's, the same for every entry point (test_operations.py runs each with other
    mistakes): one entry point a case keeps this quick."""
    command = {
        "flask serve": PRODUCTION_ENTRY_POINTS["flask serve"],
        "python app.py": [sys.executable, "app.py", "--port", "{port}"],
        "flask run": [*FLASK_PORTAL, "run", "--port", "{port}"],
    }[entry]
    line, output = refused(command, portal_environment(**variables))
    assert named in line
    assert "password" not in output, "a store named by a variable is never replaced by the demo's"


def test_user_create_before_init_db_names_init_db(tmp_path):
    env = portal_environment(**CONFIGURED, PETPORTAL_DATABASE_URL=f"sqlite:///{tmp_path / 'new.sqlite'}")
    line, _ = refused(
        [*FLASK_PORTAL, "user", "create", "alice", "--role", "admin", "--password-stdin"],
        env,
        stdin="correct horse battery staple\n",
    )
    assert "no tables" in line and "flask --app app init-db" in line


def test_readyz_and_the_start_say_no_tables_before_init_db(tmp_path, production_store):
    portal = create_app(portal_config(tmp_path, production_store.url, None))  # no create_all, no init-db
    with pytest.raises(ConfigurationError, match=r"has no tables: run `flask --app app init-db` first"):
        commands.refuse_unusable_database(portal)
    answer = portal.test_client().get("/readyz")
    assert answer.status_code == 503
    assert answer.json["checks"]["database"] == "no tables" and answer.json["checks"]["petstore"] == "ok"
    portal.extensions["petportal.petstore.environments"].close()


UNUSABLE_DATABASES = {
    "no tables": (lambda folder: f"sqlite:///{folder / 'new.sqlite'}", ["has no tables", "flask --app app init-db"]),
    "unreachable": (
        lambda folder: "postgresql+psycopg://portal:database-password-0123456789@127.0.0.1:1/portal",
        ["Cannot reach the portal's database", "Connection refused", "PETPORTAL_DATABASE_URL", "portal:***@"],
    ),
}
# gunicorn writes this line of its own before the configuration's first hook can refuse (docs/configuration.md).
GUNICORN_START = re.compile(r"^\[[^]]+\] \[\d+\] \[INFO\] Starting gunicorn ")


@pytest.mark.parametrize("entry", ["flask serve", "gunicorn app:app"])
@pytest.mark.parametrize("database", UNUSABLE_DATABASES)
def test_a_server_refuses_a_database_it_cannot_use_in_one_line_naming_cause_and_fix(tmp_path, entry, database):
    url, named = UNUSABLE_DATABASES[database]
    result = subprocess.run(
        [part.format(port=free_port()) for part in PRODUCTION_ENTRY_POINTS[entry]],
        cwd=PROJECT_ROOT,
        env=portal_environment(**CONFIGURED, PETPORTAL_DATABASE_URL=url(tmp_path)),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode != 0 and "Traceback" not in result.stderr
    lines = [line for line in result.stderr.strip().splitlines() if not GUNICORN_START.match(line)]
    assert len(lines) == 1, result.stderr
    assert all(words in lines[0] for words in named), lines[0]
    assert "database-password" not in result.stderr + result.stdout
    assert "Listening at" not in result.stderr, "nothing listened"


@pytest.mark.parametrize(
    "command, option, configured",
    [
        (PRODUCTION_ENTRY_POINTS["flask serve"], "--bind", True),
        ([sys.executable, "app.py", "--port", "{port}"], "--port", True),
        ([sys.executable, "app.py", "--port", "{port}"], "--port", False),
        ([*FLASK_PORTAL, "run", "--port", "{port}"], "--port", False),
    ],
    ids=["flask serve", "python app.py", "python app.py, demo", "flask run, demo"],
)
def test_a_busy_port_is_one_line_naming_the_option_before_anything_starts(command, option, configured):
    """The next port busy too (the hint once named it, twice): the hint names a port that was free when checked."""
    env = portal_environment(**CONFIGURED) if configured else portal_environment()
    with two_busy_ports() as port:
        line, output = refused(command, env, port=port)
        hinted = int(re.search(rf"{option}(?: 127\.0\.0\.1:| )([0-9]+)", line).group(1))
        assert hinted not in (port, port + 1)
        with socket.create_server(("127.0.0.1", hinted)):  # free: a server can listen on it
            pass
    assert f"127.0.0.1:{port}" in line and "in use" in line and option in line
    assert "password" not in output and "store:" not in output, "no demo store started, no password printed"


@contextlib.contextmanager
def two_busy_ports():
    """Two neighbouring loopback ports something listens on; yields the first."""
    while True:
        with socket.create_server(("127.0.0.1", 0)) as busy:
            port = busy.getsockname()[1]
            try:
                neighbour = socket.create_server(("127.0.0.1", port + 1))
            except OSError:
                continue
            with neighbour:
                yield port
                return


def test_the_stores_command_line_lists_only_the_stores_commands():
    result = subprocess.run(
        [sys.executable, "-m", "flask", "--app", "petportal.reference_store", "--help"],
        cwd=PROJECT_ROOT,
        env=portal_environment(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    commands_listed = result.stdout.split("Commands:")[1].split()
    assert "seed" in commands_listed and "run" in commands_listed
    assert "serve" not in commands_listed and "init-db" not in commands_listed
    portal = subprocess.run(
        [*FLASK_PORTAL, "--help"],
        cwd=PROJECT_ROOT,
        env=portal_environment(**CONFIGURED),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "serve" in portal.stdout.split("Commands:")[1].split(), "the portal's own list still has it"


# --- demo mode never touches a configured database -----------------------------------------------------------------


def test_demo_mode_refuses_a_configured_database_and_changes_no_account(tmp_path):
    database = f"sqlite:///{tmp_path / 'real.sqlite'}"
    elsewhere = {"url": "http://127.0.0.1:9/v1", "key": "elsewhere-key-0123456789ab"}
    app = create_app(
        {
            "TESTING": True,
            "SECRET_KEY": "x" * 32,
            "SQLALCHEMY_DATABASE_URI": database,
            "PETSTORE_ENVIRONMENTS": {"production": elsewhere, "staging": elsewhere},
        }
    )
    with app.app_context():
        db.create_all()
        admin = User(username="admin", role="admin")
        admin.set_password("the real admin password")
        db.session.add(admin)
        db.session.commit()
        db.engine.dispose()
    app.extensions["petportal.petstore.environments"].close()
    started = subprocess.run(
        [sys.executable, "app.py"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env=portal_environment(PETPORTAL_DATABASE_URL=database),
        check=False,
    )
    assert started.returncode != 0
    assert "PETPORTAL_DATABASE_URL" in started.stderr
    with app.app_context():
        assert db.session.scalar(db.select(User).filter_by(username="admin")).check_password("the real admin password")
        db.engine.dispose()
