"""Every visitor in a real browser: each language (light, and dark in German), from a small phone to a desktop.

Each page, with the longest name, label and user name the portal takes, is checked for sideways scrolling at 320, 375,
768 and 1280 px (and the top bar for running past its own edge), with axe (no violation at any impact) at the smallest
and the largest of them, the top bar for one line at 1280 px, and its HTML, as the server sent it, with the Nu Html
Checker: one Java run per language for all its pages.
"""

import json
import subprocess
from pathlib import Path
from urllib.parse import quote

import pytest

from petportal.auth import accounts
from petportal.catalog import categories
from petportal.extensions import db

from support.browsers import SCREENSHOTS, sideways_scroll
from support.helpers import PASSWORDS, PRODUCTION_KEY, dispose_store, make_store
from support.servers import free_port, serve

pytestmark = pytest.mark.slow

# Installed by .ci/run (`npm ci --prefix tests`); run with Java.
VNU_JAR = Path(__file__).parent / "node_modules" / "vnu-jar" / "build" / "dist" / "vnu.jar"
WIDTHS = (320, 375, 768, 1280)
# Where axe checks each page: a phone's width and a desktop's (the two layouts; each run takes about half a second).
AXE_WIDTHS = (320, 1280)
# The README's pictures of languages and themes: (language, theme, page) -> file name.
PICTURES = {("de", "dark", "list"): "list-de-dark", ("es", "light", "add-errors"): "add-es"}
# The longest data each field takes, with no space to break at: every page must wrap or cut it, never widen.
LONG_NAME = "Bartholomew" * 9 + "X"  # 100 characters, the add form's most
LONG_LABEL = "Cephalopods" * 5 + "Lobsters!"  # 64, cut to the labels' 60 below
# The labels' German and Spanish of the same length: German's long compounds are what widen a page.
LONG_LABEL_DE = "Kopffüßerbeobachtung" * 3  # 60
LONG_LABEL_ES = "Cefalópodosmarinos" * 3 + "!!!!!!"  # 60
LONG_USER = "a" * 36 + "-verylongaccountname-" + "z" * 23  # 80 characters, the most a user name has
# How tall the top bar's row of links may be at 1280 px: one line of them (two lines are about 80 px).
ONE_LINE_PX = 48


def violations(page):
    """Every axe violation on the page, whatever its impact, as `rule: targets` lines. axe-core is put on each page
    it loads once, not once a check."""
    from axe_playwright_python.sync_playwright import Axe

    if not page.evaluate("typeof window.axe === 'object'"):
        page.evaluate(Axe().axe_script)
    found = page.evaluate("axe.run({resultTypes: ['violations']})")["violations"]
    return [f"{v['id']} ({v['impact']}): {[node['target'] for node in v['nodes']][:5]}" for v in found]


def top_bar_height(page):
    """From the highest to the lowest bottom of the top bar's visible links, buttons and name (px)."""
    return page.evaluate(
        "(() => { const boxes = [...document.querySelectorAll('.navbar .navbar-brand, .navbar .nav-link,"
        " .navbar .btn')].filter((e) => e.offsetParent !== null).map((e) => e.getBoundingClientRect());"
        " return Math.max(...boxes.map((b) => b.bottom)) - Math.min(...boxes.map((b) => b.top)); })()"
    )


def top_bar_overflow(page):
    """How far the top bar's furthest visible link, button, badge or name reaches past the bar's own right edge (inside
    its padding), in px: more than 0 is cut, or pushes past the page's edge in another browser's fonts."""
    return page.evaluate(
        "(() => { const bar = document.querySelector('.navbar > [class^=container]');"
        " const edge = bar.getBoundingClientRect().right - parseFloat(getComputedStyle(bar).paddingRight);"
        " const items = [...document.querySelectorAll('.navbar .navbar-brand, .navbar .badge, .navbar .nav-link,"
        " .navbar .btn, .navbar .navbar-toggler')].filter((e) => e.offsetParent !== null);"
        " return Math.max(...items.map((e) => e.getBoundingClientRect().right)) - edge; })()"
    )


def log_in_as_admin(page, origin):
    page.goto(f"{origin}/login")
    page.fill("#username", "admin")
    page.fill("#password", PASSWORDS["admin"])
    page.click("form[method=post] button[type=submit]")
    page.wait_for_selector("form[action$='/logout']")


def with_long_data(app):
    """A category label (in every language) and an account of the longest the portal takes (the animal comes
    through the form)."""
    with app.app_context():
        own_labels = {"de": LONG_LABEL_DE, "es": LONG_LABEL_ES}
        categories.name("production", 7, LONG_LABEL[: categories.LABEL_MAX_LENGTH], "admin", own_labels)
        accounts.create(LONG_USER, "staff", PASSWORDS["staff"], must_change_password=False)
        db.session.commit()


