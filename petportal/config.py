"""The one place that turns the process environment (and `.env`) into the portal's settings; no other module adds or
changes one. `load` layers the defaults below, the `PETSTORE_*` and `PETPORTAL_*` variables and a test's overrides, then
derives what follows from them (cookies, the cache's and login counters' back ends) and refuses what cannot work."""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal, cast, get_args
from urllib.parse import urlsplit

from dotenv import find_dotenv, load_dotenv
from flask import Flask, current_app

from petportal.secret_guard import SECRET_RUN, after_label

PACKAGE_DIR = Path(__file__).resolve().parent
# A checkout (editable install) keeps its data beside the package; an installed wheel uses Flask's default.
INSTANCE_PATH = str(PACKAGE_DIR.parent / "instance") if (PACKAGE_DIR.parent / "pyproject.toml").is_file() else None
# Compressed encodings, best first. Every browser takes both; zstd would add a third copy of each cached page.
ENCODINGS = ("br", "gzip")
# What is worth compressing: pages, their assets, the JSON of an import's progress.
COMPRESSED_TYPES = tuple(
    "text/html text/css text/javascript application/javascript application/json image/svg+xml".split()
)
# The cookie that keeps a login across browser restarts (auth/remember.py).
REMEMBER_COOKIE = "remember"
# The cookie naming the account that logged in from this browser, for the login counters (auth/devices.py).
DEVICE_COOKIE = "device"
# The endpoints of stylesheets, scripts and images: ours and Bootstrap-Flask's.
STATIC_ENDPOINTS = ("static", "bootstrap.static")
# A login's server-side session ends after this long unused, and after the absolute limit in any case.
SESSION_IDLE_LIMIT = timedelta(minutes=30)
SESSION_ABSOLUTE_LIMIT = timedelta(hours=12)
# A pet store key shorter than this is refused: the key guard matches runs of 12 of its characters, and a key that
# short cannot be told apart from ordinary text (docs/security.md).
SHORTEST_STORE_KEY = 16
# A session signing key shorter than this is refused outside the demo: 32 characters of token_urlsafe are 192 bits.
SECRET_KEY_LENGTH = 32
# The demo's stores and database, kept for `flask run --debug`'s reloader child to reuse (demo.py): their keys too.
DEMO_STARTED_VARIABLE = "PETPORTAL_DEMO_STARTED"
# How many createPet calls a bulk import sends at once: a few, so a large file goes quickly and others are served.
IMPORT_CONCURRENCY = 4
# Where the app keeps its `Settings`.
SETTINGS = "petportal.settings"


class Environment(StrEnum):
    """A pet store environment: its name in the variables, URLs, forms and the database."""

    PRODUCTION = "production"
    STAGING = "staging"


EVERY_ENVIRONMENT = frozenset(Environment)
# How log lines are written (PETPORTAL_LOG_FORMAT), and where bulk imports run: RQ workers, or threads of the portal.
LogFormat = Literal["text", "json"]
ImportRunner = Literal["rq", "embedded"]


@dataclass(frozen=True)
class PetStore:
    """One environment's pet store: `PETSTORE_<NAME>_URL` and `PETSTORE_<NAME>_KEY`, None when unset."""

    url: str | None = None
    key: str | None = None


@dataclass(frozen=True)
class SingleSignOn:
    """The company's OpenID Connect provider: the `PETPORTAL_OIDC_*` variables."""

    issuer: str
    client_id: str
    client_secret: str | None = None
    name: str = "single sign-on"
    role_claim: str = "groups"
    # A claim whose values (production, staging) set the environments an account may work on; None: both.
    environments_claim: str | None = None
    admin_values: frozenset[str] = frozenset()
    staff_values: frozenset[str] = frozenset()
    # How long a login made through the provider lasts at most (None: the 12 hours every login has).
    session_max_age: timedelta | None = None


@dataclass(frozen=True)
class Logging:
    """What the portal tells operators: its log lines' format, and traces (sent; continued from a caller's)."""

    format: LogFormat = "text"
    tracing: bool = False
    trust_trace_headers: bool = False


