"""Real servers on ephemeral loopback ports for the tests: a WSGI app, a scripted faulty upstream, and the portal
under each of the commands that serve it."""

import base64
import functools
import io
import itertools
import json
import os
import signal
import socket
import socketserver
import struct
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import quote

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from werkzeug.serving import make_server

from petportal.running import processes
from petportal.running.processes import stop, wait_for_port

from support.portal import FLASK_PORTAL, PROJECT_ROOT, prepare_portal

# The ports the tests' servers listen on come from below the kernel's ephemeral ports (the first figure of
# ip_local_port_range), a slice for each pytest-xdist worker. A port from bind(0) is free when chosen but may be
# taken before a server started later binds it, by another worker's bind(0); one from a worker's own slice is
# never handed out by the kernel, nor chosen by another worker.
LOWEST_PORT = 10_000
_port_turns = itertools.count()


@functools.cache
def _port_slice():
    """(first port, how many) of this xdist worker's slice, or None where there is no room below the kernel's
    ephemeral ports (or no Linux to ask)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as ports:
            ephemeral = int(ports.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    size = (ephemeral - LOWEST_PORT) // workers
    if size < 100:
        return None
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0) % workers
    return LOWEST_PORT + worker * size, size


def free_port():
    """A loopback TCP port that nothing listens on, for a server about to be started (see LOWEST_PORT); the
    kernel's own choice where this worker has no slice."""
    if _port_slice() is None:
        return processes.free_port()
    first, size = _port_slice()
    for _ in range(size):
        port = first + next(_port_turns) % size
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue  # a server of an earlier test still listens, or something else of this machine
            return port
    raise RuntimeError(f"no free port between {first} and {first + size - 1}")


@contextmanager
def listening(host="127.0.0.1"):
    """A socket listening on a free port of `host`, held until the block ends: an app can be built knowing its
    port, then served on it (`serve(app, sock=...)`), and no other test can take the port in between."""
    with socket.create_server((host, 0)) as sock:
        yield sock


