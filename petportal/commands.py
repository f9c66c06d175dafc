"""Operator commands: `flask --app app init-db` and `flask --app app user create`."""

import sys

import click
from flask import Flask
from flask.cli import AppGroup, with_appcontext

from .auth import passwords
from .extensions import db
from .models import ROLES, User

user_commands = AppGroup("user", help="Manage staff and admin accounts.")


@click.command("init-db")
@with_appcontext
def init_db():
    """Create the portal's tables; running it again changes nothing."""
    db.create_all()
    click.echo("The portal's tables are ready.")


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