@dataclass(frozen=True)
class Settings:
    """Every setting of one app, typed, built once by `load` (`flask_config` fills `app.config`). Each is the setting of
    its name in capitals (as tests override it) but the sections `of` builds: `stores`, `single_sign_on`, `logging`."""

    stores: Mapping[Environment, PetStore]
    default_environment: Environment
    upstream_timeout: float
    upstream_pool_size: int
    upstream_concurrency: int
    https: bool
    trusted_hosts: Sequence[str] | None
    trusted_proxies: int
    cache_seconds: float
    stale_seconds: float
    redis_url: str | None
    require_admin_mfa: bool
    metrics_token: str | None
    logging: Logging
    public_url: str | None
    single_sign_on: SingleSignOn | None
    clock: Callable[[], datetime] | None
    password_hash: str
    import_concurrency: int
    import_lease_seconds: float
    import_watch_seconds: float
    import_runner: ImportRunner
    throttle_storage_uri: str | None
    throttle_storage_options: Mapping[str, float]
    demo: bool
    secret_key: str | None
    # Flask's and the extensions' own settings (SQLALCHEMY_*, MAX_CONTENT_LENGTH, LOGIN_LIMIT_*...), as given.
    flask: Mapping[str, object]

    def flask_config(self) -> dict[str, object]:
        """What Flask and the extensions read from `app.config`: their own settings, and those that follow from the
        portal's (cookies, the cache's back end, the database engine). A value given outright wins."""
        redis_url, cache = self.redis_url, self.cache_seconds
        # A failed statement's values (a password hash, a token) never reach a log line or a traceback; writers on
        # SQLite wait for each other instead of failing with "database is locked" (less than a worker's timeout).
        engine: dict[str, object] = {"hide_parameters": True}
        if str(self.flask["SQLALCHEMY_DATABASE_URI"]).startswith("sqlite"):
            engine["connect_args"] = {"timeout": 20}
        derived: dict[str, object] = {
            "SECRET_KEY": self.secret_key,
            "TRUSTED_HOSTS": self.trusted_hosts,  # Flask answers another Host with 400
            # Session and remember-me cookies: HttpOnly, SameSite=Lax, Secure whenever users come over HTTPS.
            "SESSION_COOKIE_HTTPONLY": True,
            "SESSION_COOKIE_SAMESITE": "Lax",
            "SESSION_COOKIE_SECURE": self.https,
            # The server-side session lives as long as it is used within the idle limit.
            "PERMANENT_SESSION_LIFETIME": SESSION_IDLE_LIMIT,
            # The micro-cache: off at 0 seconds, shared through Redis when there is one.
            "CACHE_TYPE": "NullCache" if not cache else "RedisCache" if redis_url else "SimpleCache",
            "CACHE_REDIS_URL": redis_url,
            "CACHE_KEY_PREFIX": "petportal:",
            "CACHE_NO_NULL_WARNING": True,  # PETPORTAL_CACHE_SECONDS=0 means off, on purpose
            # Pages carry their own timeout; a generation counter is kept 30 days after its last change. (Not 0,
            # "never": the in-process cache prunes those entries first when it is full, and pages would come back.)
            "CACHE_DEFAULT_TIMEOUT": 30 * 24 * 3600,
            "SQLALCHEMY_ENGINE_OPTIONS": engine,
        }
        if redis_url:  # a Redis that hangs must cost a page a moment, not a worker thread
            derived["CACHE_OPTIONS"] = {"socket_timeout": 0.25, "socket_connect_timeout": 0.25}
        return derived | dict(self.flask)

    @classmethod
    def of(cls, values: Mapping[str, Any]) -> Settings:
        """The typed settings of `values`, what `load` gathered by name in capitals; refuses unknown closed choices."""
        name, log_format, redis_url = values["DEFAULT_ENVIRONMENT"], values["LOG_FORMAT"], values["REDIS_URL"]
        if name not in EVERY_ENVIRONMENT:
            raise ConfigurationError(
                f"PETPORTAL_DEFAULT_ENVIRONMENT must be one of {', '.join(Environment)}, not {name!r}."
            )
        if log_format not in get_args(LogFormat):
            raise ConfigurationError(f"PETPORTAL_LOG_FORMAT must be text or json, not {log_format!r}.")
        oidc = values["OIDC"]
        # A Redis that hangs must cost a login a moment, not a worker thread.
        redis_timeouts = {"socket_timeout": 1, "socket_connect_timeout": 1} if redis_url else {}
        given = {field.name: values[field.name.upper()] for field in fields(cls) if field.name.upper() in values}
        given.update(
            stores=stores(values["PETSTORE_ENVIRONMENTS"]),
            default_environment=Environment(name),
            logging=Logging(log_format, values["TRACING"], values["TRUST_TRACE_HEADERS"]),
            single_sign_on=SingleSignOn(**oidc) if isinstance(oidc, Mapping) else oidc,
            secret_key=values.get("SECRET_KEY"),
            # Two threads of each worker never wait on the pet store: health checks, cached pages and static files
            # are served even while the store hangs.
            upstream_concurrency=values.get("UPSTREAM_CONCURRENCY", max(1, values["UPSTREAM_POOL_SIZE"] - 2)),
            # Bulk imports run on RQ workers where there is a Redis, else on threads of the portal's own process.
            import_runner=values.get("IMPORT_RUNNER", "rq" if redis_url else "embedded"),
            # The login counters: in Redis when there is one, else (None) in the portal's database (throttle.py).
            throttle_storage_uri=values.get("THROTTLE_STORAGE_URI", redis_url),
            throttle_storage_options=values.get("THROTTLE_STORAGE_OPTIONS", redis_timeouts),
            flask={key: value for key, value in values.items() if key.lower() not in PORTAL_SETTINGS},
        )
        return cls(**given)


