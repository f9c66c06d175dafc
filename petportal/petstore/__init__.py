"""The pet store client (typed records, typed errors, the one module that talks HTTP to the store) and the
environments it serves: production and staging, and the one the current request is served from (`active`)."""

from petportal.petstore.client import PetStoreClient
from petportal.petstore.errors import (
    Busy,
    Gone,
    InvalidRequest,
    NotFound,
    Operation,
    Outcome,
    OutcomeUnknown,
    PetStoreError,
    StoreReason,
    Unauthorized,
    Unavailable,
    UnexpectedResponse,
)
from petportal.petstore.records import (
    GET_PET_REMOVAL,
    INT64_MAX,
    LIMIT_DEFAULT,
    LIMIT_MAX,
    LIMIT_MIN,
    PET_STATUSES,
    Pet,
)

__all__ = [
    "GET_PET_REMOVAL",
    "INT64_MAX",
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
