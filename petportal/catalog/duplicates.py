"""Whether an animal about to be added copies one the target store lists: the one rule for the add form and previews.

The store has no delete, so a copy made by mistake stays. An animal whose name, category and status equal one of the
target store's latest `listPets` (up to `LIMIT_MAX`) is flagged before anything is sent: the add form asks to confirm,
a preview leaves the row out unless it is chosen.
"""

from collections.abc import Mapping

from petportal.catalog.adding import NewAnimal
from petportal.petstore import LIMIT_MAX, PetStoreClient

# What makes a copy: name, category id and status (None: no status).
Likeness = tuple[str, int, str | None]


def listed(client: PetStoreClient) -> dict[Likeness, int]:
    """The target store's listed animals by what makes a copy, each with its id (the first, if the store has copies)."""
    found: dict[Likeness, int] = {}
    for animal in client.list_pets(limit=LIMIT_MAX):
        found.setdefault((animal.name, animal.category_id, animal.status), animal.id)
    return found


def copy_of(animal: NewAnimal, listed: Mapping[Likeness, int]) -> int | None:
    """The id of the listed animal that `animal` would copy (same name, category and status), or None."""
    return listed.get((animal.name, animal.category_id, animal.status))