# The portal's own settings by name, and the names of its sections' settings: none of them goes to `app.config`.
PORTAL_SETTINGS = {field.name for field in fields(Settings)}
PORTAL_SETTINGS |= {"petstore_environments", "oidc", "log_format", "tracing", "trust_trace_headers"}


def stores(given: Mapping[str, PetStore | Mapping[str, str | None]]) -> dict[Environment, PetStore]:
    """Each environment's pet store, from what `load` was given (a test may give mappings of `url` and `key`)."""
    found = {
        Environment(name): PetStore(**store) if isinstance(store, Mapping) else store for name, store in given.items()
    }
    return {name: found.get(name, PetStore()) for name in Environment}


def settings(app: Flask | None = None) -> Settings:
    """The settings of `app`, or of the app of this request or command."""
    return cast(Settings, (app or current_app).extensions[SETTINGS])


def defaults(instance_path: str) -> dict[str, Any]:
    """The settings that hold until a variable or a test says otherwise."""
    return {
        "SQLALCHEMY_DATABASE_URI": f"sqlite:///{os.path.join(instance_path, 'petportal.sqlite')}",
        "BOOTSTRAP_SERVE_LOCAL": True,
        "WTF_CSRF_TIME_LIMIT": None,
        # How data/passwords.py hashes a password (werkzeug's method): scrypt; the tests choose a cheap one.
        "PASSWORD_HASH": "scrypt",
        "CLOCK": None,  # the real time (clock.now); a test may set its own
        "LOGIN_LIMIT_PER_ACCOUNT_ADDRESS": "5 per minute; 20 per hour",
        "LOGIN_LIMIT_PER_ADDRESS": "20 per minute; 100 per hour",
        "LOGIN_LIMIT_PER_ACCOUNT": "30 per minute; 100 per hour",
        # One account from a browser where it logged in before, in place of the account's own ceiling.
        "LOGIN_LIMIT_PER_DEVICE": "5 per minute; 20 per hour",
        # Second-factor codes, per account from anywhere: a million codes, three valid at a time.
        "MFA_LIMIT_PER_ACCOUNT": "5 per minute; 20 per hour",
        # A body over 1 MB gets 413; the bulk add's CSV upload (1 MB) has room for its form (front_door.body_limit).
        "MAX_CONTENT_LENGTH": 1024 * 1024,
        "IMPORT_CONCURRENCY": IMPORT_CONCURRENCY,
        # How long a runner holds an import without renewing (it renews every second); then another may take it over.
        "IMPORT_LEASE_SECONDS": 10.0,
        # How often each portal process (without Redis) or import worker looks for imports to pick up.
        "IMPORT_WATCH_SECONDS": 5.0,
        # Flask-Compress, called by web/compression.py (no Date: page_cache.ServerDated).
        "COMPRESS_REGISTER": False,
        "COMPRESS_ALGORITHM": list(ENCODINGS),
        "COMPRESS_MIMETYPES": list(COMPRESSED_TYPES),
        "COMPRESS_BR_LEVEL": 5,
        # A streamed response is sent as it is: its stream would not be closed once compressed (an open file
        # left behind per static file). Static files are read whole first (static_files), so they are compressed.
        "COMPRESS_STREAMS": False,
    }