@contextmanager
def serve(app, host="127.0.0.1", port=0, sock=None):
    """Serve a WSGI app in a background thread, on `sock` (from `listening`), on `port`, or else on a free port;
    yields its origin URL."""
    if sock is not None:
        server = make_server(host, sock.getsockname()[1], app, threaded=True, fd=sock.fileno())
    else:
        server = make_server(host, port, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://{host}:{server.port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


class StoreRouter:
    """A WSGI app serving many reference stores, each under a path of its own (/s1, /s2, ...): one server for all
    the stores of a test process (conftest.py's `store_server`), started once, while each test still has stores of
    its own, holding only the animals it put there. A store sees its requests as a server of its own would: the
    path after its prefix (its prefix in SCRIPT_NAME, in the links it builds)."""

    def __init__(self):
        self.stores = {}
        self._numbers = itertools.count(1)

    def add(self, app):
        """Serve `app` under a new prefix; the prefix."""
        prefix = f"/s{next(self._numbers)}"
        self.stores[prefix] = app
        return prefix

    def remove(self, prefix):
        self.stores.pop(prefix, None)

    def __call__(self, environ, start_response):
        first, slash, rest = environ.get("PATH_INFO", "").removeprefix("/").partition("/")
        app = self.stores.get("/" + first)
        if app is None:
            start_response("404 Not Found", [("Content-Type", "text/plain"), ("Content-Length", "9")])
            return [b"no store\n"]
        environ["SCRIPT_NAME"] = environ.get("SCRIPT_NAME", "") + "/" + first
        environ["PATH_INFO"] = slash + rest
        return app(environ, start_response)


@dataclass
class Received:
    """One request as the fault server saw it."""

    method: str
    target: str
    headers: dict
    body: bytes


def answer(status, body=b"", headers=None, content_type="application/json"):
    """A complete, well-formed HTTP answer; `body` may be bytes or a JSON value."""
    payload = body if isinstance(body, bytes) else json.dumps(body).encode()

    def send(conn):
        extra = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
        head = (
            f"HTTP/1.1 {status} Scripted\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(payload)}\r\nConnection: close\r\n{extra}\r\n"
        )
        conn.sendall(head.encode() + payload)

    return send


def delay(seconds, then):
    """Wait `seconds` before behaving like `then`."""

    def send(conn):
        time.sleep(seconds)
        then(conn)

    return send


def reset(conn):
    """Close the connection with a TCP reset and no answer."""
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.close()


def reset_mid_body(conn):
    """Start a 200 answer, then reset the connection halfway through the body."""
    conn.sendall(b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 400\r\n\r\n[{"id": 1,')
    time.sleep(0.05)
    reset(conn)


def drip(interval, total=1000):
    """A 200 answer whose body arrives one byte every `interval` seconds."""

    def send(conn):
        conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {total}\r\n\r\n".encode())
        for _ in range(total):
            conn.sendall(b" ")
            time.sleep(interval)

    return send


def huge(size, declare_length=True):
    """A 200 answer of `size` bytes, with or without a Content-Length saying so."""

    def send(conn):
        framing = f"Content-Length: {size}" if declare_length else "Connection: close"
        conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n{framing}\r\n\r\n[".encode())
        block = b" " * (1024 * 1024)
        for _ in range(size // len(block)):
            conn.sendall(block)

    return send


def lying_length(declared, actual_body):
    """A 200 answer whose Content-Length promises more than the body that follows it."""

    def send(conn):
        head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {declared}\r\n\r\n"
        conn.sendall(head.encode() + actual_body)

    return send


class FaultServer(socketserver.ThreadingTCPServer):
    """A loopback HTTP server that answers from a script and records every request it receives.

    Each request takes the next behaviour of the script; the last one repeats.
    """

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, host="127.0.0.1"):
        super().__init__((host, 0), _FaultHandler)
        self.received = []
        self._script = [answer(200, [])]
        self._cycling = False
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True)

    @property
    def base_url(self):
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/v1"

    def script(self, *behaviours):
        """Answer the next requests with these behaviours, in order."""
        with self._lock:
            self._script = list(behaviours)
            self._cycling = False

    def cycle(self, *behaviours):
        """Answer requests with these behaviours in turn, over and over."""
        with self._lock:
            self._script = list(behaviours)
            self._cycling = True

    def methods(self):
        """The methods of the requests received so far."""
        return [request.method for request in self.received]

    def next_behaviour(self):
        with self._lock:
            if self._cycling:
                self._script.append(self._script.pop(0))
                return self._script[-1]
            return self._script.pop(0) if len(self._script) > 1 else self._script[0]

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc_info):
        self.shutdown()
        self.server_close()
        self._thread.join(5)


class _FaultHandler(socketserver.BaseRequestHandler):
    def handle(self):
        conn = self.request
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        request_line, *header_lines = head.decode("latin-1").split("\r\n")
        method, target, _ = request_line.split(" ", 2)
        headers = {}
        for line in header_lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        while len(body) < int(headers.get("content-length", 0)):
            body += conn.recv(65536)
        self.server.received.append(Received(method, target, headers, body))
        try:
            self.server.next_behaviour()(conn)
        except OSError:
            pass  # The client hung up first, which is what many of these cases are for.


class RecordingMiddleware:
    """Wraps a WSGI app and records every request it receives, as the fault server does."""

    def __init__(self, app):
        self.app = app
        self.received = []

    def __call__(self, environ, start_response):
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        environ["wsgi.input"] = io.BytesIO(body)
        target = environ.get("PATH_INFO", "") + ("?" + environ["QUERY_STRING"] if environ.get("QUERY_STRING") else "")
        headers = {
            key[5:].replace("_", "-").lower(): value for key, value in environ.items() if key.startswith("HTTP_")
        }
        self.received.append(Received(environ["REQUEST_METHOD"], target, headers, body))
        return self.app(environ, start_response)

    def methods(self):
        """The methods of the requests received so far."""
        return [request.method for request in self.received]


def run_init_db(env):
    """`flask --app app init-db` with `env`, as an operator runs it; the finished process, never raised."""
    return subprocess.run(
        [*FLASK_PORTAL, "init-db"], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=60, check=False
    )


# The commands that serve the portal, as an operator types them, on a given port.
SERVERS = {
    "flask serve": lambda port: [*FLASK_PORTAL, "serve", "--bind", f"127.0.0.1:{port}", "--workers", "2"],
    # The portal with a page showing its requests' WSGI environ (tests/support/environ_app.py), as `flask serve`
    # serves it.
    "flask serve, environ page": lambda port: [
        *FLASK_PORTAL[:-1],
        "tests.support.environ_app",
        "serve",
        "--bind",
        f"127.0.0.1:{port}",
        "--workers",
        "1",
    ],
    "gunicorn": lambda port: [
        sys.executable,
        "-m",
        "gunicorn",
        "-c",
        "gunicorn.conf.py",
        "--bind",
        f"127.0.0.1:{port}",
        "--workers",
        "2",
        "app:app",
    ],
    "flask run": lambda port: [*FLASK_PORTAL, "run", "--port", str(port)],
}


@contextmanager
def portal_processes(env, count=2):
    """Run `count` portal instances under gunicorn (2 workers each), as in production, on one database;
    yields their origins."""
    prepare_portal(env)
    ports = [free_port() for _ in range(count)]
    processes = [
        subprocess.Popen(
            SERVERS["gunicorn"](port),
            cwd=PROJECT_ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for port in ports
    ]
    try:
        for port, process in zip(ports, processes, strict=True):
            wait_for_port(port, process)
        yield [f"http://127.0.0.1:{port}" for port in ports]
    finally:
        stop(processes)


class EchoingStore:
    """A hostile pet store that quotes the request's headers back: in an Error record at `status`, in
    other ways chosen by `mode` ("message", "code", "encoded", "headers")."""

    def __init__(self, status=500, mode="message"):
        self.status, self.mode = status, mode

    def __call__(self, environ, start_response):
        sent = environ.get("HTTP_AUTHORIZATION", "")
        quoted = "; ".join(f"{key[5:].title()}: {value}" for key, value in environ.items() if key.startswith("HTTP_"))
        key = sent.removeprefix("Bearer ")
        headers = [("Content-Type", "application/json")]
        status = self.status
        message = {
            "message": f"Request refused. You sent {quoted}",
            "code": "bad key",
            "encoded": (
                f"key {quote(key, safe='')} or {key[:12]} {key[12:]} or {base64.b64encode(sent.encode()).decode()}"
            ),
            "headers": "refused",
        }[self.mode]
        body = {"code": key if self.mode == "code" else "echo", "message": message}
        if self.mode == "headers":
            headers += [("Deprecation", f"echo {sent}"), ("Sunset", key)]
        payload = json.dumps(body).encode()
        start_response(f"{status} Echo", [*headers, ("Content-Length", str(len(payload)))])
        return [payload]


@contextmanager
def running(command, env, output, port=None):
    """Start `command` on `port` (else a free one) with `env`, its output (both streams) going to the file `output`
    (appended to); yields (origin, process). The caller may stop it; else it is stopped here with SIGTERM."""
    prepare_portal(env)
    port = port or free_port()
    with open(output, "ab") as sink:
        process = subprocess.Popen(
            SERVERS[command](port), cwd=PROJECT_ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT
        )
    try:
        wait_for_port(port, process, seconds=60)
        yield f"http://127.0.0.1:{port}", process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        try:
            process.wait(40)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class Receiver(ThreadingHTTPServer):
    """An OTLP/HTTP trace receiver: keeps every span posted to /v1/traces, decoded, and every body as it came."""

    def __init__(self):
        super().__init__(("127.0.0.1", 0), ReceiverHandler)
        self.spans = []
        self.paths = []
        self.bodies = []

    @property
    def endpoint(self):
        return f"http://127.0.0.1:{self.server_address[1]}"

    def wait_for(self, predicate, seconds=15):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            found = [span for span in list(self.spans) if predicate(span)]
            if found:
                return found
            time.sleep(0.1)
        names = [span["name"] for span in self.spans]
        raise AssertionError(f"no such span arrived; received: {names}")

    def __enter__(self):
        threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *exc_info):
        self.shutdown()
        self.server_close()


class ReceiverHandler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.paths.append(self.path)
        self.server.bodies.append(body)
        export = ExportTraceServiceRequest()
        export.ParseFromString(body)
        for resource_spans in export.resource_spans:
            service = {a.key: a.value.string_value for a in resource_spans.resource.attributes}.get("service.name")
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    self.server.spans.append(
                        {
                            "service": service,
                            "name": span.name,
                            "trace_id": span.trace_id.hex(),
                            "span_id": span.span_id.hex(),
                            "parent_id": span.parent_span_id.hex(),
                            "attributes": _attributes(span.attributes),
                            "events": [(event.name, _attributes(event.attributes)) for event in span.events],
                            "status": span.status.message,
                        }
                    )
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def _attributes(attributes):
    return {a.key: _value(a.value) for a in attributes}


def _value(value):
    return getattr(value, value.WhichOneof("value")) if value.WhichOneof("value") else None