def visit(page, origin, production_store, staging_store):
    """Each page, in the order a visitor meets them: yields (name, the HTML the server sent)."""
    rex = production_store.animals()[0]["id"]
    long_on_staging = staging_store.add(LONG_NAME, 7, "available")["id"]
    for name, path in (("login", "/login"), ("list", "/animals"), ("animal", f"/animals/{rex}"), ("404", "/nowhere")):
        response = page.goto(origin + path)
        yield name, response.text()
    log_in_as_admin(page, origin)
    page.goto(f"{origin}/animals/new")
    with page.expect_response(lambda response: response.request.method == "POST") as posted:
        page.click("button[data-submit-once]")
    page.wait_for_selector(".invalid-feedback")
    yield "add-errors", posted.value.text()
    page.fill("#name", LONG_NAME)
    page.fill("#category_id", "7")
    with page.expect_navigation():
        page.click("button[data-submit-once]")
    yield "long-animal", page.content()
    page.goto(f"{origin}/animals/import")
    page.set_input_files(
        "#file", files=[{"name": "x" * 60 + ".csv", "mimeType": "text/csv", "buffer": IMPORTED.encode()}]
    )
    with page.expect_navigation():
        page.click("form[enctype] button[type=submit]")
    yield "import-preview", page.content()
    page.goto(f"{origin}/animals/promote?limit=100")
    yield "promote", page.content()
    page.check(f"#pet-{long_on_staging}")
    with page.expect_navigation():
        page.click("form[method=post] button.btn-primary")
    yield "promotion-preview", page.content()
    user = quote(LONG_USER)
    for name, path in (
        ("list-long", "/animals?sort=name"),
        ("import", "/animals/import"),
        ("additions", "/animals/mine"),
        ("sessions", "/account/sessions"),
        ("password", "/account/password"),
        ("mfa", "/account/mfa"),
        ("passkeys", "/account/passkeys"),
        ("environment", "/admin/environment"),
        ("status", "/admin/status"),
        ("accounts", "/admin/users"),
        ("account", f"/admin/users/{user}"),
        ("new-account", "/admin/users/new"),
        ("categories", "/admin/categories"),
        ("audit", "/admin/audit"),
    ):
        response = page.goto(origin + path)
        yield name, response.text()


IMPORTED = f"name,categoryId,status\n{LONG_NAME},7,available\n{LONG_NAME}{LONG_NAME},7,\nTom,{LONG_LABEL},sold\n"


# Each language light, and dark in German: a theme's colours are the same in every language, and German's long words
# are the likeliest to widen a page (the HTML checker runs once per language, on its light pages).
@pytest.mark.parametrize(("language", "theme"), [("en", "light"), ("de", "light"), ("es", "light"), ("de", "dark")])
def test_every_page_in_every_language_and_theme_is_accessible_valid_and_fits(
    browser, portal_app, production_store, staging_store, tmp_path, language, theme
):
    """Every page with the longest data, at 320, 375, 768 and 1280 px: nothing scrolls sideways (the document's
    scrollWidth is its clientWidth) and nothing of the top bar runs past its edge, axe finds nothing at 320 and 1280
    px, and the top bar is one line at 1280 px (German, the longest, as an admin, who has the most links)."""
    with_long_data(portal_app)
    problems, saved = [], []
    with serve(portal_app) as origin:
        context = browser.new_context(locale=language, color_scheme=theme, viewport={"width": 1280, "height": 900})
        page = context.new_page()
        page.set_default_timeout(10_000)
        for name, html in visit(page, origin, production_store, staging_store):
            assert f'<html lang="{language}"' in html, f"{name} is not served in {language}"
            assert page.evaluate("document.documentElement.dataset.bsTheme") == theme
            for width in WIDTHS:
                page.set_viewport_size({"width": width, "height": 900})
                if width in AXE_WIDTHS:
                    problems += [f"{name} at {width}px: {v}" for v in violations(page)]
                if sideways_scroll(page) > 0:  # scrollWidth > clientWidth
                    problems.append(f"{name} scrolls sideways at {width}px")
                if (overflow := top_bar_overflow(page)) > 0.5:
                    problems.append(f"{name}: the top bar runs {overflow:.0f}px past its edge at {width}px")
                if width == 1280 and top_bar_height(page) > ONE_LINE_PX:
                    problems.append(f"{name}: the top bar takes more than one line at 1280px")
                if (language, theme, name) in PICTURES:
                    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
                    picture = f"{PICTURES[language, theme, name]}-{width}.png"
                    page.screenshot(path=str(SCREENSHOTS / picture), full_page=True)
            page.set_viewport_size({"width": 1280, "height": 900})
            saved.append(tmp_path / f"{name}.html")
            saved[-1].write_text(html, encoding="utf-8")
        context.close()
    assert problems == [], "\n".join(problems)
    if theme == "light":  # the HTML is the same in both themes: it is checked once per language
        errors = html_errors(saved)
        assert errors == [], "\n".join(errors)


