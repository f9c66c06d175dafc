"""Operator commands: `flask --app app init-db` and `flask --app app user create`."""

import sys

import click
import flask_migrate
from flask import Flask
from flask.cli import AppGroup, with_appcontext
from sqlalchemy import inspect
from sqlalchemy.exc import OperationalError

from .auth import passwords
from .extensions import db
from .models import ROLES, User

user_commands = AppGroup("user", help="Manage staff and admin accounts.")
# The first migration: the schema 0.1.0's init-db made with create_all, before there were migrations.
BASELINE_REVISION = "0001"


@click.command("init-db")
@with_appcontext
def init_db():
    """Create the portal's tables, or upgrade them to the latest migration; running it again changes nothing."""
    try:
        upgrade_database()
    except OperationalError as error:
        url = db.engine.url.render_as_string(hide_password=True)
        raise click.ClickException(f"Cannot reach the portal's database at {url}: {_first_line(error.orig)}") from None
    click.echo("The portal's tables are ready.")


def upgrade_database():
    """Bring the database to the latest migration; a database made by 0.1.0's init-db is adopted first."""
    tables = inspect(db.engine).get_table_names()
    if tables and "alembic_version" not in tables:
        flask_migrate.stamp(revision=BASELINE_REVISION)
    flask_migrate.upgrade()


def _first_line(error):
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


@user_commands.command("create")
@click.argument("name")
@click.option("--role", type=click.Choice(ROLES), required=True, help="staff adds animals; admin also runs the portal.")
@click.option("--password-stdin", is_flag=True, help="Read the password from standard input instead of prompting.")
def create_user(name, role, password_stdin):
    """Add an account called NAME."""
    name = name.strip()
    if not name or len(name) > 80:
        raise click.BadParameter("must be 1 to 80 characters long", param_hint="NAME")
    if db.session.scalar(db.select(User).filter_by(username=name)) is not None:
        raise click.ClickException(f"An account called {name!r} already exists.")
    if password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = click.prompt("Password", hide_input=True, confirmation_prompt=True)
    if problem := passwords.problem(password):
        raise click.ClickException(problem)
    user = User(username=name, role=role)
    user.set_password(password)
    db.session.add(user)
    db.session.commit()
    click.echo(f"Added {role} {name!r}.")


def register(app: Flask):
    """Add the operator commands to `flask --app app`."""
    app.cli.add_command(init_db)
    app.cli.add_command(user_commands)
