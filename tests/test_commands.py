"""The operator command `flask --app app user create` (init-db: test_migrations.py)."""

import pytest

from petportal.extensions import db
from petportal.models import User


def users(app):
    with app.app_context():
        return {user.username: user.role for user in db.session.scalars(db.select(User))}


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
    ],
)
def test_user_create_refuses_bad_input_with_a_clear_message(portal_app, runner, args, stdin, message):
    result = runner.invoke(args=args, input=stdin)
    assert result.exit_code != 0
    assert message in result.output
    assert "erin" not in users(portal_app)
