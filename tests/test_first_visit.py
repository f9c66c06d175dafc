"""What a first visit meets: a description of its own on every page, compressed pages and assets, static files kept
under their digest, and one small stylesheet built from the templates."""

import hashlib
import re
import shutil
import subprocess
from html import unescape
from pathlib import Path

import flask_bootstrap
import pytest
from test_caching import decoded

from petportal.web import static_files

from support.helpers import PAGES_OF_EVERY_KIND, SECRET_PATTERN, AuthActions
from support.portal import PROJECT_ROOT

DESCRIPTION = re.compile(r'<meta name="description" content="([^"]*)">')
# Pages beyond the list's kinds that have a description of their own too.
MORE_PAGES = [
    ("staff", "/account/password"),
    ("staff", "/account/mfa"),
    ("staff", "/account/passkeys"),
    ("admin", "/admin/users/new"),
    ("admin", "/admin/users/staff"),
]


def test_every_page_has_one_description_of_its_own(portal_app, auth_for):
    clients = {
        None: portal_app.test_client(),
        "staff": auth_for(portal_app, "staff"),
        "admin": auth_for(portal_app, "admin"),
    }
    described = {}
    for who, path in PAGES_OF_EVERY_KIND + MORE_PAGES:
        page = clients[who].get(path).text
        found = DESCRIPTION.findall(page)
        assert len(found) == 1, (path, found)
        assert len(unescape(found[0])) >= 20, (path, found)
        described[path.split("?")[0]] = unescape(found[0])
    # One description for each kind of page, not one for them all.
    assert len(set(described.values())) == len(described), described


ASSET = re.compile(r'(?:href|src)="(/[^"?]+\.(?:css|js))\?v=([0-9a-f]+)"')


def test_stylesheets_and_scripts_are_kept_a_year_under_the_digest_of_their_content(portal_app):
    client = portal_app.test_client()
    assets = ASSET.findall(client.get("/animals").text)
    assert {path.rsplit(".", 1)[1] for path, _ in assets} == {"css", "js"}, assets
    for path, digest in assets:
        kept = client.get(f"{path}?v={digest}")
        assert kept.status_code == 200, path
        assert kept.headers["Cache-Control"] == "public, max-age=31536000, immutable", path
        assert hashlib.sha256(kept.data).hexdigest().startswith(digest), path
        # Under any other version (an old page's link), the file is revalidated, never kept.
        for other in (f"{path}?v=0123456789abcdef", path):
            assert "immutable" not in client.get(other).headers.get("Cache-Control", ""), other


@pytest.mark.parametrize(("accept", "encoding"), [("gzip, deflate, br, zstd", "br"), ("gzip", "gzip"), ("", None)])
def test_pages_stylesheets_and_scripts_come_compressed_as_the_browser_accepts(portal_app, accept, encoding):
    client = portal_app.test_client()
    page = client.get("/animals", headers={"Accept-Encoding": accept})
    urls = ["/animals", *(f"{path}?v={digest}" for path, digest in ASSET.findall(decoded(page)))]
    for url in urls:
        response = client.get(url, headers={"Accept-Encoding": accept})
        assert response.headers.get("Content-Encoding") == encoding, url
        assert "Accept-Encoding" in response.headers["Vary"], url
        plain = client.get(url).data
        assert decoded(response).encode() == plain or url == "/animals", url
        if encoding:
            assert len(response.data) < len(plain), url


def test_the_stylesheet_is_what_the_build_makes_of_the_templates(tmp_path):
    """static/css/site.css is built (tests/build_css.mjs), never edited: a template's new class reaches it."""
    if not shutil.which("node") or not (PROJECT_ROOT / "tests/node_modules/purgecss").is_dir():
        pytest.skip("PurgeCSS is not installed: npm ci --prefix tests (Node.js)")
    built = tmp_path / "site.css"
    subprocess.run(["node", "tests/build_css.mjs", str(built)], cwd=PROJECT_ROOT, check=True, capture_output=True)
    assert built.read_text() == (PROJECT_ROOT / "static/css/site.css").read_text(), (
        "static/css/site.css is stale: run `npm run --prefix tests build-css` and commit it"
    )


