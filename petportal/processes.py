"""Local processes on loopback ports: find a free port, wait for a server, stop what was started.

Used by demo mode to run its stores, and by the tests and the benchmark to run real servers.
"""

import socket
import subprocess
import time
from collections.abc import Iterable


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def is_listening(port: int) -> bool:
    """Whether something accepts connections on this loopback port."""
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def wait_for_port(port: int, process: subprocess.Popen | None = None, seconds: float = 30) -> None:
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


def stop(processes: Iterable[subprocess.Popen], seconds: float = 10) -> None:
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
