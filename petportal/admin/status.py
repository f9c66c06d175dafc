"""Probing each environment for the status page: reachable, latency, key, notices, stability."""

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from ..petstore import NotFound, PetStoreError, Unauthorized, Unavailable


@dataclass
class EnvironmentStatus:
    """What an admin needs to know about one environment right now."""

    environment: object
    reachable: bool | None = None
    key_accepted: bool | None = None
    latency_ms: float | None = None
    problem: str | None = None
    notices: dict = field(default_factory=dict)
    operations: dict | None = None


def probe_all(registry):
    """Probe every environment at once, so one slow environment does not delay the other."""
    with ThreadPoolExecutor(max_workers=len(registry.all())) as pool:
        return list(pool.map(lambda environment: probe(registry, environment), registry.all()))


def probe(registry, environment):
    """A cheap listPets call, then getPet (for its notices) and the API description."""
    status = EnvironmentStatus(environment)
    if not environment.configured:
        status.problem = "Not configured: set its URL and key to use it."
        return status
    client = registry.client(environment.name)
    started = time.perf_counter()
    try:
        sample = client.list_pets(limit=1)
        status.latency_ms = (time.perf_counter() - started) * 1000
        status.reachable, status.key_accepted = True, True
    except Unauthorized:
        status.reachable, status.key_accepted = True, False
        status.problem = f"The {environment.name} key was rejected by the pet store."
    except Unavailable as error:
        status.reachable = False
        status.problem = f"Not reachable: {error.message}"
    except PetStoreError as error:
        status.reachable = True
        status.problem = f"Answered something outside the interface: {error.message}"
    if status.key_accepted:
        try:
            client.get_pet(sample[0].id if sample else 1)
        except (NotFound, PetStoreError):
            pass  # only the notices of the answer matter here
        try:
            status.operations = client.describe()
        except PetStoreError:
            status.operations = None
    status.notices = dict(client.notices)
    return status
