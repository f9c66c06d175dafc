"""Generated requests to every route of the portal: the fuzz test.

The routes come from the app's own URL map, so a new route joins once it exists; the fields of each form, and
real values for the parts of a path (an animal's id, an import's id, an account's name), come from the portal's
own pages, so a new field joins too. Each route gets generated paths, query strings, headers and form bodies
(the real CSRF token included, so the handlers run) as anonymous, staff and admin. Cookies and headers of raw
bytes go over a real socket: the test client writes the Cookie header from its own jar.

The contract: no 5xx, no traceback in the log, the 400 page for a path, query, header or cookie that is not UTF-8,
HEAD answers as GET does, an add form the form must refuse sends nothing to the pet store, and an import's
buttons pressed at the same moment each get an answer.

CI runs the bounded profile (under a minute on 2 cores); the long one is
`PETPORTAL_FUZZ_PROFILE=long pytest tests/test_fuzz.py`.
"""

import itertools
import os
import re
import socket
import string
import time
from collections import Counter, deque
from dataclasses import dataclass, field, replace
from html.parser import HTMLParser
from urllib.parse import parse_qsl, quote_from_bytes, unquote_to_bytes, urlsplit

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select
from werkzeug.exceptions import HTTPException
from werkzeug.routing import IntegerConverter, RequestRedirect

from petportal.catalog.forms import NAME_MAX_LENGTH
from petportal.data.models import BulkImport
from petportal.extensions import db
from petportal.petstore import PET_STATUSES

from support.helpers import PASSWORDS, at_once, finished, post_form, upload
from support.openid_provider import PORTAL, sign_in_settings
from support.portal import CSRF_PATTERN, logged_in
from support.servers import serve