@pytest.mark.parametrize("language", ["de", "es"])
def test_the_top_bar_keeps_fitting_when_links_are_added(browser, portal_app, language):
    """Two more links in the admin's top bar, with the longest user name: it wraps, and nothing runs past its edge
    or the page's, at the width it opens out (1200 px) and at 1280 px."""
    with serve(portal_app) as origin:
        context = browser.new_context(locale=language, viewport={"width": 1280, "height": 900})
        page = context.new_page()
        page.set_default_timeout(10_000)
        log_in_as_admin(page, origin)
        page.goto(f"{origin}/animals")
        page.evaluate(
            "(name) => { const links = document.querySelector('.navbar-nav');"
            " for (const word of ['Kategoriebezeichnungen', 'Zugriffsprotokolle']) {"
            " const item = document.createElement('li'); item.className = 'nav-item';"
            ' item.innerHTML = \'<a class="nav-link" href="#"></a>\'; item.firstChild.textContent = word;'
            " links.appendChild(item); }"
            " document.querySelector('.navbar .user-name').textContent = name; }",
            LONG_USER,
        )
        for width in (1200, 1280):
            page.set_viewport_size({"width": width, "height": 900})
            assert sideways_scroll(page) <= 0, f"scrolls sideways at {width}px"
            assert top_bar_overflow(page) <= 0.5, f"the top bar runs past its edge at {width}px"
        context.close()


def html_errors(files):
    """The Nu Html Checker's errors for `files`, in one run."""
    if not VNU_JAR.exists():
        pytest.skip(f"{VNU_JAR} is missing (npm ci --prefix tests): no HTML checker")
    run = subprocess.run(
        ["java", "-jar", str(VNU_JAR), "--errors-only", "--format", "json", *map(str, files)],
        capture_output=True,
        text=True,
        check=False,
    )
    messages = json.loads(run.stderr or "{}").get("messages", [])
    return [f"{Path(m['url']).name}:{m.get('lastLine')}: {m['message']}" for m in messages]


def test_the_theme_control_keeps_the_choice_and_no_page_flashes_the_other_theme(browser, portal_app):
    with serve(portal_app) as origin:
        context = browser.new_context(color_scheme="light", viewport={"width": 1280, "height": 900})
        # Records the colour mode at the moment the page's <body> first exists, before anything is drawn.
        context.add_init_script(
            "new MutationObserver((_, observer) => { if (document.body) {"
            " window.themeAtFirstBody = document.documentElement.getAttribute('data-bs-theme');"
            " observer.disconnect(); } }).observe(document, {childList: true, subtree: true});"
        )
        page = context.new_page()
        page.goto(f"{origin}/animals")
        assert page.evaluate("window.themeAtFirstBody") == "light"
        page.click("[data-theme-value=dark]")
        assert page.evaluate("document.documentElement.dataset.bsTheme") == "dark"
        assert page.get_attribute("[data-theme-value=dark]", "aria-pressed") == "true"
        page.goto(f"{origin}/login")  # another page: dark from its first paint
        assert page.evaluate("window.themeAtFirstBody") == "dark"
        page.click("[data-theme-value=auto]")  # automatic: the system's preference (light here)
        page.reload()
        assert page.evaluate("window.themeAtFirstBody") == "light"
        page.emulate_media(color_scheme="dark")  # the system turns dark: an automatic page follows at once
        page.wait_for_function("() => document.documentElement.dataset.bsTheme === 'dark'", timeout=5_000)
        context.close()


def focused(page):
    """The focused element's id, and whether it shows a focus indicator (an outline of 2 px or more)."""
    return page.evaluate(
        "(() => { const e = document.activeElement; const s = getComputedStyle(e);"
        " return [e.id || e.tagName, s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) >= 2]; })()"
    )


def tab_order(page, first, count):
    """The ids focused by pressing Tab `count` times from `first`, each with whether its focus shows."""
    page.focus(first)
    page.keyboard.press("Shift+Tab")
    order = []
    for _ in range(count):
        page.keyboard.press("Tab")
        order.append(focused(page))
    return order


