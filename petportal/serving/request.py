"""What serves the current request: one value, worked out once per request and read by everything else.

Views, the page cache, error pages, templates and the submission protocol all ask `serving()`; none
works out the environment, the preview or the client again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, cast

from flask import g, session
from flask_login import current_user

from petportal.petstore import PetStoreClient
from petportal.petstore.environments import Health, Store, environments
from petportal.serving.choice import active_choice

log = logging.getLogger(__name__)
PREVIEW_SESSION_KEY = "preview_environment"


@dataclass(frozen=True)
class Serving:
    """The environment this request is served from, its client, and what the portal knows of it."""

    environment: Store
    client: PetStoreClient
    preview: bool
    health: Health
    # The account may work on this environment alone: it is served whatever the active one is.
    limited: bool = False


def serving() -> Serving:
    """The request's `Serving`: an admin's own preview, else the environment active for everyone."""
    if "serving" not in g:
        g.serving = _resolve()
    return cast(Serving, g.serving)


def _resolve() -> Serving:
    registry = environments()
    environment = active_choice().active()
    only = registry.get(current_user.only_environment if current_user.is_authenticated else None)
    if only is not None:
        # An account limited to one environment sees and changes that one alone: no preview, no switch moves it.
        return Serving(only, registry.client(only.name), False, registry.health(only.name), limited=True)
    chosen = registry.get(session.get(PREVIEW_SESSION_KEY))
    preview = chosen is not None and chosen.configured and current_user.is_authenticated and current_user.is_admin
    if preview and chosen is not None:
        environment = chosen
    return Serving(environment, registry.client(environment.name), preview, registry.health(environment.name))


def previewed_name() -> str:
    """The environment this admin's session previews, or "" for none (what the preview form shows)."""
    name = session.get(PREVIEW_SESSION_KEY)
    return name if isinstance(name, str) else ""


def set_preview(environment: Store | None) -> None:
    """Serve `environment` to this session alone from its next request on; None ends the preview."""
    if environment is None:
        session.pop(PREVIEW_SESSION_KEY, None)
    else:
        session[PREVIEW_SESSION_KEY] = environment.name
    g.pop("serving", None)


def page_context() -> dict[str, Any]:
    """What every page shows of the environment served. Never raises: an error page must render even
    when nothing else works, so it then shows no environment at all."""
    try:
        current = serving()
        admin = current_user.is_authenticated and current_user.is_admin
    except Exception as error:  # noqa: BLE001 - the page is being drawn; the cause is logged elsewhere
        log.warning("the page is drawn without its environment: %s", type(error).__name__)
        return {"serving": None, "environment": None, "key_rejected": False}
    return {
        "serving": current,
        "environment": current.environment,
        "key_rejected": admin and current.environment.configured and current.health.key_rejected,
    }