HEALTH_CHECKS = [
    HealthCheck.function_scoped_fixture,  # on purpose: the examples of a test share its portal
    HealthCheck.too_slow,
    HealthCheck.data_too_large,
    HealthCheck.large_base_example,
]
# Not named "ci": Hypothesis has a "ci" profile of its own, which it loads by itself on CI for every test.
settings.register_profile(
    "fuzz-ci",
    max_examples=50,
    deadline=None,
    suppress_health_check=HEALTH_CHECKS,
    # A failure names its request in full; shrinking a walk of every route could take minutes.
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
)
settings.register_profile("fuzz-long", max_examples=1000, deadline=None, suppress_health_check=HEALTH_CHECKS)
FUZZ = settings.get_profile("fuzz-" + os.environ.get("PETPORTAL_FUZZ_PROFILE", "ci"))
# An example of the add form's test sends one request; of a walk, one to every route (about a hundred through
# the test client, or thirty over a socket); of a race, an upload and two or three buttons.
WALKS = settings(FUZZ, max_examples=FUZZ.max_examples // 10)
SOCKET_WALKS = settings(FUZZ, max_examples=FUZZ.max_examples // 8)
RACES = settings(FUZZ, max_examples=FUZZ.max_examples // 5)

ROLES = ("anonymous", "staff", "admin")
TRUSTED_HOSTS = ["localhost", "127.0.0.1"]  # the host names the portal over a real socket answers
FORM_BODY = "application/x-www-form-urlencoded"
BOUNDARY = "fuzz-boundary-5c1e0b7a94d2"
# Rex is a copy of a production animal: its preview offers the `row` box that adds it anyway.
SEED_CSV = "name,categoryId,status\r\nSeed One,1,available\r\nSeed Two,2,\r\nSeed Bad,x,lost\r\nRex,1,available\r\n"
NASTY = [
    "",
    " ",
    "\x00",
    "\u202egnp.exe",
    "<script>alert(1)</script>",
    "' OR 1=1 --",
    "../../etc/passwd",
    "%00",
    "\U0001f436",
    "\u0663",
    "\uff19",
    "1_000",
    "-1",
    "0",
    str(2**63),
    str(-(2**63) - 1),
    str(10**400),
    "1e308",
    "NaN",
    "x" * 300,
]
HEADER_NAMES = [
    "X-Request-ID",
    "Accept-Language",
    "User-Agent",
    "X-Forwarded-For",
    "X-Forwarded-Proto",
    "X-Forwarded-Host",
    "X-Forwarded-Port",
    "X-Forwarded-Prefix",
    "Referer",
    "Origin",
    "Accept",
    "Accept-Encoding",
    "If-None-Match",
    "If-Modified-Since",
    "Authorization",
]
# The fields of the routes a server calls, which no page has a form for: values of the shape it sends (the identity
# provider's logout token is a JWT), beside the generated ones.
SERVER_FORMS = {
    "auth.sso_backchannel_logout": {
        "logout_token": [
            "eyJhbGciOiJub25lIn0.eyJzdWIiOiJraW0tMDAwMSJ9.",
            "eyJhbGciOiJSUzI1NiIsImtpZCI6IngifQ.eyJzdWIiOiJraW0tMDAwMSJ9.c2ln",
            "a.b.c",
            "...",
        ]
    }
}
# Fields a page offers only while the pet store is not answering (the fuzz's store answers): the add form's offer to
# keep the animal for the store's return.
OFFERED_WHILE_THE_STORE_IS_DOWN = {"catalog.add_animal": {"when_back": ["1"]}}
# Who the browser is, for Flask-Login: a walk draws them once, for its login and every request after it.
IDENTITY_HEADERS = ["User-Agent", "X-Forwarded-For"]
REQUEST_HEADERS = [name for name in HEADER_NAMES if name not in IDENTITY_HEADERS]
# Bytes that would end the target of a raw request line: what Python's str.split() splits on (the development
# server splits the line with it), and "#".
REQUEST_LINE_BREAKS = frozenset(b"\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0#")


# --- what the portal is made of: its routes, its forms, real values for the parts of its paths -----------


@dataclass
class Form:
    """A form on a page: where it was found, where it goes, its fields (name: the values the page offers)."""

    page: str
    action: str
    method: str
    multipart: bool
    fields: dict = field(default_factory=dict)
    files: set = field(default_factory=set)
    hidden: set = field(default_factory=set)

    @property
    def one_time(self):
        """Whether the page writes values into the form besides the CSRF token (a one-time submission token):
        then each submission needs the page opened again."""
        return bool(self.hidden - {"csrf_token"})


class PageParser(HTMLParser):
    """The links and the forms of one page, read as a browser reads them."""

    def __init__(self, page):
        super().__init__(convert_charrefs=True)
        self.page, self.links, self.forms = page, [], []
        self._form = self._select = None
        self._by_id = {}  # forms with an id: a field elsewhere on the page joins one with its `form` attribute

    def handle_starttag(self, tag, attrs):
        attributes = {name: value or "" for name, value in attrs}
        name = attributes.get("name")
        form = self._by_id.get(attributes["form"]) if attributes.get("form") else self._form
        if tag == "a" and attributes.get("href"):
            self.links.append(attributes["href"])
        elif tag == "form":
            method = (attributes.get("method") or "get").upper()
            multipart = "multipart" in attributes.get("enctype", "")
            self._form = Form(self.page, attributes.get("action") or self.page, method, multipart)
            self.forms.append(self._form)
            if attributes.get("id"):
                self._by_id[attributes["id"]] = self._form
        elif form is None or (not name and tag != "option"):
            return
        elif tag == "input" and attributes.get("type") == "file":
            form.files.add(name)
        elif tag in ("input", "select", "textarea", "button"):
            offered = form.fields.setdefault(name, [])
            if "value" in attributes:
                offered.append(attributes["value"])
            if attributes.get("type") == "hidden":
                form.hidden.add(name)
            if tag == "select":
                self._select = offered
        elif tag == "option" and self._select is not None and "value" in attributes:
            self._select.append(attributes["value"])

    def handle_endtag(self, tag):
        if tag == "form":
            self._form = None
        elif tag == "select":
            self._select = None


def parse(page_url, html):
    parser = PageParser(page_url)
    parser.feed(html)
    return parser


def own_rules(app):
    """Every route of the portal's own views, in a stable order: no static files, nothing of an extension's."""
    rules = [
        rule
        for rule in app.url_map.iter_rules()
        if rule.endpoint != "static" and app.view_functions[rule.endpoint].__module__.startswith("petportal.")
    ]
    return sorted(rules, key=lambda rule: (rule.rule, rule.endpoint))


@dataclass
class Site:
    """What the portal is made of, read from its URL map and its pages."""

    rules: list
    adapter: object
    samples: dict = field(default_factory=dict)  # (endpoint, argument): values seen in links and forms
    forms: dict = field(default_factory=dict)  # the endpoint of a POST: the first form seen that sends it
    query_names: set = field(default_factory=set)  # every query parameter a link or a GET form uses
    query_values: set = field(default_factory=set)  # every value a link gives one (each order of the list: sort=-name)
    token_pages: dict = field(default_factory=dict)  # role: a page that gives that role a CSRF token

    def match(self, url, method):
        """(endpoint, arguments) of a URL of this site, or None."""
        parts = urlsplit(url)
        if parts.scheme or parts.netloc:
            return None
        try:
            return self.adapter.match(parts.path, method=method)
        except (HTTPException, RequestRedirect):
            return None

    def note(self, url, method):
        """Keep what a link or a form's action tells: values for the parts of a path, names of query parameters.
        The endpoint, or None when it is not one of this site's."""
        pairs = parse_qsl(urlsplit(url).query, keep_blank_values=True)
        self.query_names.update(name for name, _ in pairs)
        self.query_values.update(value for _, value in pairs)
        found = self.match(url, method)
        if found is None:
            return None
        endpoint, arguments = found
        for name, value in arguments.items():
            self.samples.setdefault((endpoint, name), set()).add(str(value))
        return endpoint

    def seen(self, rule, argument):
        """Values seen for an argument of `rule`, or else for the same argument of a sibling route."""
        found = self.samples.get((rule.endpoint, argument))
        if not found:
            found = {value for (_, name), values in self.samples.items() if name == argument for value in values}
        return sorted(found)


def survey(app, clients):
    """Open every page each client reaches from the URL map's own paths and their links; note what is there."""
    site = Site(own_rules(app), app.url_map.bind("localhost"))
    for role, client in clients.items():
        queue = deque(rule.rule for rule in site.rules if "GET" in rule.methods and not rule.arguments)
        opened, visits = set(), Counter()
        while queue:
            url = queue.popleft()
            found = site.match(url, "GET")
            if url in opened or found is None or visits[found[0]] >= 2:
                continue
            opened.add(url)
            visits[found[0]] += 1
            response = client.get(url)
            if response.status_code != 200 or response.mimetype != "text/html":
                continue
            page = parse(url, response.text)
            if CSRF_PATTERN.search(response.text):
                site.token_pages.setdefault(role, url)
            queue.extend(link for link in page.links if site.note(link, "GET"))
            for form in page.forms:
                endpoint = site.note(form.action, form.method)
                if form.method == "GET":
                    site.query_names.update(form.fields)
                elif endpoint is not None:
                    site.forms.setdefault(endpoint, form)
    return site


# --- generated values: bytes, as they travel ---------------------------------------------------------------


def encoded(value):
    """A value as it goes in a URL or a form body: percent-encoded bytes (text as UTF-8)."""
    return quote_from_bytes(value if isinstance(value, bytes) else value.encode(), safe="")


texts = st.one_of(st.sampled_from(NASTY), st.text(max_size=60), st.integers().map(str)).map(str.encode)
not_utf8 = st.binary(min_size=1, max_size=12).filter(lambda raw: not _is_utf8(raw))
numbers = st.one_of(
    st.integers(min_value=0, max_value=10**6).map(str),
    st.integers(min_value=2**63 - 2, max_value=10**40).map(str),
    st.integers(max_value=-1).map(str),
    st.text(st.characters(categories=["Nd"]), min_size=1, max_size=4),
    st.sampled_from(["00", "+1", "1_000", "0x10", "1.0", "\uff11\uff12"]),
).map(str.encode)
ids = st.one_of(
    st.text(string.ascii_letters + string.digits + "-_", min_size=22, max_size=22),
    st.text(st.characters(codec="utf-8", exclude_characters="/"), min_size=22, max_size=22),
    st.text(st.characters(codec="utf-8", exclude_characters="/"), min_size=1, max_size=30),
).map(str.encode)
names = st.text(st.characters(codec="utf-8", exclude_characters="/"), min_size=1, max_size=40).map(str.encode)
# One request in five carries bytes that are not UTF-8 somewhere; the others are text, so the handlers run.
spoiled = st.integers(0, 4).map(lambda n: n == 4)


def _is_utf8(raw):
    try:
        raw.decode()
    except UnicodeDecodeError:
        return False
    return True


def values(bad):
    return st.one_of(texts, not_utf8) if bad else texts


def part_values(site, rule, argument, bad):
    """What to put in a part of the path: a real value seen on the portal's pages, or a generated one."""
    converter = rule._converters[argument]
    if isinstance(converter, IntegerConverter):
        generated = numbers
    elif getattr(converter, "regex", "").endswith("{22}"):  # string(length=22): an import's id
        generated = ids
    else:
        generated = names
    seen = site.seen(rule, argument)
    choices = [generated, *([st.sampled_from(seen).map(str.encode)] if seen else []), *([not_utf8] if bad else [])]
    return st.one_of(choices)


PLACEHOLDER = re.compile(r"<(?:[^<>:]+:)?(\w+)>")


@st.composite
def paths(draw, site, rule, bad=False):
    """A path of `rule`, each of its parts filled in and percent-encoded, as a browser sends it."""
    return PLACEHOLDER.sub(lambda match: encoded(draw(part_values(site, rule, match.group(1), bad))), rule.rule)


@st.composite
def query_strings(draw, site, bad=False):
    known = st.sampled_from(sorted(site.query_names)).map(str.encode)
    seen = [st.sampled_from(sorted(site.query_values)).map(str.encode)] if site.query_values else []
    pairs = draw(st.lists(st.tuples(st.one_of(known, values(bad)), st.one_of(values(bad), *seen)), max_size=4))
    return "&".join(f"{encoded(name)}={encoded(value)}" for name, value in pairs)


def header_values(bad):
    shaped = st.sampled_from([b"fr-CH, fr;q=0.9, *;q=0.5", b"1.2.3.4, ::1", b"https", b"example.org:443", b"-1"])
    generated = st.one_of(shaped, st.text(max_size=80).map(str.encode), *([not_utf8] if bad else []))
    # No line breaks (they would end the header), no leading space (it would continue the previous one).
    return generated.map(lambda raw: raw.replace(b"\r", b"").replace(b"\n", b"").lstrip(b" \t"))


def headers(bad=False, names=HEADER_NAMES):
    return st.dictionaries(st.sampled_from(names), header_values(bad), max_size=3)


def as_wsgi_headers(chosen):
    """Header bytes as WSGI hands them to the portal: latin-1 text, one character a byte."""
    return {name: raw.decode("latin-1") for name, raw in chosen.items()}


@st.composite
def form_bodies(draw, form, token, bad=False):
    """A body for `form`: each of its fields left out, given a value its page offers or a generated one; at
    times a field the form does not have; the real CSRF token always. (body, content type)"""
    fields = {}
    for name, offered in sorted(form.fields.items()):
        choices = [st.none(), values(bad), *([st.sampled_from(offered).map(str.encode)] if offered else [])]
        value = draw(st.one_of(choices))
        if value is not None:
            fields[name.encode()] = value
    fields.update(draw(st.dictionaries(values(bad), values(bad), max_size=2)))
    fields[b"csrf_token"] = token.encode()
    if not form.multipart:
        return "&".join(f"{encoded(name)}={encoded(value)}" for name, value in fields.items()).encode(), FORM_BODY
    parts = [(name, value, None) for name, value in fields.items()]
    for name in sorted(form.files):
        content = draw(st.one_of(st.binary(max_size=200), csv_files()))
        parts.append((name.encode(), content, draw(st.text(max_size=30)).encode() or b"animals.csv"))
    return multipart(parts), f"multipart/form-data; boundary={BOUNDARY}"


@st.composite
def csv_files(draw):
    cells = st.one_of(st.sampled_from(NASTY[:-1]), st.text(max_size=20), st.integers().map(str))
    rows = draw(st.lists(st.lists(cells, max_size=4), max_size=6))
    return "\r\n".join(["name,categoryId,status", *(",".join(row) for row in rows)]).encode()


def multipart(parts):
    """A multipart/form-data body of (name, value, file name or None) as a browser writes it: the values' bytes
    as they are; `"`, CR and LF in names percent-encoded, as the HTML standard says."""
    body = b""
    for name, value, filename in parts:
        head = b'Content-Disposition: form-data; name="' + _quoted(name) + b'"'
        if filename is not None:
            head += b'; filename="' + _quoted(filename) + b'"\r\nContent-Type: text/csv'
        body += b"--" + BOUNDARY.encode() + b"\r\n" + head + b"\r\n\r\n" + value + b"\r\n"
    return body + b"--" + BOUNDARY.encode() + b"--\r\n"


def _quoted(name):
    return name.replace(b'"', b"%22").replace(b"\r", b"%0D").replace(b"\n", b"%0A")


# --- sending and checking --------------------------------------------------------------------------------


class Log:
    """The captured log, read a request at a time."""

    def __init__(self, caplog):
        self._caplog, self._seen = caplog, len(caplog.text)

    def since(self):
        """What was logged since the last look."""
        text = self._caplog.text
        new, self._seen = text[self._seen :], len(text)
        return new


def describe(request, answer, log=""):
    """A request as a reproduction: method, target, headers, body; then its answer and the log it left."""
    method, target, sent_headers, body = request
    excerpt = "\n".join(log.strip().splitlines()[-20:])
    return f"{method} {target}\nheaders: {sent_headers!r}\nbody: {body!r}\nanswered: {answer}\nlog:\n{excerpt}"


def send(client, log, method, path, query="", sent_headers=None, body=None, content_type=None, environ=None):
    """One request through the test client, its path handed over as a WSGI server hands it (percent-decoded
    bytes); failing on a 5xx, a traceback in the log, or anything but the 400 page for bytes that are not
    UTF-8. The response."""
    request = (method, path + (f"?{query}" if query else ""), sent_headers, body)
    try:
        response = client.open(
            path,
            method=method,
            query_string=query,
            headers=as_wsgi_headers(sent_headers or {}),
            data=body,
            content_type=content_type,
            environ_base=environ or {},
            environ_overrides={"PATH_INFO": _wsgi_path(path)},
        )
    except Exception as error:  # the portal's own handler answers a bug with a 500; this one got out
        raise AssertionError(describe(request, repr(error), log.since())) from error
    new_log = log.since()
    assert response.status_code < 500 and "Traceback" not in new_log, describe(request, response.status_code, new_log)
    if unreadable(path, query, sent_headers):
        assert response.status_code == 400, describe(request, f"{response.status_code}, not the 400 page", new_log)
    return response


def unreadable(path, query, sent_headers):
    """Whether a request holds bytes that are not UTF-8 where the front door reads it: the path and the query
    once percent-decoded, the headers' and cookies' values as sent. Such a request gets the 400 page."""
    return not all(map(_is_utf8, [unquote_to_bytes(path), unquote_to_bytes(query), *(sent_headers or {}).values()]))


def _wsgi_path(path):
    """The path as a WSGI server such as gunicorn hands it over: percent-decoded bytes, one latin-1 character
    a byte."""
    return unquote_to_bytes(path).decode("latin-1")


ADDRESSES = itertools.count(1)


class Visitor:
    """A test client as one role, as one browser: its own address, and the identity headers drawn for it
    (User-Agent, X-Forwarded-For) on every request it makes. Flask-Login marks a login whose browser changes
    these as not fresh, and the pages that ask for a fresh login would then only send it back to log in."""

    def __init__(self, app, site, role, log, identity=None):
        self.app, self.site, self.role, self.log = app, site, role, log
        self.client, self.token = app.test_client(), ""
        self._wear(identity or {})

    def _wear(self, identity):
        self.identity = identity
        for name in IDENTITY_HEADERS:
            key = "HTTP_" + name.upper().replace("-", "_")
            if name in identity:
                self.client.environ_base[key] = identity[name].decode("latin-1")
            else:
                self.client.environ_base.pop(key, None)

    def log_in(self):
        """Log in through the form (anonymous: only open a page with a token), with the identity headers, then
        without them if they stopped it. Each login comes from an address of its own: the limits count failed
        logins per address, and the walks fail many."""
        if self.role != "anonymous":
            number, identity = next(ADDRESSES), self.identity
            self.client = self.app.test_client()
            self.client.environ_base["REMOTE_ADDR"] = (
                f"10.{number // 250 % 250}.{number % 250}.{ROLES.index(self.role)}"
            )
            for worn in (identity, {}) if identity else ({},):
                self._wear(worn)
                token = CSRF_PATTERN.search(self.client.get("/login").text).group(1)
                fields = {"username": self.role, "password": PASSWORDS[self.role], "csrf_token": token}
                body = "&".join(f"{name}={encoded(value)}" for name, value in fields.items()).encode()
                response = send(self.client, self.log, "POST", "/login", "", worn, body, FORM_BODY)
                if response.status_code == 303:
                    break
            assert response.status_code == 303, f"{self.role} could not log in: {response.status_code}"
        found = CSRF_PATTERN.search(self.client.get(self.site.token_pages.get(self.role, "/login")).text)
        self.token = found.group(1) if found else ""

    def form_for(self, endpoint, path):
        """The form that sends `endpoint`, fresh from its page when the page writes one-time values into it."""
        form = self.site.forms.get(endpoint) or Form("", path, "POST", False, SERVER_FORMS.get(endpoint, {}))
        if form.one_time:
            page = self.client.get(form.page)
            if page.status_code == 200:
                form = next((fresh for fresh in parse(form.page, page.text).forms if fresh.action == form.action), form)
        offered = OFFERED_WHILE_THE_STORE_IS_DOWN.get(endpoint)
        return replace(form, fields={**offered, **form.fields}) if offered else form

    def send(self, method, path, query, sent_headers, *body):
        """Send a request (its headers over this browser's). When it shows the login ended (the walk may have
        pressed "log out"), log in again, and send it once more unless it is a POST (whose CSRF token belonged
        to the ended login)."""
        sent_headers = {**self.identity, **sent_headers}
        response = send(self.client, self.log, method, path, query, sent_headers, *body)
        if self.role != "anonymous" and response.headers.get("Location", "").startswith("/login?next="):
            self.log_in()
            if method != "POST":
                response = send(self.client, self.log, method, path, query, sent_headers, *body)
        return response


@dataclass
class Portal:
    """A readied portal, and what its survey found."""

    app: object
    site: Site


def readied(app, caplog):
    """The portal with something on every page (an import each for staff and admin, a promotion, a category label), and
    what a survey of its pages as each role found."""
    site = Site(own_rules(app), app.url_map.bind("localhost"))
    clients = {role: Visitor(app, site, role, Log(caplog)) for role in ROLES}
    for visitor in clients.values():
        visitor.log_in()
    for role in ("staff", "admin"):
        assert upload(clients[role].client, SEED_CSV).status_code == 303
    admin = clients["admin"].client
    label = {"environment": "production", "category_id": "1", "label": "Dogs", "label_de": "Hunde", "label_es": ""}
    assert post_form(admin, "/admin/categories", "/admin/categories", **label).status_code == 303
    # A promotion from staging, so its pages (and its preview's buttons) are walked as an import's are.
    staging_id = next(  # a busy machine can time the staging store out once
        found[1]
        for _ in range(3)
        if (found := re.search(r'name="pet_id" value="([0-9]+)"', admin.get("/animals/promote").text))
    )
    assert post_form(admin, "/animals/promote", "/animals/promote", pet_id=staging_id).status_code == 303
    return Portal(app, survey(app, {role: visitor.client for role, visitor in clients.items()}))


def signing_in(identity_provider):
    """A portal's settings for every way of signing in: its public address (passkeys), and the company's sign-in at
    a real provider where Node has one (else the sign-in routes answer as when none is configured)."""
    return sign_in_settings(identity_provider) if identity_provider else {"PUBLIC_URL": PORTAL}


@pytest.fixture
def portal(make_portal, caplog, identity_provider):
    """The portal over the two real reference stores, behind one trusted proxy (so the X-Forwarded-* headers
    count), with every way of signing in, readied and surveyed."""
    return readied(make_portal(TRUSTED_PROXIES=1, **signing_in(identity_provider)), caplog)


# --- the tests -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("role", ROLES)
@WALKS
@given(data=st.data())
def test_every_route_answers_generated_requests(portal, caplog, role, data):
    """Every route of the URL map with each of its methods: a generated path, query string and headers, and for
    a POST a body for its form, the real CSRF token included."""
    identity = data.draw(st.dictionaries(st.sampled_from(IDENTITY_HEADERS), header_values(bad=False)), label="identity")
    visitor = Visitor(portal.app, portal.site, role, Log(caplog), identity)
    visitor.log_in()
    for rule in portal.site.rules:
        bad = data.draw(spoiled, label=f"{rule.endpoint}: not UTF-8")
        path = data.draw(paths(portal.site, rule, bad), label=f"{rule.endpoint} path")
        query = data.draw(query_strings(portal.site, bad), label=f"{rule.endpoint} query")
        drawn = data.draw(headers(bad, names=REQUEST_HEADERS), label=f"{rule.endpoint} headers")
        sent_headers = drawn
        if "GET" in rule.methods:
            got = visitor.send("GET", path, query, sent_headers)
            head = visitor.send("HEAD", path, query, sent_headers)
            request = ("HEAD", path + (f"?{query}" if query else ""), {**visitor.identity, **sent_headers}, None)
            answer = f"{head.status_code} with {len(head.data)} bytes, where GET answered {got.status_code}"
            assert (head.status_code, head.data) == (got.status_code, b""), describe(request, answer)
        visitor.send("OPTIONS", path, query, sent_headers)
        if "POST" in rule.methods:
            form = visitor.form_for(rule.endpoint, path)
            body, content_type = data.draw(form_bodies(form, visitor.token, bad), label=f"{rule.endpoint} body")
            visitor.send("POST", path, query, sent_headers, body, content_type)
    time.sleep(0.05)  # an import runner started by the walk logs from its own thread
    left = visitor.log.since()
    assert "Traceback" not in left, f"a traceback after the walk:\n{left}"


@pytest.fixture
def served(make_portal, caplog, identity_provider):
    """The portal behind one trusted proxy, on trusted host names, with every way of signing in, served on a real
    port; its survey and the session cookies of a browser logged in as each role."""
    app = make_portal(TRUSTED_PROXIES=1, TRUSTED_HOSTS=TRUSTED_HOSTS, **signing_in(identity_provider))
    surveyed = readied(app, caplog)
    with serve(app) as origin:
        cookies = {"anonymous": []}
        for role in ("staff", "admin"):
            browser = logged_in(origin, role, PASSWORDS[role])
            cookies[role] = [f"{name}={value}".encode() for name, value in browser.cookies.items()]
            browser.close()
        yield surveyed, int(origin.rsplit(":", 1)[1]), cookies


def raw_exchange(port, request):
    """Send raw bytes to the portal over a real socket; the status of its answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(request)
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/") else answer[:80]


def cookie_pairs(real, bad):
    """Generated cookies among the real ones, in any order; some take a real cookie's name; their bytes are not
    UTF-8 when `bad`."""
    octets = st.binary(max_size=30) if bad else st.text(max_size=30).map(str.encode)
    named = st.one_of(st.sampled_from([b"session", b"remember", b"a"]), octets.filter(bool))
    generated = st.tuples(named, octets).map(lambda pair: (pair[0] + b"=" + pair[1]).replace(b"\r", b""))
    return st.lists(generated.map(lambda raw: raw.replace(b"\n", b"")), max_size=3).flatmap(
        lambda extra: st.permutations([*real, *extra])
    )


def trusted_hosts(port):
    """A Host the portal is configured to answer, with or without a port."""
    return st.sampled_from(TRUSTED_HOSTS).flatmap(
        lambda name: st.sampled_from([name, f"{name}:{port}", f"{name}:80", f"{name}:65535"]).map(str.encode)
    )


other_hosts = st.from_regex(r"[A-Za-z0-9-]{1,20}(\.[A-Za-z0-9-]{1,20}){0,2}(:[0-9]{1,5})?", fullmatch=True).map(
    str.encode
)


def raw_request(target, sent_headers):
    """A GET as raw bytes: the target and the headers' values exactly as given."""
    head = b"".join(name.encode() + b": " + value + b"\r\n" for name, value in sent_headers.items())
    return b"GET " + target + b" HTTP/1.1\r\n" + head + b"Connection: close\r\n\r\n"


def check_raw(port, log, target, sent_headers):
    """Send a raw GET; failing on a 5xx, a traceback, or anything but the 400 page for bytes that are not UTF-8."""
    status = raw_exchange(port, raw_request(target, sent_headers))
    new_log = log.since()
    request = ("GET", target, sent_headers, None)
    assert isinstance(status, int) and status < 500 and "Traceback" not in new_log, describe(request, status, new_log)
    # What the development server hands the portal (werkzeug.serving.make_environ): the path percent-decoded as
    # UTF-8, where a byte that is not becomes U+FFFD; the query's raw bytes as UTF-8 text, one character a byte;
    # the headers' values as they came. (The walks send the path's bytes as gunicorn hands them over.)
    query = target.partition(b"?")[2].decode("latin-1").encode()
    if unreadable("", query, sent_headers):
        assert status == 400, describe(request, f"{status}, not the 400 page", new_log)


@SOCKET_WALKS
@given(data=st.data())
def test_raw_cookies_and_headers_get_an_answer_on_every_page(served, caplog, data):
    """Every GET route over a real socket, as a role drawn for each: generated cookies beside the session's,
    generated headers, a Host the portal answers, and in half the requests bytes that are not UTF-8 (in cookies,
    headers, the path or the query, raw or percent-encoded)."""
    surveyed, port, cookies = served
    log = Log(caplog)
    for rule in surveyed.site.rules:
        if "GET" not in rule.methods:
            continue
        role = data.draw(st.sampled_from(ROLES), label=f"{rule.endpoint} role")
        bad = data.draw(st.booleans(), label=f"{rule.endpoint}: not UTF-8")
        path = data.draw(paths(surveyed.site, rule, bad), label=f"{rule.endpoint} path")
        query = data.draw(query_strings(surveyed.site, bad), label=f"{rule.endpoint} query")
        raw_query = data.draw(st.binary(max_size=8), label=f"{rule.endpoint} raw query") if bad else b""
        target = f"{path}?{query}".encode() + bytes(byte for byte in raw_query if byte not in REQUEST_LINE_BREAKS)
        sent_headers = data.draw(headers(bad), label=f"{rule.endpoint} headers")
        sent_headers["Host"] = data.draw(trusted_hosts(port), label=f"{rule.endpoint} host")
        cookie = b"; ".join(data.draw(cookie_pairs(cookies[role], bad), label=f"{rule.endpoint} cookies"))
        check_raw(port, log, target, {**sent_headers, "Cookie": cookie})
    time.sleep(0.05)  # the server thread logs each request line just after its answer
    assert "Traceback" not in log.since()


@SOCKET_WALKS
@given(data=st.data())
def test_a_refused_host_with_unreadable_bytes_gets_the_400_page(served, caplog, data):
    """A Host the portal refuses, itself or through the proxy's headers, and bytes that are not UTF-8 in a cookie,
    a header or the query: the 400 page, and no traceback."""
    surveyed, port, _ = served
    rule = data.draw(st.sampled_from([rule for rule in surveyed.site.rules if "GET" in rule.methods]))
    refused = data.draw(
        st.one_of(
            other_hosts.map(lambda host: {"Host": host}),
            st.tuples(trusted_hosts(port), other_hosts).map(lambda p: {"Host": p[0], "X-Forwarded-Host": p[1]}),
            st.tuples(trusted_hosts(port), st.text(string.ascii_letters, min_size=1, max_size=5)).map(
                lambda pair: {"Host": pair[0], "X-Forwarded-Port": pair[1].encode()}
            ),
        ),
        label="refused host",
    )
    where = data.draw(st.sampled_from(["Cookie", "User-Agent", "query"]), label="not UTF-8 in")
    raw = data.draw(not_utf8, label="bytes")
    target = data.draw(paths(surveyed.site, rule)).encode() + (
        b"?q=" + encoded(raw).encode() if where == "query" else b""
    )
    sent_headers = {
        **refused,
        **({where: b"a=" + raw.replace(b"\r", b"").replace(b"\n", b"")} if where != "query" else {}),
    }
    check_raw(port, Log(caplog), target, sent_headers)


VALID = {"name": b"Fuzzy", "category_id": b"1", "status": b""}
CONTROL = [chr(code) for code in (*range(32), *range(127, 160))]
DIRECTION = list("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
INVISIBLE = list("\u200b\u200c\u200d\u2060\ufeff\u00ad")
letters = st.text(string.ascii_letters, min_size=1, max_size=10)
invalid_values = {
    "name": st.one_of(
        st.text(" \t\n\r", max_size=5),  # nothing once trimmed
        st.text(string.ascii_letters + " ", min_size=NAME_MAX_LENGTH + 1, max_size=300).filter(
            lambda name: len(name.strip()) > NAME_MAX_LENGTH
        ),
        st.tuples(letters, st.sampled_from(CONTROL + DIRECTION), letters).map("".join),  # inside, not trimmed
        st.text(st.sampled_from(INVISIBLE), min_size=1, max_size=5),
    ).map(str.encode),
    "category_id": st.one_of(
        st.just(""),
        letters,
        st.text(st.characters(categories=["Nd"], exclude_characters=string.digits), min_size=1, max_size=5),
        st.sampled_from(["1_000", "1.5", "1e3", "0x10", "--1", "+-1", "1 2"]),
        st.integers(min_value=2**63).map(str),
        st.integers(max_value=-(2**63) - 1).map(str),
    ).map(str.encode),
    "status": st.text(max_size=20).filter(lambda status: status not in ("", *PET_STATUSES)).map(str.encode),
}
# Not UTF-8: Werkzeug would read these bytes as U+FFFD, a name the form could take.
invalid_fields = st.one_of(
    *(st.tuples(st.just(name), strategy) for name, strategy in invalid_values.items()),
    st.tuples(st.sampled_from(sorted(VALID)), not_utf8),
)


def store_creates(*stores):
    return sum(request.method == "POST" for store in stores for request in store.received)


@pytest.fixture
def staff(make_portal, caplog):
    """A test client of the portal over the two real reference stores, behind one trusted proxy, logged in as
    staff."""
    app = make_portal(TRUSTED_PROXIES=1)
    visitor = Visitor(app, Site(own_rules(app), app.url_map.bind("localhost")), "staff", Log(caplog))
    visitor.log_in()
    return visitor


@FUZZ
@given(invalid=invalid_fields, keep=st.booleans())
@example(invalid=("name", b"\xff\xfe"), keep=False)  # name=%ff%fe
@example(invalid=("category_id", "\u0661\u0662".encode()), keep=False)
@example(invalid=("status", b"available\x00"), keep=True)
def test_an_add_form_the_form_refuses_sends_nothing_to_the_pet_store(
    staff, production_store, staging_store, invalid, keep
):
    """The add form with every field valid but one: a 400 with the form again, and no createPet in either store;
    kept for the store's return (`when_back=1`), nothing is kept either."""
    page = staff.client.get("/animals/new")
    form = next(form for form in parse("/animals/new", page.text).forms if form.action == "/animals/new")
    fields = {name: VALID.get(name, (offered or [""])[0].encode()) for name, offered in form.fields.items()}
    if keep:
        fields["when_back"] = b"1"
    name, value = invalid
    fields[name] = value
    body = "&".join(f"{encoded(field)}={encoded(value)}" for field, value in fields.items()).encode()
    before = store_creates(production_store, staging_store)
    response = send(staff.client, staff.log, "POST", "/animals/new", "", None, body, FORM_BODY)
    request = ("POST", "/animals/new", None, body)
    assert store_creates(production_store, staging_store) == before, describe(request, response.status_code)
    assert response.status_code == 400, describe(request, response.status_code)
    with staff.app.app_context():
        assert db.session.scalar(select(func.count()).select_from(BulkImport)) == 0, describe(request, "kept")


@pytest.fixture
def importing(make_portal, database_url, caplog):
    """A portal on each database, and two tabs logged in as the same staff member."""
    app = make_portal(SQLALCHEMY_DATABASE_URI=database_url)
    site = Site(own_rules(app), app.url_map.bind("localhost"))
    tabs = [Visitor(app, site, "staff", Log(caplog)) for _ in range(2)]
    for tab in tabs:
        tab.log_in()
    return site, tabs


rows = st.tuples(st.sampled_from(["Rex", "Tom", "Ann"]), st.integers(1, 9), st.sampled_from(["", "available"]))


@RACES
@given(animals=st.lists(rows, min_size=1, max_size=4), data=st.data())
def test_an_imports_buttons_pressed_at_once_each_get_an_answer(importing, production_store, animals, data):
    """A fresh preview, and two or three of the buttons that act on an import (start, discard, retry: every POST
    route of an import's id) pressed at the same moment from two tabs: no 5xx, no traceback, and an import that
    is gone sent nothing."""
    site, tabs = importing
    buttons = [rule for rule in site.rules if "POST" in rule.methods and "import_id" in rule.arguments]
    content = "name,categoryId,status\r\n" + "".join(f"{n},{c},{s}\r\n" for n, c, s in animals)
    page = upload(tabs[0].client, content).headers["Location"]
    import_id = site.match(page, "GET")[1]["import_id"]
    pressed = data.draw(st.lists(st.sampled_from(buttons), min_size=2, max_size=3), label="pressed")
    calls = [
        (tabs[i % 2], site.adapter.build(rule.endpoint, {"import_id": import_id})) for i, rule in enumerate(pressed)
    ]
    before = store_creates(production_store)

    def press(tab, path, start):
        start.wait()
        return tab.client.post(path, data={"csrf_token": tab.token}).status_code

    answers = at_once(calls, press)
    request = ("POST at once", [path for _, path in calls], None, "csrf_token=<each tab's own>")
    seen = tabs[0].log.since()
    assert all(status < 500 for status in answers), describe(request, answers, seen)
    if tabs[0].client.get(page).status_code == 200:
        finished(tabs[0].client, page)
    else:
        time.sleep(0.2)  # a runner that started anyway would send now
        assert store_creates(production_store) == before, describe(
            request, f"{answers}; the import is gone, yet it sent"
        )
    seen += tabs[0].log.since()
    assert "Traceback" not in seen, describe(request, answers, seen)


@FUZZ
@given(forwarded=st.text(string.ascii_letters + ";*=.-_ ", max_size=20).filter(str.strip).map(str.encode))
@example(forwarded=b"fr-CH, fr;q=0.9, *;q=0.5")
def test_metrics_behind_a_proxy_with_a_forwarded_address_that_is_none(staff, forwarded):
    """GET /metrics with an X-Forwarded-For whose last entry is not an address (no digits, no colon): no 500."""
    send(staff.client, staff.log, "GET", "/metrics", "", {"X-Forwarded-For": forwarded})


def test_the_generated_query_strings_reach_the_audit_logs_filters(make_portal, auth_for):
    """The walks draw query parameter names from the GET forms the survey finds: the audit log's filters are among
    them, so the generated requests try them with every kind of value."""
    app = make_portal()
    site = survey(app, {"admin": auth_for(app, "admin")})
    assert {"actor", "action", "environment", "since", "until"} <= site.query_names


def test_the_generated_query_strings_try_each_order_of_the_list(make_portal, auth_for):
    """The list's headings link to each order, both ways: the walks draw those values (`sort=-name`) too."""
    app = make_portal()
    site = survey(app, {"customer": app.test_client()})
    orders = {f"{sign}{key}" for key in ("id", "name", "category", "status") for sign in ("", "-")}
    assert "sort" in site.query_names and orders <= site.query_values
