"""Local processes on loopback ports (demo stores, tests, bench), and the malloc settings of a serving process."""

import ctypes
import socket
import subprocess
import time
from collections.abc import Callable, Iterable
from contextlib import suppress

from petportal.config import ConfigurationError


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# How many ports after a busy one are tried for a hint before the system is asked for any free one.
NEARBY_PORTS = 20


def check_free(host: str, port: int, choose: Callable[[int], str]) -> None:
    """Refuse, in one line, an address a server could not listen on now ("Address already in use"), saying how to
    choose another: `choose(port)` words the hint for a port that was free when checked (`free_port_after`)."""
    try:
        _bind(host, port)
    except (OSError, UnicodeError) as error:
        reason = getattr(error, "strerror", None) or error
        raise ConfigurationError(
            f"cannot listen on {host}:{port} ({reason}): stop what uses it, or choose another "
            f"{choose(free_port_after(host, port))}."
        ) from None


def free_port_after(host: str, port: int) -> int:
    """A port a server could listen on at `host` when checked: the first free one of the NEARBY_PORTS after `port`
    (an operator's next guess), else one the system picks. A hint never names a port that was busy."""
    for nearby in [*range(port + 1, min(port + NEARBY_PORTS, 65535) + 1), 0]:  # 0: the system picks
        with suppress(OSError, UnicodeError):
            return _bind(host, nearby)
    return free_port()  # the host itself cannot be bound: loopback can


def _bind(host: str, port: int) -> int:
    """Bind `host`:`port` as servers bind (SO_REUSEADDR: a port holding only closed connections is free), then
    close; the port bound."""
    addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, kind, _, _, address = addresses[0]
    with socket.socket(family, kind) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        return int(sock.getsockname()[1])


def wait_for_port(port: int, process: subprocess.Popen[bytes] | None = None, seconds: float = 30) -> None:
    """Wait until something listens on loopback `port`; fail if `process` exits first or it takes too long."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"the process for port {port} exited with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port} after {seconds} s")


def stop(processes: Iterable[subprocess.Popen[bytes]], seconds: float = 10) -> None:
    """SIGTERM every process, then wait for each; one that outlives `seconds` is killed."""
    processes = list(processes)
    for process in processes:
        if process.poll() is None:
            process.terminate()
    for process in processes:
        try:
            process.wait(seconds)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# glibc's mallopt parameter for the number of malloc arenas (M_ARENA_MAX in malloc.h).
M_ARENA_MAX = -8


def fewer_malloc_arenas(arenas: int = 2) -> None:
    """Let glibc keep at most `arenas` malloc arenas here and in forked workers: with one per thread, a worker's
    RSS crept up over 10,000 requests while the Python heap stayed flat (docs/performance.md, "Two malloc arenas")."""
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library this process already has
    except (OSError, AttributeError):
        return  # not glibc
    mallopt(M_ARENA_MAX, arenas)
