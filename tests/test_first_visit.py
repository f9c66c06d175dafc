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

from bench.portal import PROJECT_ROOT

from helpers import PAGES_OF_EVERY_KIND

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