def load(
    instance_path: str, overrides: Mapping[str, Any] | None = None, demo: Mapping[str, Any] | None = None
) -> Settings:
    """Every setting of one app, from the process environment, checked (`ConfigurationError` names the variable to
    fix). `demo`: the settings of the demo an entry point started (its stores, database and address; demo.py)."""
    values = defaults(instance_path)
    values.update(from_environment(os.environ))
    values["DEMO"] = demo is not None
    if demo is not None:  # the demo's stores, its own database and where it is reached; PETPORTAL_PUBLIC_URL still wins
        values.update(demo, PUBLIC_URL=values["PUBLIC_URL"] or demo["PUBLIC_URL"])
    values.update(overrides or {})
    if values["DEMO"] and not values.get("SECRET_KEY"):
        values["SECRET_KEY"] = secrets.token_urlsafe(32)  # demo sessions last as long as the process
    for name in ("HTTPS", "REQUIRE_ADMIN_MFA"):  # on, but off in the demo: plain http://localhost, no phone needed
        if values[name] is None:
            values[name] = not values["DEMO"]
    if not values["DEMO"] and no_pet_store(stores(values["PETSTORE_ENVIRONMENTS"])):
        # Production never falls into the demo: only `python app.py` and `flask --app app run` start it.
        raise ConfigurationError(
            "no pet store is configured: set PETSTORE_PRODUCTION_URL and PETSTORE_PRODUCTION_KEY "
            "(to try the portal without one, run the demo: python app.py)."
        )
    for name, store in stores(values["PETSTORE_ENVIRONMENTS"]).items():
        _check_pet_store(name, store.url, store.key)
    settings = Settings.of(values)
    check(settings)
    return settings


class ConfigurationError(SystemExit):
    """A configuration variable is missing or unusable; the message names it. A SystemExit, so every entry point
    (`python app.py`, `flask ...`, gunicorn) ends with this one line on stderr and a non-zero status, no traceback."""

    def __init__(self, message: str) -> None:
        super().__init__(f"Pet Portal cannot start: {message}")


def _number(environ: Mapping[str, str], name: str, default: Any, kind: type = float, minimum: float = 0) -> Any:
    raw = environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = kind(raw)
    except ValueError:
        raise ConfigurationError(f"{name} must be a number, not {raw!r}.") from None
    if value < minimum:
        raise ConfigurationError(f"{name} must be at least {minimum}, not {raw!r}.")
    return value


def _flag(environ: Mapping[str, str], name: str, default: bool | None) -> bool | None:
    raw = environ.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise ConfigurationError(f"{name} must be 1 or 0, not {raw!r}.")


