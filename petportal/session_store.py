"""Sessions kept on the server (Flask-Session): in Redis when configured, else in the portal's database.

The browser's cookie holds only a random id. When the store cannot be reached, a request carries on
with an empty session marked `unavailable`, so customers keep browsing; pages that need a login
answer 503 instead (see `auth.sessions`).
"""

import logging
import random

import redis
from flask_session.base import ServerSideSession, ServerSideSessionInterface
from flask_session.redis import RedisSessionInterface
from sqlalchemy import delete, text

from .clock import now
from .extensions import db
from .models import ServerSession

log = logging.getLogger(__name__)
KEY_PREFIX = "petportal:session:"
# Flask-Session's own default: 32 random bytes, URL-safe.
ID_BYTES = 32
# Expired rows of the database store are deleted on about one write in this many.
CLEANUP_EVERY = 200


class UnavailableSession(ServerSideSession):
    """An empty session that will not be saved: the store could not be reached for this request."""

    unavailable = True


class _Resilient:
    """A store that is down costs one log line and an empty session, never an error page."""

    def reachable(self):
        """Whether the store answers right now (asked only where a login is about to need it)."""
        try:
            self._ping()
        except Exception as error:  # noqa: BLE001 - any failure of the store
            log.error("the session store is unavailable: %s", type(error).__name__)
            db.session.rollback()
            return False
        return True

    def open_session(self, app, request):
        try:
            session = super().open_session(app, request)
        except Exception as error:  # noqa: BLE001 - any failure of the store: Redis or the database
            log.error("the session store is unavailable: %s", type(error).__name__)
            db.session.rollback()
            return UnavailableSession(sid=self._generate_sid(ID_BYTES))
        session.unavailable = False
        return session

    def save_session(self, app, session, response):
        if getattr(session, "unavailable", True):
            return
        try:
            super().save_session(app, session, response)
        except Exception as error:  # noqa: BLE001 - as above
            log.error("the session could not be saved: %s", type(error).__name__)
            db.session.rollback()


class RedisSessions(_Resilient, RedisSessionInterface):
    """Sessions in Redis, which expires them by itself."""

    def _ping(self):
        self.client.ping()


class DatabaseSessions(_Resilient, ServerSideSessionInterface):
    """Sessions in the portal's database (table `server_sessions`), for a portal without Redis."""

    def _ping(self):
        db.session.execute(text("SELECT 1"))

    def _retrieve_session_data(self, store_id):
        row = db.session.get(ServerSession, store_id)
        if row is None or row.expires_at <= now():
            return None
        return self.serializer.decode(row.data)

    def _delete_session(self, store_id):
        db.session.execute(delete(ServerSession).where(ServerSession.id == store_id))
        db.session.commit()

    def _upsert_session(self, session_lifetime, session, store_id):
        data = self.serializer.encode(session)
        row = db.session.get(ServerSession, store_id)
        expires_at = now() + session_lifetime
        if row is None:
            db.session.add(ServerSession(id=store_id, data=data, expires_at=expires_at))
        else:
            row.data, row.expires_at = data, expires_at
        if random.randrange(CLEANUP_EVERY) == 0:
            self._delete_expired_sessions()
        db.session.commit()

    def _delete_expired_sessions(self):
        db.session.execute(delete(ServerSession).where(ServerSession.expires_at <= now()))


def register(app):
    """Keep this app's sessions on the server: Redis when `REDIS_URL` is set, else the database."""
    options = {
        "key_prefix": KEY_PREFIX,
        "use_signer": False,
        "permanent": True,
        "sid_length": ID_BYTES,
        "serialization_format": "msgpack",
    }
    if app.config["REDIS_URL"]:
        client = redis.Redis.from_url(app.config["REDIS_URL"], socket_timeout=1, socket_connect_timeout=1)
        app.session_interface = RedisSessions(app, client=client, **options)
    else:
        # Expired rows are removed as sessions are written; no cron job is needed.
        app.session_interface = DatabaseSessions(app, cleanup_n_requests=None, **options)
