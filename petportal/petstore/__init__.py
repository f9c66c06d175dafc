"""The pet store client: typed records, typed errors, and the one module that talks HTTP to the store."""

from .client import DeprecationNotice, PetStoreClient
from .errors import (
    Busy,
    Gone,
    InvalidRequest,
    NotFound,
    OutcomeUnknown,
    PetStoreError,
    Unauthorized,
    Unavailable,
    UnexpectedResponse,
)
from .records import GET_PET_REMOVAL, PET_STATUSES, Operation, Pet

__all__ = [
    "Busy",
    "DeprecationNotice",
    "GET_PET_REMOVAL",
    "Gone",
    "InvalidRequest",
    "NotFound",
    "Operation",
    "OutcomeUnknown",
    "PET_STATUSES",
    "Pet",
    "PetStoreClient",
    "PetStoreError",
    "Unauthorized",
    "Unavailable",
    "UnexpectedResponse",
]
