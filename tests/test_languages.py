"""Every visitor's language: chosen on /language/<code>, else from Accept-Language, else English."""

import re
import shutil
import subprocess
import sys

import pytest

from petportal.i18n import template_text

from support.helpers import PAGES_OF_EVERY_KIND
from support.portal import PROJECT_ROOT

CATALOGS = PROJECT_ROOT / "petportal" / "translations"


def served_language(page):
    match = re.search(r'<html lang="([^"]+)">', page.text)
    assert match, "the page names no language"
    return match.group(1)


def list_calls(store):
    return [r.target for r in store.received if r.method == "GET" and r.target.startswith("/v1/pets?")]


@pytest.mark.parametrize(
    ("accepted", "language", "menu"),
    [
        (None, "en", "Animals"),
        ("de-DE,de;q=0.9,en;q=0.5", "de", "Tiere"),
        ("fr-CH, fr;q=0.9, es;q=0.8", "es", "Animales"),
        ("fr, ja", "en", "Animals"),
        ("*;q=0, de;q=0", "en", "Animals"),
    ],
)
def test_the_language_follows_accept_language_else_english(client, accepted, language, menu):
    page = client.get("/animals", headers={"Accept-Language": accepted} if accepted else {})
    assert page.status_code == 200
    assert served_language(page) == language
    assert f">{menu}</a>" in page.text


def test_the_visitors_choice_wins_over_accept_language_and_is_kept(client):
    chosen = client.get("/language/es?next=/animals?status=sold", headers={"Accept-Language": "de"})
    assert chosen.status_code == 303 and chosen.headers["Location"] == "/animals?status=sold"
    cookie = chosen.headers["Set-Cookie"]
    assert cookie.startswith("language=es;") and "HttpOnly" in cookie and "SameSite=Lax" in cookie
    page = client.get("/animals?status=sold", headers={"Accept-Language": "de"})
    assert served_language(page) == "es" and ">Animales</a>" in page.text
    # Every page links to the other languages, back to the page it is on.
    assert 'href="/language/de?next=/animals%3Fstatus%3Dsold"' in page.text
    assert 'href="/language/en?next=/animals%3Fstatus%3Dsold"' in page.text


@pytest.mark.parametrize(
    "target",
    ["//evil.example/x", "https://evil.example/", "/\\evil.example", "javascript:alert(1)", "evil.example", "/\t/x"],
)
def test_a_hostile_next_stays_on_the_site(client, target):
    chosen = client.get("/language/de", query_string={"next": target})
    assert chosen.status_code == 303
    assert chosen.headers["Location"] == "/animals"


def test_an_unknown_language_is_404_and_changes_nothing(client):
    refused = client.get("/language/xx?next=/animals")
    assert refused.status_code == 404 and "Set-Cookie" not in refused.headers
    assert served_language(client.get("/animals")) == "en"
    # A cookie naming an unknown language is ignored.
    client.set_cookie("language", "xx")
    assert served_language(client.get("/animals", headers={"Accept-Language": "de"})) == "de"


def test_the_cache_keeps_languages_apart(make_portal, production_store):
    portal = make_portal(CACHE_SECONDS=60)
    german, english = portal.test_client(), portal.test_client()
    german.set_cookie("language", "de")
    first = german.get("/animals")
    assert served_language(first) == "de" and ">Tiere</a>" in first.text
    page = english.get("/animals")
    assert served_language(page) == "en" and ">Animals</a>" in page.text and "Tiere" not in page.text
    # Each language has its page stored once; a second German visitor gets the stored German page.
    assert served_language(german.get("/animals")) == "de"
    assert served_language(english.get("/animals", headers={"Accept-Language": "de"})) == "de"
    assert len(list_calls(production_store)) == 2
    assert "Accept-Language" in page.headers["Vary"] and "Cookie" in page.headers["Vary"]


def test_the_animals_status_and_the_forms_messages_are_translated(client):
    page = client.get("/animals?limit=0", headers={"Accept-Language": "de"})
    assert page.status_code == 400
    assert served_language(page) == "de"
    assert "Number must be" not in page.text and "must be between" not in page.text


def run_check(folder):
    return subprocess.run(
        [sys.executable, str(CATALOGS / "catalogs.py"), "check", "--catalogs", str(folder)],
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_catalog_check_passes_and_fails_on_a_message_left_untranslated(tmp_path):
    assert run_check(CATALOGS).returncode == 0, run_check(CATALOGS).stderr
    copy = tmp_path / "translations"
    shutil.copytree(CATALOGS, copy)
    catalog = copy / "de" / "LC_MESSAGES" / "messages.po"
    text = catalog.read_text(encoding="utf-8")
    catalog.write_text(text.replace('msgid "Animals"\nmsgstr "Tiere"', 'msgid "Animals"\nmsgstr ""'), encoding="utf-8")
    untranslated = run_check(copy)
    assert untranslated.returncode != 0
    assert "de: untranslated: 'Animals'" in untranslated.stderr
    catalog.write_text(text.replace('msgid "Animals"\nmsgstr "Tiere"', '#, fuzzy\nmsgid "Animals"\nmsgstr "Tiere"'))
    assert "de: fuzzy: 'Animals'" in run_check(copy).stderr


VARYING = re.compile(
    r'(?<=name="csrf_token" value=")[^"]+|(?<=name="csrf_token" type="hidden" value=")[^"]+'
    r'|(?<=name="submission_token" type="hidden" value=")[^"]+|(?<=data-csrf=")[^"]+'
    r"|(?<=<code>)[0-9a-f]{32}(?=</code>)"  # an error page's request id
    r'|<time datetime="[^"]+">[^<]+</time>|\b[\d.,]+ ms\b'  # times, and the status page's latencies
)


def every_page(clients):
    """The HTML of PAGES_OF_EVERY_KIND, each loaded by `clients[who]`, without what varies between two loads (the
    forms' tokens, request ids, times and latencies)."""
    pages = {}
    for who, path in PAGES_OF_EVERY_KIND:
        page = clients[who].get(path)
        assert page.status_code in (200, 400, 404), (who, path, page.status_code)
        pages[who, path] = VARYING.sub("", page.text)
    return pages


@pytest.mark.parametrize("language", ["en", "de", "es"])
def test_messages_translated_when_a_template_is_compiled_read_as_when_drawn(
    make_portal, auth_for, monkeypatch, language
):
    """Each language's templates have their messages translated once, when compiled (template_text.py). Every
    page must read exactly as when each message is translated as the page is drawn."""
    app = make_portal()
    clients = {None: app.test_client(), "staff": auth_for(app, "staff"), "admin": auth_for(app, "admin")}
    for client in clients.values():
        client.set_cookie("language", language)
        client.get("/animals")  # the login's flash is shown, and gone
    compiled = every_page(clients)
    assert any(text in compiled[None, "/animals"] for text in ("Animals", "Tiere", "Animales"))

    app.jinja_env.languages.clear()  # compile again, translating nothing until drawn
    monkeypatch.setattr(template_text._Translate, "visit_Call", lambda self, node: node)
    drawn = every_page(clients)
    for page, html in compiled.items():
        assert html == drawn[page], page