def test_the_stylesheet_is_the_bootstrap_of_the_pages_scripts():
    """The trimmed CSS and Bootstrap-Flask's script, which the pages load beside it, are one Bootstrap version."""
    version = re.compile(r"Bootstrap\s+v(\d+\.\d+\.\d+)")
    stylesheet = (PROJECT_ROOT / "static/css/site.css").read_text()
    script = Path(flask_bootstrap.__file__).parent / "static/bootstrap5/js/bootstrap.min.js"
    assert version.search(stylesheet).group(1) == version.search(script.read_text()).group(1)


@pytest.mark.parametrize(
    ("accept", "encoding"),
    [
        ("br;q=0", None),  # q=0 refuses a coding
        ("gzip;q=0, br;q=0", None),
        ("*;q=0.1, br;q=0", "gzip"),  # a coding named outranks the wildcard
        ("gzip;q=0, *", "br"),
        ("*", "br"),
        ("identity;q=1, br;q=0.5", None),  # the browser prefers the bytes as they are
        ("br;q=abc, gzip", "gzip"),  # a quality that is no number counts for nothing
        ("BR", "br"),
        ("deflate, zstd", None),
    ],
)
def test_the_encoding_follows_the_browsers_qualities(portal_app, accept, encoding):
    client = portal_app.test_client()
    page = client.get("/animals", headers={"Accept-Encoding": accept})
    assert page.headers.get("Content-Encoding") == encoding
    assert "Rex" in decoded(page)


def test_a_static_request_reads_nothing_outside_the_static_folders(portal_app):
    """No spelling of a path, and no method, makes the portal read a file that it does not serve: a file outside
    the folders gives away neither its existence nor its digest (an OPTIONS once read any file whole, /dev/zero
    until the memory ran out)."""
    client = portal_app.test_client()
    outside = (PROJECT_ROOT / "pyproject.toml").read_bytes()
    digest = hashlib.sha256(outside).hexdigest()[:16]
    for method in ("GET", "HEAD", "OPTIONS"):
        for path in ("/static/..%2fpyproject.toml", "/static/../pyproject.toml", "/bootstrap/static/..%2f..%2fx"):
            answer = client.open(f"{path}?v={digest}", method=method)
            assert answer.status_code < 500 and "immutable" not in answer.headers.get("Cache-Control", ""), path
        for path in ("/static/nope.css", "/static/css", "/static/css/x/../site.css", "/static/" + "./" * 3000):
            assert client.open(f"{path}?v=1", method=method).status_code < 500, path
    folders = (portal_app.static_folder, portal_app.blueprints["bootstrap"].static_folder)
    assert all(path.startswith(folders) for path in portal_app.extensions[static_files.DIGESTS])


def stylesheet(client):
    """The path and digest of the stylesheet the list page links."""
    return next(asset for asset in ASSET.findall(client.get("/animals").text) if asset[0].endswith(".css"))


def test_every_spelling_of_a_file_shares_one_digest(portal_app):
    client = portal_app.test_client()
    path, digest = stylesheet(client)
    name = path.removeprefix("/static/")
    kept = len(portal_app.extensions[static_files.DIGESTS])
    for spelling in ("./" + name, name.replace("/", "/./"), "js/../" + name, "./" * 50 + name):
        answer = client.get(f"/static/{spelling}?v={digest}")
        assert answer.status_code == 200 and answer.headers["Cache-Control"] == static_files.IMMUTABLE, spelling
    assert len(portal_app.extensions[static_files.DIGESTS]) == kept


def test_a_range_of_a_file_is_its_own_bytes_never_compressed(portal_app):
    client = portal_app.test_client()
    path, digest = stylesheet(client)
    whole = client.get(f"{path}?v={digest}").data
    part = client.get(f"{path}?v={digest}", headers={"Range": "bytes=0-999", "Accept-Encoding": "br, gzip"})
    assert part.status_code == 206 and "Content-Encoding" not in part.headers
    assert part.data == whole[:1000]


def test_the_second_factors_key_and_codes_are_never_compressed(make_portal):
    """They are worth guessing, and their page repeats what its URL holds: its length must not tell a guess."""
    client = make_portal().test_client()
    AuthActions(client).login("staff")
    page = client.get("/account/mfa", headers={"Accept-Encoding": "br, gzip"})
    assert page.status_code == 200 and SECRET_PATTERN.search(page.text)
    assert "Content-Encoding" not in page.headers
