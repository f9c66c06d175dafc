"""Probing each environment for the status page: reachable, latency, key, notices, stability."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from email.utils import parsedate_to_datetime
from enum import Enum
from typing import TYPE_CHECKING

from flask_babel import gettext as _
from flask_babel import ngettext

from petportal.i18n.lazy_text import lazy_gettext as _l
from petportal.petstore import PetStoreError, Unauthorized, Unavailable
from petportal.petstore.words import store_words

if TYPE_CHECKING:
    from petportal.petstore.environments import DeprecationNotice, Environments, Store
    from petportal.petstore.records import DescribedOperation


class Description(Enum):
    """What the probe learnt of an environment's API description (`openapi.json`)."""

    NOT_ASKED = "not_asked"  # the store was not reached, or refused the key: nothing is known of it
    READ = "read"
    NOT_PUBLISHED = "not_published"  # the store answered 404
    UNREADABLE = "unreadable"  # any other failure: it may exist


@dataclass
class EnvironmentStatus:
    """What an admin needs to know about one environment right now. The probe (on threads of its own) keeps the
    facts; `problem` puts them into words when the page is drawn, in the request's language."""

    environment: Store
    reachable: bool | None = None
    key_accepted: bool | None = None
    latency_ms: float | None = None
    failure: PetStoreError | None = None
    notices: dict[str, DeprecationNotice] = field(default_factory=dict)
    operations: dict[str, DescribedOperation] | None = None
    description: Description = Description.NOT_ASKED

    @property
    def description_unknown(self) -> str:
        """Why no operations are listed, saying only what the probe learnt (a rejected key tells nothing of them)."""
        match self.description:
            case Description.NOT_PUBLISHED:
                return _("No API description was published at %(file)s.", file="openapi.json")
            case Description.UNREADABLE:
                return _("The API description at %(file)s could not be read.", file="openapi.json")
            case Description.READ:
                return _("The API description at %(file)s lists no operations.", file="openapi.json")
        if self.key_accepted is False:
            return _("Not known: the pet store refused the key, so it was not asked.")
        return _("Not known: the pet store was not asked.")

    @property
    def problem(self) -> str | None:
        """What keeps the environment from being used, if anything."""
        if not self.environment.configured:
            return _("Not configured: set its URL and key to use it.")
        match self.failure:
            case None:
                return None
            case Unauthorized():
                return _("The %(environment)s key was rejected by the pet store.", environment=self.environment.name)
            case Unavailable(reason=reason, message=message, status=status):
                return _("Not reachable: %(message)s", message=store_words(reason, message, status))
        words = store_words(self.failure.reason, self.failure.message, self.failure.status)
        return _("Answered something outside the interface: %(message)s", message=words)


def probe_all(registry: Environments) -> list[EnvironmentStatus]:
    """Probe every environment at once, all within one upstream timeout, so the page has one deadline."""
    deadline = time.monotonic() + registry.timeout
    with ThreadPoolExecutor(max_workers=len(registry.all())) as pool:
        return list(pool.map(lambda environment: probe(registry, environment, deadline), registry.all()))


def probe(registry: Environments, environment: Store, deadline: float) -> EnvironmentStatus:
    """A cheap listPets call, then getPet (for its notices) and the API description, all before `deadline`."""
    status = EnvironmentStatus(environment)
    if not environment.configured:
        return status
    client = registry.client(environment.name)
    started = time.perf_counter()
    try:
        sample = client.list_pets(limit=1, deadline=deadline)
        status.latency_ms = (time.perf_counter() - started) * 1000
        status.reachable, status.key_accepted = True, True
    except PetStoreError as error:
        status.failure, status.reachable = error, not isinstance(error, Unavailable)
        if isinstance(error, Unauthorized):
            status.key_accepted = False
    if status.key_accepted:
        with suppress(PetStoreError):  # only the notices of the answer matter here
            client.get_pet(sample[0].id if sample else 1, deadline=deadline)
        try:
            status.operations = client.describe(deadline=deadline)
            status.description = Description.READ
        except PetStoreError as error:
            status.description = Description.NOT_PUBLISHED if error.status == 404 else Description.UNREADABLE
    status.notices = dict(registry.health(environment.name).notices)
    return status


# What each `x-stability` marker of the interface means, in people's words; anything else is not repeated.
STABILITY_WORDS = {
    "stable": _l("stable"),
    "beta": _l("beta: may still change"),
    "experimental": _l("experimental: may change or go away"),
}


@dataclass(frozen=True)
class NoticeInWords:
    """A Deprecation/Sunset notice as a person reads it."""

    deprecated: str
    removal: str


def in_words(notice: DeprecationNotice, today: date) -> NoticeInWords:
    """`Deprecation: @1733356800` as "deprecated since 2024-12-05"; `Sunset` as its date and the days left (in
    the request's language; dates as ISO 8601 in every language)."""
    since = _header_date(notice.deprecation, structured=True)
    if since is not None:
        deprecated = _("deprecated since %(date)s", date=since.isoformat())
    elif notice.deprecation and notice.deprecation.strip().lower() in ("true", "?1"):
        deprecated = _("deprecated")
    else:
        deprecated = (
            _("no Deprecation header") if not notice.deprecation else _("a Deprecation header the portal cannot read")
        )
    removal_date = _header_date(notice.sunset)
    if removal_date is None:
        removal = _("no removal date announced") if not notice.sunset else _("a Sunset header the portal cannot read")
    else:
        days = (removal_date - today).days
        when = removal_date.isoformat()
        if days > 0:
            removal = ngettext(
                "removal on %(date)s (%(num)d day left)", "removal on %(date)s (%(num)d days left)", days, date=when
            )
        elif days == 0:
            removal = _("removal on %(date)s (due today)", date=when)
        else:
            removal = ngettext(
                "removal on %(date)s (%(num)d day ago)", "removal on %(date)s (%(num)d days ago)", -days, date=when
            )
    return NoticeInWords(deprecated, removal)


def stability_in_words(marker: str | None) -> str:
    """An operation's `x-stability` marker as a word, or what its absence means."""
    if marker is None:
        return _("no stability marker (stable)")
    words = STABILITY_WORDS.get(marker.strip().lower())
    return str(words) if words is not None else _("a stability marker the portal does not know")


def _header_date(value: str | None, structured: bool = False) -> date | None:
    """The date of an HTTP-date, or of a structured `@<seconds>` date (RFC 9745), else None."""
    if not value:
        return None
    value = value.strip()
    try:
        if structured and value.startswith("@"):
            return datetime.fromtimestamp(int(value[1:]), UTC).date()
        return parsedate_to_datetime(value).astimezone(UTC).date()
    except (ValueError, TypeError, OverflowError, OSError):
        return None
