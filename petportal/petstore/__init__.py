"""The pet store client: typed records, typed errors, and the one module that talks HTTP to the store."""

from .client import PetStoreClient
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
    "OutcomeUnknown",
    "Pet",
    "PetStoreClient",
    "PetStoreError",
    "Unauthorized",
    "Unavailable",
    "UnexpectedResponse",
]
