"""The portal's configuration, read from environment variables (and `.env`), checked before start."""

from dotenv import find_dotenv, load_dotenv

ENVIRONMENT_NAMES = ("production", "staging")


class ConfigurationError(SystemExit):
    """A configuration variable is missing or unusable; the message names it.

    A SystemExit, so every entry point (`python app.py`, `flask ...`, gunicorn) ends with this one
    line on standard error and a non-zero status, never a traceback.
    """

    def __init__(self, message):
        super().__init__(f"Pet Portal cannot start: {message}")
        self.message = message


def _number(environ, name, default, kind=float, minimum=0):
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


def _flag(environ, name, default):
    raw = environ.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise ConfigurationError(f"{name} must be 1 or 0, not {raw!r}.")


def from_environment(environ, read_dotenv=True):
    """Flask settings from the `PETSTORE_*` and `PETPORTAL_*` variables."""
    if read_dotenv:
        # The working directory's .env; without usecwd python-dotenv searches from this file instead.
        load_dotenv(find_dotenv(usecwd=True), override=False)
    environments = {
        name: {
            "url": environ.get(f"PETSTORE_{name.upper()}_URL", "").strip() or None,
            "key": environ.get(f"PETSTORE_{name.upper()}_KEY", "").strip() or None,
        }
        for name in ENVIRONMENT_NAMES
    }
    demo = not any(settings["url"] for settings in environments.values())
    pool_size = _number(environ, "PETPORTAL_UPSTREAM_POOL_SIZE", 16, kind=int, minimum=1)
    settings = {
        "PETSTORE_ENVIRONMENTS": environments,
        "DEFAULT_ENVIRONMENT": environ.get("PETPORTAL_DEFAULT_ENVIRONMENT", "").strip() or "production",
        "UPSTREAM_TIMEOUT": _number(environ, "PETPORTAL_UPSTREAM_TIMEOUT", 5.0, minimum=0.1),
        # Set by gunicorn.conf.py to its thread count, so every worker thread can hold a connection.
        "UPSTREAM_POOL_SIZE": pool_size,
        # Two threads of each worker never wait on the pet store, so health checks, cached pages and
        # static files are served even while the store hangs.
        "UPSTREAM_CONCURRENCY": max(1, pool_size - 2),
        "HTTPS": _flag(environ, "PETPORTAL_HTTPS", not demo),
        "TRUSTED_HOSTS": [h.strip() for h in environ.get("PETPORTAL_TRUSTED_HOSTS", "").split(",") if h.strip()]
        or None,
        "TRUSTED_PROXIES": _number(environ, "PETPORTAL_TRUSTED_PROXIES", 0, kind=int),
        "CACHE_SECONDS": _number(environ, "PETPORTAL_CACHE_SECONDS", 2.0),
        "REDIS_URL": environ.get("PETPORTAL_REDIS_URL", "").strip() or None,
        "DATABASE_CONFIGURED": bool(environ.get("PETPORTAL_DATABASE_URL", "").strip()),
        "METRICS_TOKEN": environ.get("PETPORTAL_METRICS_TOKEN", "").strip() or None,
        "LOG_FORMAT": environ.get("PETPORTAL_LOG_FORMAT", "").strip().lower() or "text",
    }
    if environ.get("PETPORTAL_SECRET_KEY"):
        settings["SECRET_KEY"] = environ["PETPORTAL_SECRET_KEY"]
    if environ.get("PETPORTAL_DATABASE_URL"):
        settings["SQLALCHEMY_DATABASE_URI"] = environ["PETPORTAL_DATABASE_URL"]
    return settings


def is_demo(config):
    """Demo mode: no environment has a URL, so the portal serves its own reference stores."""
    return not any(settings["url"] for settings in config["PETSTORE_ENVIRONMENTS"].values())


def check(config):
    """Refuse to start with a configuration that cannot work, naming the variable to fix."""
    if config["DEFAULT_ENVIRONMENT"] not in ENVIRONMENT_NAMES:
        raise ConfigurationError(
            f"PETPORTAL_DEFAULT_ENVIRONMENT must be one of {', '.join(ENVIRONMENT_NAMES)}, "
            f"not {config['DEFAULT_ENVIRONMENT']!r}."
        )
    default = config["PETSTORE_ENVIRONMENTS"][config["DEFAULT_ENVIRONMENT"]]
    if not is_demo(config) and not default["url"]:
        name = config["DEFAULT_ENVIRONMENT"]
        raise ConfigurationError(
            f"PETPORTAL_DEFAULT_ENVIRONMENT is {name}, but PETSTORE_{name.upper()}_URL is not set."
        )
    if config["LOG_FORMAT"] not in ("text", "json"):
        raise ConfigurationError(f"PETPORTAL_LOG_FORMAT must be text or json, not {config['LOG_FORMAT']!r}.")
    if not config.get("SECRET_KEY"):
        raise ConfigurationError("PETPORTAL_SECRET_KEY is not set; the portal needs it to sign sessions.")
    for name, settings in config["PETSTORE_ENVIRONMENTS"].items():
        url = settings["url"]
        if url and not url.startswith(("http://", "https://")):
            raise ConfigurationError(f"PETSTORE_{name.upper()}_URL must start with http:// or https://, not {url!r}.")
        if url and not url.rstrip("/").endswith("/v1"):
            raise ConfigurationError(
                f"PETSTORE_{name.upper()}_URL must be the API's base URL, ending in /v1 (for example "
                f"https://petstore.example/v1), not {url!r}."
            )
