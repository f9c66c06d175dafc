"""Sessions kept on the server (Flask-Session): in Redis when configured, else in the portal's database.

With the store down, a request carries on with an empty session marked `unavailable` (pages needing a login answer
503). The database store is the portal's own: Flask-Session's creates its table outside migrations, keeps naive
utcnow() expiries, and commits the request's shared session mid-login (`regenerate`)."""

import logging
import random
import secrets
from abc import abstractmethod
from datetime import timedelta

from flask import Flask, Request, Response, current_app, request, session
from flask.sessions import SessionMixin
from flask_session.base import ServerSideSession, ServerSideSessionInterface
from sqlalchemy import delete, text

from petportal.clock import now
from petportal.config import STATIC_ENDPOINTS, settings
from petportal.data import unit_of_work
from petportal.data.database import cause
from petportal.data.models import ServerSession
from petportal.extensions import db

log = logging.getLogger(__name__)
KEY_PREFIX = "petportal:session:"
# Flask-Session's own default: 32 random bytes, URL-safe.
ID_BYTES = 32
# Expired rows of the database store are deleted on about one write in this many.
CLEANUP_EVERY = 200


class UnavailableSession(ServerSideSession):
    """An empty session that will not be saved: the store could not be reached for this request."""

    unavailable = True


class ResilientSessions(ServerSideSessionInterface):
    """A store that is down costs one log line and an empty session, never an error page."""

    def reachable(self) -> bool:
        try:
            self._ping()
        except Exception as error:  # noqa: BLE001 - any failure of the store
            log.error("the session store is unavailable: %s", cause(error))
            # A failed statement leaves the database session unusable until it is rolled back.
            db.session.rollback()
            return False
        return True

    def open_session(self, app: Flask, request: Request) -> ServerSideSession:
        try:
            opened: ServerSideSession = super().open_session(app, request)
        except Exception as error:  # noqa: BLE001 - any failure of the store: Redis or the database
            log.error("the session store is unavailable: %s", cause(error))
            db.session.rollback()
            return UnavailableSession(sid=secrets.token_urlsafe(ID_BYTES))
        opened.unavailable = False
        return opened

    def save_session(self, app: Flask, session: SessionMixin, response: Response) -> None:
        """Save the session (never an unavailable one). A static file's request saves only a changed session: its
        stale copy would overwrite what the page's next request just wrote (a fresh CSRF token)."""
        if getattr(session, "unavailable", True):
            return
        if not session.modified and request.endpoint in STATIC_ENDPOINTS:
            return
        try:
            super().save_session(app, session, response)
            self._saved()
        except Exception as error:  # noqa: BLE001 - as above
            log.error("the session could not be saved: %s", cause(error))
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
        # Flask saves the session after the request's commit: its write is a unit of its own (if anything).
        if unit_of_work.pending():
            db.session.commit()

    def _retrieve_session_data(self, store_id: str) -> dict[str, object] | None:
        row = db.session.get(ServerSession, store_id)
        if row is None or row.expires_at <= now():
            return None
        data: dict[str, object] = self.serializer.decode(row.data)
        return data

    def _delete_session(self, store_id: str) -> None:
        db.session.execute(delete(ServerSession).where(ServerSession.id == store_id))

    def _upsert_session(self, session_lifetime: timedelta, session: ServerSideSession, store_id: str) -> None:
        row = ServerSession(id=store_id, data=self.serializer.encode(session), expires_at=now() + session_lifetime)
        db.session.merge(row)
        if random.randrange(CLEANUP_EVERY) == 0:
            db.session.execute(delete(ServerSession).where(ServerSession.expires_at <= now()))


def register(app: Flask) -> None:
    options = dict(
        key_prefix=KEY_PREFIX, use_signer=False, permanent=True, sid_length=ID_BYTES, serialization_format="msgpack"
    )
    if redis_url := settings(app).redis_url:
        # The Redis client (about 4 MB), imported by Flask-Session's Redis store, loads only where sessions live there.
        import redis
        from flask_session.redis import RedisSessionInterface

        class RedisSessions(ResilientSessions, RedisSessionInterface):
            def _ping(self) -> None:
                self.client.ping()

        client = redis.Redis.from_url(redis_url, socket_timeout=1, socket_connect_timeout=1)
        app.session_interface = RedisSessions(app, client=client, **options)
    else:
        app.session_interface = DatabaseSessions(app, **options)


def available() -> bool:
    return not getattr(session, "unavailable", False)


def reachable() -> bool:
    return _interface().reachable()


def regenerate() -> None:
    """A new id for this browser's session, the old one deleted: an id seen before a login is worthless after it."""
    _interface().regenerate(session)


def _interface() -> ResilientSessions:
    interface = current_app.session_interface
    if not isinstance(interface, ResilientSessions):
        raise RuntimeError("session_store.register(app) has not run for this app")
    return interface
