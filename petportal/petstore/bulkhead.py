"""The bulkhead: how many threads of one process may wait on one pet store deployment at once.

A place frees within milliseconds while the store is quick, so a call waits for one then. While the
calls under way have been waiting long (the store hangs), a call gets no place at once and its page
is answered "busy": the threads left over keep serving health checks, cached pages and static files.
"""

import threading
import time

# A call under way this long means the store is slow: newcomers are not queued behind it.
SLOW_CALL_SECONDS = 0.5


class Bulkhead:
    """At most `size` calls at once; a call waits for a place only while the calls under way are quick."""

    def __init__(self, size: int, patience: float = SLOW_CALL_SECONDS) -> None:
        self.size = size
        self._places = threading.BoundedSemaphore(size)
        self._patience = patience
        self._lock = threading.Lock()
        self._started: dict[int, float] = {}

    def enter(self, deadline: float) -> bool:
        """Take a place; False when none is free before `deadline` or the store is slow (then nothing was taken)."""
        taken = self._places.acquire(blocking=False)
        if not taken and self._oldest_call_age() < self._patience:
            taken = self._places.acquire(timeout=max(0.0, min(self._patience, deadline - time.monotonic())))
        if taken:
            with self._lock:
                self._started[threading.get_ident()] = time.monotonic()
        return taken

    def leave(self) -> None:
        """Give back the place this thread took."""
        with self._lock:
            self._started.pop(threading.get_ident(), None)
        self._places.release()

    def _oldest_call_age(self) -> float:
        with self._lock:
            return time.monotonic() - min(self._started.values(), default=time.monotonic())
