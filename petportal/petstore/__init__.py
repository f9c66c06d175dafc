"""The pet store client: typed records, typed errors, and the one module that talks HTTP to the store."""

from .client import PetStoreClient
from .errors import (
    Busy,
    Gone,
    InvalidRequest,
    NotFound,
    Outcome,
    OutcomeUnknown,
    PetStoreError,
    StoreReason,
    Unauthorized,
    Unavailable,
    UnexpectedResponse,
)
from .records import (
    GET_PET_REMOVAL,
    INT64_MAX,
    INT64_MIN,
    LIMIT_DEFAULT,
    LIMIT_MAX,
    LIMIT_MIN,
    PET_STATUSES,
    Operation,
    Pet,
)

__all__ = [
    "GET_PET_REMOVAL",
    "INT64_MAX",
    "INT64_MIN",
    "LIMIT_DEFAULT",
    "LIMIT_MAX",
    "LIMIT_MIN",
    "PET_STATUSES",
    "Busy",
    "Gone",
    "InvalidRequest",
    "NotFound",
    "Operation",
    "Outcome",
    "OutcomeUnknown",
    "Pet",
    "PetStoreClient",
    "PetStoreError",
    "StoreReason",
    "Unauthorized",
    "Unavailable",
    "UnexpectedResponse",
]
