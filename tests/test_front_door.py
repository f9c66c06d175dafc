"""One front door: every request gets one clear answer, whatever bytes it carries.

A request whose path, query, cookies or headers are not UTF-8 gets the portal's 400 page with its request
id (over a real socket, as curl sends them); a form field that is not UTF-8 is refused next to itself and
nothing is sent upstream; HEAD answers as GET does; a 400 page repeats only a short prefix of a field.
"""

import io
import os
import re
import socket

import pytest

from support.helpers import AuthActions, production_variables, submission_token, upload
from support.portal import csrf_token
from support.servers import running, serve

UNREADABLE = {
    "query": b"GET /animals?q=%ff HTTP/1.1\r\nHost: 127.0.0.1\r\n",
    "cookie": b"GET /animals HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: a=\xff\r\n",
    "session cookie": b"GET /login HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: session=\xff\xfe\r\n",
    "remember cookie": b"GET /animals/new HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: remember=\xc3\x28\r\n",
    "cookie on healthz": b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: a=\xff\r\n",
    "cookie on an animal": b"GET /animals/1 HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: a=\xff\r\n",
    # The language is read from the cookies before the 400 page is written (in that language).
    "language cookie": b"GET /animals HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: language=\xff\r\n",
    "beside a language cookie": b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: a=\xff; language=de\r\n",
    "cookie naming a language": b"GET /language/de HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: xlanguage=\xc3\r\n",
    "header": b"GET /animals HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: \xff\xfe\r\n",
    "request id": b"GET /animals HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Request-ID: \xff\xfe\xff\xfe\xff\xfe\xff\xfe\r\n",
}


def raw_answer(port, request):
    """Send raw bytes; the whole answer back."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        conn.sendall(request + b"Connection: close\r\n\r\n")
        chunks = []
        while chunk := conn.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


@pytest.mark.parametrize("cache_seconds", [0, 2])
def test_a_request_that_is_not_utf_8_gets_the_400_page_with_its_request_id(make_portal, caplog, cache_seconds):
    app = make_portal(CACHE_SECONDS=cache_seconds)
    with serve(app) as origin:
        port = int(origin.rsplit(":", 1)[1])
        raw_answer(port, b"GET /animals HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # a page the cache now holds
        for part, request in UNREADABLE.items():
            answer = raw_answer(port, request)
            assert answer.startswith("HTTP/1.1 400"), (part, answer[:200])
            assert "This request could not be read" in answer, part
            request_id = re.search(r"X-Request-ID: ([0-9a-f]{32})", answer)
            assert request_id is not None and f"<code>{request_id[1]}</code>" in answer, part
    assert "Traceback" not in caplog.text


@pytest.mark.parametrize(
    ("part", "environ"),
    [
        ("path", {"PATH_INFO": "/animals/\xff"}),
        ("path", {"PATH_INFO": "/animals/\xc3\x28"}),
        ("path", {"PATH_INFO": "/admin/users/\xff"}),
        ("query", {"PATH_INFO": "/animals", "QUERY_STRING": "q=\xff"}),
    ],
)
def test_raw_bytes_in_the_path_or_query_are_refused_before_any_view(portal_app, part, environ):
    """Werkzeug's development server turns raw bytes of the request line into text before the portal sees
    them; gunicorn hands them over as they came, each byte one latin-1 character, as given here."""
    page = portal_app.test_client().get("/", environ_overrides=environ)
    assert page.status_code == 400
    assert f"This request could not be read: its {part} is not UTF-8 text." in page.text


def test_headers_are_still_read_when_the_environ_holds_the_process_environment(portal_app):
    """granian copies the whole process environment into every request's environ, and the front door skips
    those variables: a header among them is still read, and one that is not UTF-8 still gets the 400 page."""
    process = dict(os.environ)
    client = portal_app.test_client()
    assert client.get("/login", environ_overrides=process).status_code == 200
    for header in ("HTTP_USER_AGENT", "HTTP_REFERER", "CONTENT_TYPE"):
        page = client.get("/login", environ_overrides={**process, header: "caf\xc3"})
        assert page.status_code == 400, header
        assert "This request could not be read: its headers are not UTF-8 text." in page.text, header


def get_rules(app):
    """Every GET route of the portal with values for its arguments, generated from the URL map."""
    samples = {"pet_id": "1", "category_id": "1", "import_id": "A" * 22, "name": "staff", "filename": "css/x.css"}
    for rule in app.url_map.iter_rules():
        if "GET" in rule.methods and rule.endpoint != "static":
            yield re.sub(r"<(?:[^:<>]+:)?([^<>]+)>", lambda m: samples.get(m[1], "x"), rule.rule)


@pytest.mark.parametrize("role", [None, "staff", "admin"])
def test_head_answers_as_get_does_on_every_get_route(portal_app, role):
    client = portal_app.test_client()
    if role:
        AuthActions(client).login(role)
    paths = sorted(set(get_rules(portal_app)))
    assert "/animals/new" in paths and "/admin/users" in paths
    for path in paths:
        got, head = client.get(path), client.head(path)
        assert head.status_code == got.status_code, (path, role, got.status_code, head.status_code)
        assert head.get_data() == b"", path


def test_a_form_field_that_is_not_utf_8_is_refused_next_to_it_and_nothing_is_sent(client, auth, production_store):
    auth.login()
    page = client.get("/animals/new").text
    body = f"csrf_token={csrf_token(page)}&submission_token={submission_token(page)}&name=%ff%fe&category_id=1"
    response = client.post("/animals/new", data=body, content_type="application/x-www-form-urlencoded")
    assert response.status_code == 400
    page = response.text
    message = "This is not text the portal can read: it is not UTF-8."
    assert page.index('id="name"') < page.index(message) < page.index('id="category_id"')  # next to the name
    assert "%FF%FE" not in response.text
    assert [request.method for request in production_store.received] == []


def test_a_400_page_repeats_only_a_short_prefix_of_a_huge_field(client, auth, production_store):
    auth.login()
    page = client.get("/animals/new").text
    fields = {"csrf_token": csrf_token(page), "submission_token": submission_token(page), "category_id": "1"}
    response = client.post("/animals/new", data={**fields, "name": "x" * 1_000_000})
    assert response.status_code == 400
    assert len(response.text) < 50_000
    assert "x" * 201 not in response.text
    searched = client.get("/animals", query_string={"q": "y" * 900_000})
    assert searched.status_code == 400 and "y" * 201 not in searched.text
    assert [request.method for request in production_store.received] == []


def test_a_multipart_field_that_is_not_utf_8_is_refused_and_nothing_is_sent(client, auth, production_store):
    auth.login()
    page = client.get("/animals/new").text
    boundary = "fuzzboundary"
    parts = {"csrf_token": csrf_token(page), "submission_token": submission_token(page), "category_id": "1"}
    body = b"".join(
        f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
        for name, value in parts.items()
    )
    body += f'--{boundary}\r\nContent-Disposition: form-data; name="name"\r\n\r\n'.encode() + b"MP\xff\xfe\r\n"
    body += f"--{boundary}--\r\n".encode()
    response = client.post("/animals/new", data=body, content_type=f"multipart/form-data; boundary={boundary}")
    assert response.status_code == 400
    assert "This is not text the portal can read: it is not UTF-8." in response.text
    assert [request.method for request in production_store.received] == []


def test_the_import_preview_repeats_only_a_short_prefix_of_a_huge_cell(client, auth):
    auth.login()
    preview = client.get(upload(client, f"name,categoryId,status\n{'n' * 100_000},1,\n").headers["Location"]).text
    assert "n" * 200 not in preview and "n" * 199 + "…" in preview


def test_any_body_over_1_mb_gets_413_with_connection_close_and_an_upload_has_room_for_its_form(client, auth):
    """1 MB and a byte, in a form: the 413 page before CSRF reads a field (which answered 400). An upload may be a
    1 MB file with its form around it; 64 KB more than that is refused too."""
    just_over = b"a=" + b"x" * (1024 * 1024 - 1)
    answer = client.post("/login", data=just_over, content_type="application/x-www-form-urlencoded")
    assert answer.status_code == 413
    assert "larger than the portal accepts (1 MB at most)" in answer.text
    assert answer.headers["Connection"] == "close"
    assert client.post("/login", data=b"a=x", content_type="application/x-www-form-urlencoded").status_code == 400
    assert "Connection" not in client.get("/animals").headers
    auth.login()
    over = upload(client, b"name,categoryId,status\n" + b"y" * (1024 * 1024 + 64 * 1024))
    assert over.status_code == 413 and over.headers["Connection"] == "close"
    # A file just over 1 MB reaches the import, which says what is wrong with it in its own words.
    file_over = upload(client, b"name,categoryId,status\n" + b"y" * (1024 * 1024))
    assert file_over.status_code == 400 and "larger than 1 MB. Split it" in file_over.text


def oversized_answer(port, request):
    """Send a request whose body is over the limit (its headers and the body's first bytes, as a client that has
    not finished sending); the answer's head, and whether the server then ended the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(request)
        received = b""
        while b"\r\n\r\n" not in received:
            received += conn.recv(65536)
        try:
            while chunk := conn.recv(65536):
                received += chunk
            ended = True
        except TimeoutError:
            ended = False
    return received.split(b"\r\n\r\n", 1)[0].decode("latin-1"), ended


