"""The store's failures in words: why a pet store call gave no usable answer (`StoreReason`), as pages, forms and
import results say it, in the reader's language."""

from petportal.i18n.lazy_text import lazy_gettext as _l
from petportal.petstore.errors import StoreReason

# Why a pet store call failed, as people are told it: the store's own words are shown as it said them.
STORE_REASONS = {
    StoreReason.STORE_SAID: "%(message)s",
    StoreReason.WITHHELD: _l("The pet store's message was withheld: it quoted a credential."),
    StoreReason.STATUS: _l("The store answered with status %(status)s."),
    # The detail is the client's technical one (which field of the answer was wrong): kept as it is.
    StoreReason.UNUSABLE: _l("The store's answer is unusable: %(message)s."),
    StoreReason.TOO_LARGE: _l("The store's answer is larger than the portal accepts."),
    StoreReason.TOO_SLOW: _l("The store's answer arrived too slowly."),
    StoreReason.UNDECODABLE: _l("The store's answer could not be decoded."),
    StoreReason.CONNECTION_BROKE: _l("The connection broke while the store was answering."),
    StoreReason.NO_ANSWER_IN_TIME: _l("The pet store did not answer in time."),
    StoreReason.CONNECTION_FAILED: _l("The connection to the pet store failed."),
    StoreReason.NOT_REACHED: _l("The pet store could not be reached."),
    StoreReason.NO_TIME_LEFT: _l("No time was left to ask the pet store."),
    StoreReason.TOO_BUSY: _l("Too many pages are waiting on the pet store already."),
}


def store_words(reason: StoreReason, message: str = "", status: int | None = None) -> str:
    """Why a pet store call failed (with its error's `message` and `status`), in the request's language."""
    return str(STORE_REASONS[reason]) % {"message": message, "status": status}