def _listed(environ: Mapping[str, str], name: str) -> list[str]:
    """The comma-separated values of the variable `name`, blanks left out."""
    return [value.strip() for value in environ.get(name, "").split(",") if value.strip()]


def _read_dotenv() -> None:
    """The working directory's .env (not this file's: hence usecwd) into the environment; a variable set wins."""
    load_dotenv(find_dotenv(usecwd=True), override=False)


def pet_stores(environ: Mapping[str, str]) -> dict[Environment, PetStore]:
    """Each environment's URL and key, from `PETSTORE_<NAME>_URL` and `PETSTORE_<NAME>_KEY` (None when unset)."""
    return {
        name: PetStore(*(environ.get(f"PETSTORE_{name}_{part}".upper(), "").strip() or None for part in ("url", "key")))
        for name in Environment
    }


def no_pet_store(environments: Mapping[Environment, PetStore]) -> bool:
    """Whether no pet store is configured at all: no URL and no key of any environment."""
    return not any(store.url or store.key for store in environments.values())


def demo_wanted(environ: Mapping[str, str]) -> bool:
    """Whether a demo entry point (`python app.py`, `flask --app app run`, and those alone) runs the demo: when no
    pet store is configured. The one place that decides demo mode; every other entry point refuses to start then
    (`check`). The demo never runs on a configured PETPORTAL_DATABASE_URL: it would reset that database's accounts."""
    _read_dotenv()
    if not no_pet_store(pet_stores(environ)):
        return False
    if environ.get("PETPORTAL_DATABASE_URL", "").strip():
        raise ConfigurationError(
            "PETPORTAL_DATABASE_URL is set but no PETSTORE_*_URL is: demo mode never touches a configured "
            "database. Set the pet store URLs and keys, or unset PETPORTAL_DATABASE_URL to run the demo."
        )
    return True


def from_environment(environ: Mapping[str, str], read_dotenv: bool = True) -> dict[str, Any]:
    """Flask settings from the `PETSTORE_*` and `PETPORTAL_*` variables."""
    if read_dotenv:
        _read_dotenv()
    settings = {
        "PETSTORE_ENVIRONMENTS": pet_stores(environ),
        "DEFAULT_ENVIRONMENT": environ.get("PETPORTAL_DEFAULT_ENVIRONMENT", "").strip() or "production",
        "UPSTREAM_TIMEOUT": _number(environ, "PETPORTAL_UPSTREAM_TIMEOUT", 5.0, minimum=0.1),
        # gunicorn.conf.py's threads per worker: every thread can hold its own keep-alive connection upstream.
        "UPSTREAM_POOL_SIZE": _number(environ, "PETPORTAL_UPSTREAM_POOL_SIZE", 8, kind=int, minimum=1),
        # HTTPS and REQUIRE_ADMIN_MFA: None until `load` knows whether this is demo mode (a test's overrides may say).
        "HTTPS": _flag(environ, "PETPORTAL_HTTPS", None),
        "TRUSTED_HOSTS": _listed(environ, "PETPORTAL_TRUSTED_HOSTS") or None,
        "TRUSTED_PROXIES": _number(environ, "PETPORTAL_TRUSTED_PROXIES", 0, kind=int),
        "CACHE_SECONDS": _number(environ, "PETPORTAL_CACHE_SECONDS", 2.0),
        # How long the store's last good answer to a read may stand in while the store is not answering (0: never).
        "STALE_SECONDS": _number(environ, "PETPORTAL_STALE_SECONDS", 3600.0),
        "REDIS_URL": environ.get("PETPORTAL_REDIS_URL", "").strip() or None,
        "REQUIRE_ADMIN_MFA": _flag(environ, "PETPORTAL_REQUIRE_ADMIN_MFA", None),
        "METRICS_TOKEN": environ.get("PETPORTAL_METRICS_TOKEN", "").strip() or None,
        "LOG_FORMAT": environ.get("PETPORTAL_LOG_FORMAT", "").strip().lower() or "text",
        "TRACING": _tracing_wanted(environ),
        # An incoming traceparent is continued only from a proxy or mesh the operator runs (tracing.register).
        "TRUST_TRACE_HEADERS": _flag(environ, "PETPORTAL_TRUST_TRACE_HEADERS", False),
        "PUBLIC_URL": environ.get("PETPORTAL_PUBLIC_URL", "").strip().rstrip("/") or None,
        "OIDC": _single_sign_on(environ),
    }
    if environ.get("PETPORTAL_SECRET_KEY"):
        settings["SECRET_KEY"] = environ["PETPORTAL_SECRET_KEY"]
    if environ.get("PETPORTAL_DATABASE_URL"):
        settings["SQLALCHEMY_DATABASE_URI"] = environ["PETPORTAL_DATABASE_URL"]
    return settings