def errors_tied_to_fields(page):
    """Each invalid field's id with the text of the error it names in aria-describedby."""
    return page.evaluate(
        "Array.from(document.querySelectorAll('[aria-invalid=true]')).map((field) => [field.id,"
        " (field.getAttribute('aria-describedby') || '').split(' ').map((id) => document.getElementById(id))"
        ".filter((e) => e && e.classList.contains('invalid-feedback')).map((e) => e.textContent.trim()).join(' ')])"
    )


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_login_and_add_forms_by_keyboard_alone_focus_shows_and_errors_belong_to_their_fields(
    browser, portal_app, theme
):
    with serve(portal_app) as origin:
        context = browser.new_context(color_scheme=theme, viewport={"width": 1280, "height": 900})
        page = context.new_page()
        page.goto(f"{origin}/login")
        order = tab_order(page, "#username", 4)
        assert order == [["username", True], ["password", True], ["remember", True], ["BUTTON", True]]
        page.keyboard.press("Enter")  # the form sent empty, from the keyboard
        page.wait_for_selector(".invalid-feedback")
        tied = dict(errors_tied_to_fields(page))
        assert set(tied) == {"username", "password"} and all(tied.values()), tied
        page.focus("#username")
        page.keyboard.type("admin")
        page.keyboard.press("Tab")
        page.keyboard.type(PASSWORDS["admin"])
        page.keyboard.press("Enter")
        page.wait_for_selector("form[action$='/logout']")
        page.goto(f"{origin}/animals/new")
        order = [name for name, shows in tab_order(page, "#name", 4) if shows]
        assert order == ["name", "category_id", "status", "BUTTON"]
        page.keyboard.press("Enter")  # the add button, focused last: sends the form empty
        page.wait_for_selector(".invalid-feedback")
        tied = dict(errors_tied_to_fields(page))
        assert "name" in tied and "category_id" in tied and all(tied.values()), tied
        context.close()


def test_the_store_down_in_german_with_the_longest_name_fits_and_is_accessible(browser, make_portal, tmp_path):
    """The store's last good answer standing in (list and animal, with the notice), the add form offering to keep
    an animal, and the kept animal waiting in Your additions: in German, with a 100-character name, at every width
    nothing scrolls sideways, and axe finds nothing at 320 and 1280 px. Pictures of each at 320 and 1280 px."""
    port = free_port()
    store = make_store(tmp_path / "store.sqlite", [PRODUCTION_KEY])
    app = make_portal.over(f"http://127.0.0.1:{port}/v1", f"http://127.0.0.1:{port}/v1")
    problems = []

    def check(page, name):
        assert '<html lang="de"' in page.content(), f"{name} is not served in German"
        for width in WIDTHS:
            page.set_viewport_size({"width": width, "height": 900})
            if width in AXE_WIDTHS:
                problems.extend(f"{name} at {width}px: {v}" for v in violations(page))
                SCREENSHOTS.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(SCREENSHOTS / f"store-down-{name}-de-{width}.png"), full_page=True)
            if sideways_scroll(page) > 0:
                problems.append(f"{name} scrolls sideways at {width}px")
        page.set_viewport_size({"width": 1280, "height": 900})

    with serve(app) as origin:
        context = browser.new_context(locale="de", viewport={"width": 1280, "height": 900})
        page = context.new_page()
        page.set_default_timeout(10_000)
        with serve(store, port=port):
            headers = {"Authorization": f"Bearer {PRODUCTION_KEY}"}
            long_id = (
                store.test_client()
                .post("/v1/pets", json={"name": LONG_NAME, "categoryId": 7, "status": "available"}, headers=headers)
                .get_json()["id"]
            )
            log_in_as_admin(page, origin)
            page.goto(f"{origin}/animals/{long_id}")
        # The store is stopped: what it last answered stands in.
        page.goto(f"{origin}/animals")
        page.wait_for_selector("#stale-notice")
        assert LONG_NAME in page.content()
        check(page, "list")
        page.goto(f"{origin}/animals/{long_id}")
        page.wait_for_selector("#stale-notice")
        check(page, "animal")
        page.goto(f"{origin}/animals/new")
        page.fill("#name", LONG_NAME)
        page.fill("#category_id", "7")
        page.click("button[data-submit-once]")
        page.wait_for_selector("#keep-for-later")
        check(page, "add-not-sent")
        with page.expect_navigation():
            page.click("#keep-for-later")
        assert page.url.endswith("/animals/mine")
        page.wait_for_selector(".kept-additions")
        assert LONG_NAME in page.content() and "Wartet" in page.content()
        check(page, "kept-addition")
        context.close()
    dispose_store(store)
    assert problems == [], "\n".join(problems)
