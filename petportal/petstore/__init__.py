"""The pet store client: typed records, typed errors, and the one module that talks HTTP to the store."""

from .client import DeprecationNotice, PetStoreClient
from .errors import (
    Gone,
    InvalidRequest,
    NotFound,
    OutcomeUnknown,
    PetStoreError,
    Unauthorized,
    Unavailable,
    UnexpectedResponse,
)
from .records import PET_STATUSES, Pet

__all__ = [
    "DeprecationNotice",
    "Gone",
    "InvalidRequest",
    "NotFound",
    "OutcomeUnknown",
    "PET_STATUSES",
    "Pet",
    "PetStoreClient",
    "PetStoreError",
    "Unauthorized",
    "Unavailable",
    "UnexpectedResponse",
]
