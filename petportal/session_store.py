"""Sessions kept on the server (Flask-Session): in Redis when configured, else in the portal's database.

The browser's cookie holds only a random id. When the store cannot be reached, a request carries on
with an empty session marked `unavailable`, so customers keep browsing; pages that need a login
answer 503 instead (see `auth.sessions`).

The database store is the portal's own rather than Flask-Session 0.8's `SqlAlchemySessionInterface`,
which does not fit the portal:
- it creates its table itself at start-up (`__table__.create(checkfirst=True)`, as a model added to the
  portal's own `db` metadata), outside migrations; `server_sessions` is made by migration 0002, as
  every schema change is;
- it stores and compares a naive `datetime.utcnow()` expiry (deprecated since Python 3.12), where the
  portal stores timezone-aware UTC times from `clock.now()`, the one clock a test can move;
- it commits the request's shared `db.session` inside `_delete_session`, `_upsert_session` and
  `_retrieve_session_data`, and rolls it back when they fail. `regenerate()` calls `_delete_session`
  in the middle of a login, so it would commit the request's half-done work, against the one commit
  at the request's end (see unit_of_work).
So the store below implements the three storage methods Flask-Session 0.8 declares abstract for a
backend (`_retrieve_session_data`, `_delete_session`, `_upsert_session`). Their names start with an
underscore, but they are the library's only way to add a store; nothing else of its private API is
used or overridden. Both stores override only the public `open_session` and `save_session` of Flask's
`SessionInterface`, to survive a store that is down.
"""

from __future__ import annotations

import logging
import random
import secrets
from abc import abstractmethod
from datetime import timedelta

from flask import Flask, Request, Response, current_app, request, session
from flask.sessions import SessionMixin
from flask_session.base import ServerSideSession, ServerSideSessionInterface
from sqlalchemy import delete, text

from . import unit_of_work
from .clock import now
from .config import settings
from .extensions import db
from .models import ServerSession

log = logging.getLogger(__name__)
KEY_PREFIX = "petportal:session:"
# Flask-Session's own default: 32 random bytes, URL-safe.
ID_BYTES = 32
# The requests for the portal's static files (its own, and Bootstrap-Flask's).
STATIC_ENDPOINTS = frozenset({"static", "bootstrap.static"})
# Expired rows of the database store are deleted on about one write in this many.
CLEANUP_EVERY = 200


class UnavailableSession(ServerSideSession):
    """An empty session that will not be saved: the store could not be reached for this request."""

    unavailable = True


class ResilientSessions(ServerSideSessionInterface):
    """A store that is down costs one log line and an empty session, never an error page."""

    def reachable(self) -> bool:
        """Whether the store answers right now (asked only where a login is about to need it)."""
        try:
            self._ping()
        except Exception as error:  # noqa: BLE001 - any failure of the store
            log.error("the session store is unavailable: %s", type(error).__name__)
            # A failed statement leaves the database session unusable until it is rolled back.
            db.session.rollback()
            return False
        return True

    def open_session(self, app: Flask, request: Request) -> ServerSideSession:
        """This browser's session, or an empty one marked unavailable when the store cannot be read."""
        try:
            opened: ServerSideSession = super().open_session(app, request)
        except Exception as error:  # noqa: BLE001 - any failure of the store: Redis or the database
            log.error("the session store is unavailable: %s", type(error).__name__)
            db.session.rollback()
            return UnavailableSession(sid=secrets.token_urlsafe(ID_BYTES))
        opened.unavailable = False
        return opened

    def save_session(self, app: Flask, session: SessionMixin, response: Response) -> None:
        """Save the session (never one that could not be read); a store that fails costs one log line.

        A static file's request leaves the session alone unless it changed it. Saving writes the whole session
        back, and a page's files are fetched while the page's own next request may be changing the session:
        the file's copy, read before that change, would overwrite it (a CSRF token just made, and so the form
        or the passkey button that needs it)."""
        if getattr(session, "unavailable", True):
            return
        if not session.modified and request.endpoint in STATIC_ENDPOINTS:
            return
        try:
            super().save_session(app, session, response)
            self._saved()
        except Exception as error:  # noqa: BLE001 - as above
            log.error("the session could not be saved: %s", type(error).__name__)
            db.session.rollback()

    @abstractmethod
    def _ping(self) -> None:
        """Raise when the store cannot be reached."""

    def _saved(self) -> None:
        """Make the session's write durable, once Flask-Session has written it."""


class DatabaseSessions(ResilientSessions):
    """Sessions in the portal's database (table `server_sessions`), for a portal without Redis."""

    def _ping(self) -> None:
        db.session.execute(text("SELECT 1"))

    def _saved(self) -> None:
        # Flask saves the session after the request's own commit (see unit_of_work): its write is a unit of its own.
        # An unchanged visitor's session writes nothing, and so commits nothing.
        if unit_of_work.pending():
            db.session.commit()

    def _retrieve_session_data(self, store_id: str) -> dict[str, object] | None:
        row = db.session.get(ServerSession, store_id)
        if row is None or row.expires_at <= now():
            return None
        data: dict[str, object] = self.serializer.decode(row.data)
        return data

    def _delete_session(self, store_id: str) -> None:
        # Part of the unit it runs in: a login's (through `regenerate`), or the session's save.
        db.session.execute(delete(ServerSession).where(ServerSession.id == store_id))

    def _upsert_session(self, session_lifetime: timedelta, session: ServerSideSession, store_id: str) -> None:
        data = self.serializer.encode(session)
        row = db.session.get(ServerSession, store_id)
        expires_at = now() + session_lifetime
        if row is None:
            db.session.add(ServerSession(id=store_id, data=data, expires_at=expires_at))
        else:
            row.data, row.expires_at = data, expires_at
        if random.randrange(CLEANUP_EVERY) == 0:
            db.session.execute(delete(ServerSession).where(ServerSession.expires_at <= now()))


def redis_sessions() -> type[ResilientSessions]:
    """The sessions kept in Redis, which expires them by itself: Flask-Session's Redis store, made resilient. A
    class made on demand, as its base imports the Redis client."""
    from flask_session.redis import RedisSessionInterface

    class RedisSessions(ResilientSessions, RedisSessionInterface):
        def _ping(self) -> None:
            self.client.ping()

    return RedisSessions


def register(app: Flask) -> None:
    """Keep this app's sessions on the server: Redis when `REDIS_URL` is set, else the database."""
    options = {
        "key_prefix": KEY_PREFIX,
        "use_signer": False,
        "permanent": True,
        "sid_length": ID_BYTES,
        "serialization_format": "msgpack",
    }
    if redis_url := settings(app).redis_url:
        import redis  # the Redis client (about 4 MB) is loaded only by a portal that keeps its sessions there

        client = redis.Redis.from_url(redis_url, socket_timeout=1, socket_connect_timeout=1)
        app.session_interface = redis_sessions()(app, client=client, **options)
    else:
        # Expired rows are removed as sessions are written (see CLEANUP_EVERY); no cron job is needed.
        app.session_interface = DatabaseSessions(app, **options)


def available() -> bool:
    """Whether this request's session could be read from its store (so it will be saved)."""
    return not getattr(session, "unavailable", False)


def reachable() -> bool:
    """Whether the session store answers right now."""
    return _interface().reachable()


def regenerate() -> None:
    """A new id for this browser's session, the old one deleted from the store: an id seen before a login is
    worthless after it."""
    _interface().regenerate(session)


def _interface() -> ResilientSessions:
    interface = current_app.session_interface
    if not isinstance(interface, ResilientSessions):
        raise RuntimeError("session_store.register(app) has not run for this app")
    return interface
