"""The one exception tree for everything that can go wrong talking to the pet store."""


class PetStoreError(Exception):
    """Base class: a pet store call did not give a usable answer.

    Carries what an operator needs (status, the API's code, method and URL) and never the key.
    """

    def __init__(self, message, *, status=None, code=None, method=None, url=None):
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.method = method
        self.url = url

    def __str__(self):
        where = f" ({self.method} {self.url})" if self.method else ""
        return f"{self.message}{where}"


class InvalidRequest(PetStoreError):
    """400: the store refused the request's values; `message` is the store's own explanation."""


class Unauthorized(PetStoreError):
    """401: the store rejected this environment's key."""


class NotFound(PetStoreError):
    """404: no animal has this id."""


class Gone(PetStoreError):
    """410: the store no longer offers this operation."""


class Unavailable(PetStoreError):
    """The store did not answer: refused, reset, timed out, rate-limited or a 5xx."""


class OutcomeUnknown(Unavailable):
    """A POST may have reached the store, but no answer came back: it may or may not have happened."""


class UnexpectedResponse(PetStoreError):
    """The store answered something outside the interface: bad JSON, wrong shape, too large, a redirect."""


STATUS_ERRORS = {400: InvalidRequest, 401: Unauthorized, 404: NotFound, 410: Gone}