@pytest.mark.parametrize("command", ["flask serve", "gunicorn"])
def test_a_413_over_a_real_socket_says_connection_close_and_the_connection_ends(tmp_path, production_store, command):
    """Before, the server dropped the connection after a 413 that did not say so (gunicorn even said keep-alive):
    the client's next request on it failed. Now the client knows to open a new one, and that one is served."""
    env = production_variables(tmp_path, production_store.url)
    declared = b"POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\n"
    requests_over = [declared + b"Content-Length: 1048577\r\n\r\na=" + b"x" * 65536]
    if command == "flask serve":  # gunicorn cannot know a chunked body's length before the portal reads it
        chunks = (b"10000\r\n" + b"x" * 65536 + b"\r\n") * 17
        requests_over.append(declared + b"Transfer-Encoding: chunked\r\n\r\n" + chunks)
    with running(command, env, tmp_path / "out.log") as (origin, _process):
        port = int(origin.rsplit(":", 1)[1])
        for request in requests_over:
            head, ended = oversized_answer(port, request)
            assert head.startswith("HTTP/1.1 413"), head
            assert "connection: close" in head.lower().split("\r\n"), head
            assert ended, "the server ends the connection after the 413"
        assert raw_answer(port, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n").startswith("HTTP/1.1 200")


# --- a body over the limit -----------------------------------------------------------------------------------------


class NeverEndingBody(io.RawIOBase):
    """A request body that counts what is read of it, and would go on for ever."""

    def __init__(self):
        self.read_bytes = 0

    def readable(self):
        return True

    def readinto(self, buffer):
        self.read_bytes += len(buffer)
        buffer[:] = b"a" * len(buffer)
        return len(buffer)


def test_a_body_over_the_limit_gets_413_before_it_is_read(client):
    body = NeverEndingBody()
    response = client.post(
        "/login",
        content_type="application/x-www-form-urlencoded",
        environ_overrides={"wsgi.input": body, "CONTENT_LENGTH": str(200 * 1024 * 1024)},
    )
    assert response.status_code == 413
    assert "larger than the portal accepts" in response.text
    assert body.read_bytes == 0
