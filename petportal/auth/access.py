"""Who may open which page, and where a login may send the user next."""

from functools import wraps
from urllib.parse import urlsplit

from flask import abort, redirect, request, url_for
from flask_login import current_user

from ..extensions import login
from .sessions import require_session_store


@login.unauthorized_handler
def send_to_login():
    """Anonymous users are sent to log in, and brought back afterwards (503 while logins cannot work)."""
    require_session_store()
    return redirect(url_for("auth.login", next=request.full_path.rstrip("?")))


def role_required(role):
    """Let in users who have `role` (admins have every role); send anonymous users to log in; 403 others."""

    def decorator(view):
        @wraps(view)
        def guarded(*args, **kwargs):
            if not current_user.is_authenticated:
                return send_to_login()
            if not current_user.has_role(role):
                abort(403)
            return view(*args, **kwargs)

        return guarded

    return decorator


def safe_next(target, default):
    """`target` if it is a path on this site, else `default`: never another host or scheme."""
    if not target or not target.startswith("/") or target.startswith("//"):
        return default
    if "\\" in target or any(ord(char) < 32 or ord(char) == 127 for char in target):
        return default
    parts = urlsplit(target)
    if parts.scheme or parts.netloc:
        return default
    return target
