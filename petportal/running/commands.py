"""Operator commands: `flask --app app init-db`, `user create` and `user reset-mfa`."""

import sys

import click
from flask import Flask
from flask.cli import AppGroup, with_appcontext
from sqlalchemy import inspect
from sqlalchemy.exc import OperationalError

from petportal.auth import accounts
from petportal.config import ConfigurationError, Environment
from petportal.data import audit
from petportal.data.database import INIT_DB_HINT, DatabaseState, probe
from petportal.data.models import AuditAction, AuditDetail, Role
from petportal.data.payloads import RoleDetails
from petportal.extensions import db


@click.command("init-db")
@with_appcontext
def init_db() -> None:
    """Create the portal's tables, or upgrade them to the latest migration; running it again changes nothing."""
    try:
        upgrade_database()
    except OperationalError as error:
        raise click.ClickException(_unreachable(error)) from None
    click.echo("The portal's tables are ready.")


def refuse_unusable_database(app: Flask) -> None:
    """At a server's start: stop it with one line naming the cause and the fix when the portal's database cannot be
    used (unreachable, or without tables); no connection is kept for the workers."""
    with app.app_context():
        found = probe()
        url = db.engine.url.render_as_string(hide_password=True)
        db.session.remove()
        db.engine.dispose()
    if found.state is DatabaseState.NO_TABLES:
        raise ConfigurationError(f"The portal's database at {url} has no tables: {INIT_DB_HINT}.")
    if found.state is DatabaseState.UNAVAILABLE:
        raise ConfigurationError(
            f"Cannot reach the portal's database at {url} ({found.cause}): start it, or set PETPORTAL_DATABASE_URL "
            "to a database that answers."
        )


def _unreachable(error: OperationalError | None = None) -> str:
    url = db.engine.url.render_as_string(hide_password=True)
    if error is None:
        return f"Cannot reach the portal's database at {url}."
    reason = (str(error.orig).strip().splitlines() or [type(error.orig).__name__])[0]
    return f"Cannot reach the portal's database at {url}: {reason}"


def upgrade_database() -> None:
    """Bring the database to the latest migration; a database made by 0.1.0's init-db is adopted first."""
    import flask_migrate  # Alembic, loaded for this command only (see extensions.Migrations)

    tables = inspect(db.engine).get_table_names()
    if tables and "alembic_version" not in tables:
        flask_migrate.stamp(revision="0001")  # the first migration: the schema 0.1.0's create_all made
    flask_migrate.upgrade()


@click.group("user", cls=AppGroup)
@with_appcontext
def user_commands() -> None:
    """Manage staff and admin accounts."""
    state = probe().state
    if state is DatabaseState.NO_TABLES:
        raise click.ClickException(f"The portal's database has no tables yet: {INIT_DB_HINT}.")
    if state is DatabaseState.UNAVAILABLE:
        raise click.ClickException(_unreachable())


@user_commands.command("create")
@click.argument("name")
@click.option(
    "--role",
    type=click.Choice([role.value for role in Role]),
    required=True,
    help="staff adds animals; admin also runs the portal.",
)
@click.option(
    "--environments",
    default=",".join(Environment),
    show_default=True,
    help="The environments the account may work on, comma-separated.",
)
@click.option("--password-stdin", is_flag=True, help="Read the password from standard input instead of prompting.")
def create_user(name: str, role: str, environments: str, password_stdin: bool) -> None:
    """Add an account called NAME, ready to use."""
    if accounts.find(name.strip()) is not None:
        raise click.ClickException(f"An account called {name.strip()!r} already exists.")
    if audit.is_reserved(name):  # before asking for a password that could not be used
        raise click.ClickException(f"{name.strip()!r} is a name the audit log uses for itself; choose another.")
    try:
        works_on = accounts.environments_of([each.strip() for each in environments.split(",")])
    except accounts.AccountError:
        raise click.ClickException(
            f"--environments is {', '.join(Environment)} or both, comma-separated; not {environments!r}."
        ) from None
    if password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = click.prompt("Password", hide_input=True, confirmation_prompt=True)
    try:
        user = accounts.create(name, Role(role), password, must_change_password=False, environments=works_on)
    except accounts.AccountError as error:
        raise click.ClickException(str(error)) from None
    detail = RoleDetails(code=AuditDetail.CREATED_FROM_COMMAND_LINE, role=Role(role))
    audit.record(AuditAction.USER_CREATED, actor=audit.COMMAND_LINE, target=user.username, detail=detail)
    db.session.commit()  # the command is the unit of work: the account and its audit entry together
    click.echo(f"Added {role} {user.username!r}, working on {' and '.join(sorted(works_on))}.")


@user_commands.command("reset-mfa")
@click.argument("name")
def reset_mfa(name: str) -> None:
    """Remove the second factor of the account called NAME (a lost device, and no other admin to reset it)."""
    user = accounts.find(name)
    if user is None:
        raise click.ClickException(f"There is no account called {name!r}.")
    try:
        accounts.reset_mfa(user)
    except accounts.AccountError as error:
        raise click.ClickException(str(error)) from None
    audit.record(
        AuditAction.MFA_RESET, actor=audit.COMMAND_LINE, target=user.username, detail=AuditDetail.FROM_COMMAND_LINE
    )
    db.session.commit()
    click.echo(f"Removed {user.username!r}'s second factor; they set up a new one at their next admin page.")


def register(app: Flask) -> None:
    """Add the operator commands to `flask --app app`."""
    app.cli.add_command(init_db)
    app.cli.add_command(user_commands)