def _single_sign_on(environ: Mapping[str, str]) -> SingleSignOn | None:
    """The identity provider's settings, or None when PETPORTAL_OIDC_ISSUER is not set (no single sign-on)."""
    issuer = environ.get("PETPORTAL_OIDC_ISSUER", "").strip()
    if not issuer:
        return None
    max_age = _number(environ, "PETPORTAL_OIDC_SESSION_MAX_AGE", None, int, minimum=60)
    return SingleSignOn(
        issuer=issuer,
        client_id=environ.get("PETPORTAL_OIDC_CLIENT_ID", "").strip(),
        client_secret=environ.get("PETPORTAL_OIDC_CLIENT_SECRET", "").strip() or None,
        name=environ.get("PETPORTAL_OIDC_NAME", "").strip() or "single sign-on",
        role_claim=environ.get("PETPORTAL_OIDC_ROLE_CLAIM", "").strip() or "groups",
        environments_claim=environ.get("PETPORTAL_OIDC_ENVIRONMENTS_CLAIM", "").strip() or None,
        admin_values=frozenset(_listed(environ, "PETPORTAL_OIDC_ADMIN_VALUES")),
        staff_values=frozenset(_listed(environ, "PETPORTAL_OIDC_STAFF_VALUES")),
        session_max_age=None if max_age is None else timedelta(seconds=max_age),
    )


def secret_variables(environ: Mapping[str, str]) -> list[str]:
    """The variables of `environ` holding a secret the portal reads once, when the app is built (URLs may hold
    passwords, the exporter's headers a collector's credentials); not those a library reads again, as PGPASSWORD."""
    secrets_read = {
        *(f"PETSTORE_{name.upper()}_KEY" for name in Environment),
        "PETPORTAL_SECRET_KEY",
        "PETPORTAL_OIDC_CLIENT_SECRET",
        "PETPORTAL_METRICS_TOKEN",
        "PETPORTAL_DATABASE_URL",
        "PETPORTAL_REDIS_URL",
        DEMO_STARTED_VARIABLE,
        "OTEL_EXPORTER_OTLP_HEADERS",
        "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
    }
    return sorted(name for name in environ if name in secrets_read)


def secret_values(settings: Settings) -> tuple[str, ...]:
    """The secrets among the settings, which no log line or span may quote (`egress`)."""
    values = [store.key for store in settings.stores.values()]
    values += [settings.secret_key, settings.single_sign_on.client_secret if settings.single_sign_on else None]
    return tuple(value for value in [*values, settings.metrics_token] if value)


