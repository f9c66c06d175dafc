"""The pet store client (typed records, typed errors, the one module that talks HTTP to the store), its failures in
words, and the environments it talks to: production and staging, each with its clients and health."""

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
