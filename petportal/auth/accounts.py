"""What can be changed about an account, by its admins, its owner or the `flask user` commands, and the rules that keep
the portal manageable: a policy for every password, and always one enabled admin who works on both environments.

Every change is written to the database the account is checked against on each request, so it takes effect on the
account's next request in every portal process. Nothing here commits: the request (or the `flask user` command) that
asked for the change commits it with its audit entry, once (see unit_of_work).
"""

from __future__ import annotations

import re
from typing import Any, cast

from flask_babel import gettext as _
from sqlalchemy import CursorResult, exists, func, or_, select, update
from sqlalchemy.orm import aliased

from petportal.auth import logins, mfa, passkeys
from petportal.config import EVERY_ENVIRONMENT, Environment
from petportal.data import audit, passwords
from petportal.data.models import Role, User
from petportal.extensions import db

USERNAME_MAX_LENGTH = 80
# A user name appears in page addresses (/admin/users/<name>): no spaces, slashes or markup, and it
# starts with a letter or digit, so it is never a "." or ".." path segment.
USERNAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]*")


class AccountError(Exception):
    """A change that the rules refuse; the message says why, for the person who asked for it (in the request's
    language: `flask user` commands, outside any request, get English)."""


def find(username: str) -> User | None:
    """The account called `username`, or None."""
    return db.session.scalar(select(User).filter_by(username=username))


def create(
    username: str,
    role: Role,
    password: str,
    must_change_password: bool,
    environments: frozenset[Environment] = EVERY_ENVIRONMENT,
) -> User:
    """Add an account; with `must_change_password` it must choose its own password at its first login."""
    username = username.strip()
    if problem := username_problem(username) or passwords.problem(password):
        raise AccountError(problem)
    user = User(username=username, role=role, must_change_password=must_change_password, environments=environments)
    user.set_password(password)
    db.session.add(user)
    return user


def username_problem(username: str) -> str | None:
    """What is wrong with `username` (stripped) as a new account's name, in words for the admin, or None: the
    admins' form and `flask user create` ask this one question."""
    if not username or len(username) > USERNAME_MAX_LENGTH:
        return _("A user name is 1 to %(count)s characters long.", count=USERNAME_MAX_LENGTH)
    if not USERNAME_PATTERN.fullmatch(username):
        return _("A user name starts with a letter or digit and has only letters, digits and . _ @ - in it.")
    if audit.is_reserved(username):
        return _("%(username)s is a name the audit log uses for itself; choose another.", username=repr(username))
    # Logins are counted per name whatever its case, so "Kim" and "kim" would share one limit.
    if db.session.scalar(select(User).where(func.lower(User.username) == username.lower())) is not None:
        return _("An account called %(username)s already exists.", username=repr(username))
    return None


def change_role(actor: User, user: User, role: Role) -> None:
    """Give `user` another role; never your own, and never the last enabled admin's."""
    if user.id == actor.id:
        raise AccountError(_("You cannot change your own role; ask another admin."))
    _change_keeping_an_admin(user, role=role)


def set_enabled(actor: User, user: User, enabled: bool) -> None:
    """Enable or disable `user`; a disabled account's logins all end. Never yourself, never the last admin."""
    if user.id == actor.id and not enabled:
        raise AccountError(_("You cannot disable your own account; ask another admin."))
    _change_keeping_an_admin(user, enabled=enabled)
    if not enabled:
        logins.end_all(user.id)


def environments_of(names: list[str]) -> frozenset[Environment]:
    """The environments `names` choose; AccountError when one is none, or none is given."""
    chosen = frozenset(name for name in Environment if name in names)
    if not chosen or len(set(names)) != len(chosen):
        raise AccountError(_("Choose production, staging or both."))
    return chosen


def set_environments(user: User, environments: frozenset[Environment]) -> None:
    """Let `user` work on `environments` alone (`environments_of`); never the last enabled admin who works on both."""
    _change_keeping_an_admin(user, environments=environments)


def reset_password(user: User, password: str) -> None:
    """An admin sets a new password: every login of the account ends, and it must choose its own at the next."""
    _check_new_password(user, password)
    user.set_password(password)
    user.must_change_password = True
    logins.end_all(user.id)


def change_password(user: User, new_password: str, keep_login: str | None) -> None:
    """The owner chooses a new password: every other login of the account ends."""
    _check_new_password(user, new_password)
    if user.check_password(new_password):
        raise AccountError(_("Choose a password different from the current one."))
    user.set_password(new_password)
    user.must_change_password = False
    logins.end_all(user.id, keep=keep_login)


def reset_mfa(user: User) -> None:
    """Remove the account's second factors, its app and its passkeys (a lost or stolen device), and end its
    logins, which a stolen device may have begun; it sets one up again when it next needs one."""
    if not passkeys.has_second_factor(user):
        raise AccountError(_("%(username)s has no second factor to reset.", username=user.username))
    if user.mfa_enabled:
        mfa.remove(user)
    for passkey in passkeys.of_account(user):
        db.session.delete(passkey)
    logins.end_all(user.id)


def _check_new_password(user: User, password: str) -> None:
    """An account of the company's sign-in has no password here, none to change or reset; others keep the policy."""
    if user.is_sso:
        raise AccountError(
            _("%(username)s signs in with the company's sign-in and has no password here.", username=user.username)
        )
    if problem := passwords.problem(password):
        raise AccountError(problem)


def _change_keeping_an_admin(user: User, **values: Role | bool | frozenset[Environment]) -> None:
    """Apply `values` to `user` unless no enabled admin working on both environments would remain.

    One conditional UPDATE, so a refusal leaves nothing to undo: it applies only while the account is not an enabled
    admin, or another enabled admin exists. On PostgreSQL the enabled admins' rows are locked first, so two admins
    demoting each other at once take turns, and the second's UPDATE sees the first's change. SQLite has one writer at
    a time, and the check and the change are one statement."""
    db.session.execute(select(User.id).where(User.role == Role.ADMIN, User.enabled.is_(True)).with_for_update())
    change = update(User).where(User.id == user.id).values(**values)
    after = {"role": user.role, "enabled": user.enabled, "environments": user.environments, **values}
    if not (after["role"] == Role.ADMIN and after["enabled"] and after["environments"] == EVERY_ENVIRONMENT):
        other = aliased(User)
        another_admin = exists().where(
            other.role == Role.ADMIN, other.enabled, other.environments == EVERY_ENVIRONMENT, other.id != user.id
        )
        change = change.where(
            or_(User.role != Role.ADMIN, User.enabled.is_(False), User.environments != EVERY_ENVIRONMENT, another_admin)
        )
    changed = cast("CursorResult[Any]", db.session.execute(change, execution_options={"synchronize_session": "fetch"}))
    if changed.rowcount != 1:
        raise AccountError(
            _(
                "%(username)s is the last enabled admin who works on both environments: make another account "
                "such an admin first, so someone can still run the portal.",
                username=user.username,
            )
        )