def check(settings: Settings) -> None:
    """Refuse a configuration that cannot work, naming the variable (`load` checks the stores, `of` closed choices)."""
    name = settings.default_environment
    if not settings.demo and not settings.stores[name].url:
        raise ConfigurationError(
            f"PETPORTAL_DEFAULT_ENVIRONMENT is {name}, but PETSTORE_{name.upper()}_URL is not set."
        )
    if not settings.secret_key:
        raise ConfigurationError("PETPORTAL_SECRET_KEY is not set; the portal needs it to sign sessions.")
    if not settings.demo and len(settings.secret_key) < SECRET_KEY_LENGTH:
        raise ConfigurationError(
            f"PETPORTAL_SECRET_KEY must be at least {SECRET_KEY_LENGTH} characters long, not "
            f"{len(settings.secret_key)}; make one with: python -c 'import secrets; print(secrets.token_urlsafe(32))'"
        )
    redis_url = settings.redis_url
    if redis_url and not redis_url.startswith(("redis://", "rediss://")):
        # The sessions' Redis client would take unix://, but the login counters (`limits`, opened at the first
        # login) would not: every login would be refused, so the portal does not start.
        scheme = redis_url.partition(":")[0][:20]  # never the rest, which may hold a password
        raise ConfigurationError(
            f"PETPORTAL_REDIS_URL must start with redis:// or rediss://, such as redis://127.0.0.1:6379/0, "
            f"not {scheme!r}."
        )
    public_url = settings.public_url
    if public_url and (not public_url.startswith(("http://", "https://")) or urlsplit(public_url).path):
        raise ConfigurationError(
            f"PETPORTAL_PUBLIC_URL must be the portal's address, such as https://pets.example.com, not {public_url!r}."
        )
    oidc = settings.single_sign_on
    if oidc is not None:
        if not oidc.issuer.startswith(("https://", "http://")):
            raise ConfigurationError(f"PETPORTAL_OIDC_ISSUER must be the provider's URL, not {oidc.issuer!r}.")
        if not oidc.client_id:
            raise ConfigurationError("PETPORTAL_OIDC_ISSUER is set, but PETPORTAL_OIDC_CLIENT_ID is not.")
        if not public_url:
            raise ConfigurationError(
                "PETPORTAL_OIDC_ISSUER is set, but PETPORTAL_PUBLIC_URL (the sign-in's way back) is not."
            )
        if not oidc.admin_values and not oidc.staff_values:
            raise ConfigurationError(
                "PETPORTAL_OIDC_ISSUER is set, but neither PETPORTAL_OIDC_ADMIN_VALUES nor "
                "PETPORTAL_OIDC_STAFF_VALUES: nobody could sign in."
            )


def _check_pet_store(name: str, url: str | None, key: str | None) -> None:
    """Refuse a URL that is not the API's base, or a URL or key without the other (pages would say: key rejected)."""
    prefix = f"PETSTORE_{name.upper()}"
    if url and not url.startswith(("http://", "https://")):
        raise ConfigurationError(f"{prefix}_URL must start with http:// or https://, not {url!r}.")
    if url and not url.rstrip("/").endswith("/v1"):
        raise ConfigurationError(
            f"{prefix}_URL must be the API's base URL, ending in /v1 (for example "
            f"https://petstore.example/v1), not {url!r}."
        )
    if url and not key:
        raise ConfigurationError(f"{prefix}_URL is set, but {prefix}_KEY is not: set the key the pet store gave you.")
    if key and not url:
        raise ConfigurationError(f"{prefix}_KEY is set, but {prefix}_URL is not: set the pet store's base URL.")
    if key and len(key) < SHORTEST_STORE_KEY:
        raise ConfigurationError(
            f"{prefix}_KEY must be at least {SHORTEST_STORE_KEY} characters long, not {len(key)}: a key that short "
            "cannot be told apart from ordinary text."
        )
    if key and sum(map(str.isalnum, after_label(key))) < SECRET_RUN:
        raise ConfigurationError(
            f"{prefix}_KEY must hold at least {SECRET_RUN} letters and digits besides a label such as sk_live_: "
            "fewer cannot be told apart from ordinary text."
        )


def _tracing_wanted(environ: Mapping[str, str]) -> bool:
    """Whether these variables ask for traces (telemetry/tracing.py starts them)."""
    endpoint = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "") or environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
    disabled = environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"
    return bool(endpoint.strip()) and not disabled


def shipped_folder(name: str) -> str:
    """`templates` or `static`: inside the installed package (a wheel), or at the top of the checkout."""
    inside = PACKAGE_DIR / name
    return str(inside if inside.is_dir() else PACKAGE_DIR.parent / name)
