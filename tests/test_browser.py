"""The portal in a real browser: Debian's Chromium driven by Playwright, over real stores on real ports."""

import re

import pytest

from support import browsers
from support.browsers import SCREENSHOTS, desktop_page, sideways_scroll
from support.helpers import PASSWORDS, SlowStore, totp
from support.servers import FaultServer, answer, serve

pytestmark = pytest.mark.slow

SERIOUS = {"serious", "critical"}


@pytest.fixture
def origin(portal_app):
    with serve(portal_app) as url:
        yield url


@pytest.fixture
def page(browser):
    with desktop_page(browser) as page:
        yield page


def log_in(page, origin, username):
    browsers.log_in(page, origin, username)
    page.wait_for_selector(f"text=Logged in as {username}.")


def assert_accessible(page):
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(page)
    serious = [v for v in results.response["violations"] if v["impact"] in SERIOUS]
    assert serious == [], results.generate_report()


def assert_fits_a_phone(page):
    """At 375 px the page does not scroll sideways; the viewport is put back afterwards."""
    before = page.viewport_size
    page.set_viewport_size({"width": 375, "height": 900})
    overflow = sideways_scroll(page)
    page.set_viewport_size(before)
    assert overflow <= 0, f"{page.url} scrolls sideways by {overflow}px at 375px"


# --- customers ------------------------------------------------------------------------------------


def test_filtering_to_sold_updates_the_url_and_the_table(page, origin):
    page.goto(f"{origin}/animals")
    page.select_option("#status", "sold")
    page.click("text=Filter")
    page.wait_for_url(re.compile(r"status=sold"))
    badges = page.locator("tbody .status-badge").all_text_contents()
    assert badges == ["sold"]
    assert page.locator("tbody tr").count() == 1
    assert page.input_value("#status") == "sold"


def test_opening_an_animal_and_going_back_keeps_the_filter(page, origin):
    page.goto(f"{origin}/animals?status=available&limit=5")
    page.click("tbody tr >> nth=0 >> text=View")
    assert page.locator("h1").inner_text() == "Rex"
    page.click("text=Back to the list")
    page.wait_for_url(re.compile(r"/animals\?(limit=5&status=available|status=available&limit=5)$"))
    assert page.input_value("#limit") == "5"


def test_a_hostile_name_shows_as_text_and_opens_no_dialog(page, origin, production_store):
    production_store.add("<img src=x onerror=alert(1)>", 1, "available")
    production_store.add("<script>alert(2)</script>", 1, "available")
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.goto(f"{origin}/animals")
    names = page.locator("td[data-label=Name]").all_text_contents()
    assert "<img src=x onerror=alert(1)>" in names and "<script>alert(2)</script>" in names
    page.wait_for_timeout(300)
    assert dialogs == []


def test_a_customer_searches_and_sorts_and_the_rows_filter_as_they_type(page, origin, production_store):
    production_store.add("Zoë", 1, "available")
    production_store.add("Straße", 1, "available")
    page.goto(f"{origin}/animals")
    page.type("#q", "ZO")  # with JavaScript on, the rows on the page filter at once
    assert page.locator("tbody tr:visible td[data-label=Name]").all_text_contents() == ["Zoë"]
    assert "1 of the 6 animals on this page contains “ZO”" in page.inner_text("#search-summary")
    page.fill("#q", "strasse")  # folded as the server folds it
    page.dispatch_event("#q", "input")
    assert page.locator("tbody tr:visible td[data-label=Name]").all_text_contents() == ["Straße"]
    page.fill("#q", "zoe")  # accents ignored, as on the server
    page.dispatch_event("#q", "input")
    assert page.locator("tbody tr:visible td[data-label=Name]").all_text_contents() == ["Zoë"]
    page.fill("#q", "i")
    page.click("text=Filter")
    page.get_by_role("link", name="Name, ascending").click()
    page.wait_for_url(re.compile(r"\bq=i&.*sort=name"))
    assert page.locator("td[data-label=Name]").all_text_contents() == ["Goldie", "Mittens", "Nibbles"]
    assert "3 of the 6 animals fetched match “i”." in page.inner_text("#search-summary")
    assert page.input_value("#q") == "i" and page.input_value("#sort") == "name"
    assert_accessible(page)
    assert_fits_a_phone(page)
    page.click("tbody tr >> nth=1 >> text=View")
    assert page.locator("h1").inner_text() == "Mittens"
    page.click("text=Back to the list")
    page.wait_for_url(re.compile(r"q=i&sort=name$"))
    assert page.input_value("#q") == "i"


def test_sorting_from_the_headings_both_ways_marks_the_sorted_column(page, origin, production_store):
    production_store.add("alf", 1, "available")
    production_store.add("Bert", 2)
    page.goto(f"{origin}/animals")
    assert page.get_attribute("th:has-text('Id')", "aria-sort") == "ascending"  # the default order, by id
    page.click("th:has-text('Name') a.sort-link >> nth=1")  # ▼: Name, descending
    page.wait_for_url(re.compile(r"sort=-name$"))
    assert page.locator("td[data-label=Name]").all_text_contents() == [
        "Rex",
        "Nibbles",
        "Mittens",
        "Goldie",
        "Bert",
        "alf",
    ]
    assert page.get_attribute("th:has-text('Name')", "aria-sort") == "descending"
    assert page.locator("th[aria-sort]").count() == 1
    page.get_by_role("link", name="Name, ascending").click()
    page.wait_for_url(re.compile(r"sort=name$"))
    assert page.locator("td[data-label=Name]").all_text_contents()[0] == "alf"
    assert page.get_attribute("th:has-text('Name')", "aria-sort") == "ascending"
    page.fill("#q", "e")
    page.click("text=Filter")  # filtering keeps the order
    page.wait_for_url(re.compile(r"q=e&.*sort=name$"))
    page.get_by_role("link", name="Status, descending").click()
    page.wait_for_url(re.compile(r"q=e&sort=-status$"))
    assert page.locator("td[data-label=Name]").all_text_contents() == ["Goldie", "Mittens", "Rex", "Nibbles", "Bert"]
    assert_accessible(page)
    assert_fits_a_phone(page)


def test_every_time_is_shown_in_the_readers_zone_and_language_and_in_utc_without_script(browser, origin):
    from datetime import datetime
    from zoneinfo import ZoneInfo

    for script in (True, False):
        context = browser.new_context(
            timezone_id="Asia/Kolkata", locale="de", java_script_enabled=script, viewport={"width": 1280, "height": 900}
        )
        page = context.new_page()
        browsers.log_in(page, origin, "staff")
        page.wait_for_selector("form[action$='/logout']")
        page.goto(f"{origin}/account/sessions")
        moment = page.locator("time[datetime]").first
        at = datetime.fromisoformat(moment.get_attribute("datetime").replace("Z", "+00:00"))
        shown = moment.inner_text()
        if script:  # 5:30 ahead of UTC, written in German: "28.11.2026, 19:05:09 GMT+5:30"
            assert at.astimezone(ZoneInfo("Asia/Kolkata")).strftime("%H:%M:%S") in shown and "UTC" not in shown
            assert at.strftime("%Y") in shown and moment.get_attribute("title").endswith("UTC")
        else:
            assert at.strftime("%H:%M:%S") in shown and shown.endswith("UTC")
        context.close()


# --- staff ----------------------------------------------------------------------------------------


def test_staff_log_in_and_add_an_animal(page, origin, production_store):
    log_in(page, origin, "staff")
    page.click("text=Add animal")
    assert "This animal will be added to production" in page.inner_text(".target-environment")
    page.fill("#name", "Pixel")
    page.fill("#category_id", "4")
    page.select_option("#status", "pending")
    page.click("button[data-submit-once]")
    page.wait_for_selector("h1:has-text('Pixel')")
    assert "Added Pixel to production." in page.inner_text("main")
    assert [a["name"] for a in production_store.animals()].count("Pixel") == 1


def test_a_double_click_creates_exactly_one_animal(page, origin, production_store):
    log_in(page, origin, "staff")
    page.goto(f"{origin}/animals/new")
    page.fill("#name", "Twice")
    page.fill("#category_id", "2")
    page.dblclick("button[data-submit-once]")
    page.wait_for_selector("h1:has-text('Twice')")
    assert [a["name"] for a in production_store.animals()].count("Twice") == 1
    assert [r.method for r in production_store.received].count("POST") == 1


def test_invalid_values_show_errors_next_to_the_fields(page, origin, production_store):
    log_in(page, origin, "staff")
    page.goto(f"{origin}/animals/new")
    page.fill("#category_id", "99999999999999999999")
    page.click("button[data-submit-once]")
    page.wait_for_selector(".invalid-feedback")
    assert "Enter the animal's name." in page.inner_text("#name ~ .invalid-feedback")
    assert "too large for the pet store" in page.inner_text("#category_id ~ .invalid-feedback")
    assert page.get_attribute("#name", "class").count("is-invalid") == 1
    assert [r for r in production_store.received if r.method == "POST"] == []


# --- admins ---------------------------------------------------------------------------------------


def choose_file(page, content, name="animals.csv"):
    page.set_input_files("#file", files=[{"name": name, "mimeType": "text/csv", "buffer": content.encode()}])


def test_staff_import_a_file_preview_it_start_it_and_watch_the_bar_fill(make_portal, page, tmp_path):
    store = SlowStore(tmp_path, seconds=0.1)
    with serve(store) as slow, FaultServer() as staging, serve(make_portal.over(slow + "/v1", staging.base_url)) as url:
        log_in(page, url, "staff")
        page.click("nav >> text=Import")
        assert_accessible(page)
        rows = "".join(f"Kitten {number},2,available\n" for number in range(40))
        choose_file(page, "name,categoryId,status\n" + rows + "Nameless,x,\n")
        page.click("text=Upload and preview")
        page.wait_for_selector("text=Nothing has been sent yet.")
        assert page.locator("tr.row-invalid").count() == 1
        assert "neither a category id nor the label" in page.locator("tr.row-invalid").inner_text()
        assert_accessible(page)
        page.click("text=Add 40 animals to production")
        bar = page.locator("#import-bar")
        # The page's script moves the bar while the rows are sent, without reloading the page.
        page.wait_for_function(
            "() => { const bar = document.getElementById('import-bar');"
            " return bar !== null && bar.value > 1 && bar.value < bar.max; }"  # null while the next page loads
        )
        assert_accessible(page)
        page.wait_for_selector("text=Done.", timeout=20_000)
        assert bar.get_attribute("value") == "41" and bar.get_attribute("max") == "41"
        assert "41 of 41 rows done: 40 added, 1 refused, 0 unknown." in page.locator("#import-counts").inner_text()
        assert_accessible(page)
        assert sorted(store.names) == sorted(f"Kitten {number}" for number in range(40))


def switch_to(page, origin, environment):
    page.goto(f"{origin}/admin/environment")
    page.select_option("#environment", environment)
    assert f"Everyone will see {environment}" in page.inner_text("#switch-consequence")
    page.fill("#confirm", environment)
    page.click("text=Switch everyone")
    page.wait_for_selector(f"text=Everyone is now served from {environment}.")


def test_an_admin_switches_to_staging_and_back_and_the_audit_lists_both(browser, page, origin):
    log_in(page, origin, "admin")
    switch_to(page, origin, "staging")
    visitor = browser.new_context()
    other = visitor.new_page()
    other.goto(f"{origin}/animals")
    assert "You are using STAGING, not production." in other.inner_text(".env-banner")
    assert "Staging Sam" in other.inner_text("table")
    switch_to(page, origin, "production")
    other.reload()
    assert other.locator(".env-banner").count() == 0
    visitor.close()
    page.goto(f"{origin}/admin/audit")
    rows = page.locator("tbody tr", has_text="environment switched").all_inner_texts()
    assert len(rows) == 2
    assert "from staging to production" in rows[0] and "from production to staging" in rows[1]


# --- accounts and the second factor ---------------------------------------------------------------


@pytest.fixture
def strict_origin(make_portal, clock):
    """A portal that requires admins to have a second factor, on a clock the test moves."""
    with serve(make_portal(CLOCK=clock, REQUIRE_ADMIN_MFA=True)) as url:
        yield url


def test_an_admin_enrols_a_second_factor_and_logs_in_with_it(page, strict_origin, clock):
    origin = strict_origin
    log_in(page, origin, "admin")
    page.goto(f"{origin}/admin/users")
    page.wait_for_url(re.compile(r"/account/mfa$"))
    assert "This portal requires admins to use a second factor" in page.inner_text("main")
    assert page.locator(".mfa-qr svg").is_visible()
    assert_accessible(page)
    secret = page.inner_text("#mfa-secret")
    page.fill("#code", totp(secret, clock))
    page.click("text=Turn on the second factor")
    page.wait_for_selector("code.recovery-code")
    assert len(page.locator("code.recovery-code").all_inner_texts()) == 10
    assert_accessible(page)
    assert_fits_a_phone(page)
    page.goto(f"{origin}/account/mfa")
    assert "Second factor: on" in page.inner_text("main")
    assert_accessible(page)
    assert_fits_a_phone(page)
    page.goto(f"{origin}/admin/users")
    assert page.inner_text("tr:has(a[href='/admin/users/admin']) td[data-label='Second factor']") == "on"
    page.click("button:has-text('Log out')")
    page.wait_for_selector("nav a[href='/login']", state="attached")  # logged out before the next page
    clock.advance(seconds=30)
    page.goto(f"{origin}/login")
    page.fill("#username", "admin")
    page.fill("#password", PASSWORDS["admin"])
    page.click("main button[type=submit]")
    page.wait_for_url(re.compile(r"/login/mfa$"))
    assert_accessible(page)
    assert_fits_a_phone(page)
    page.fill("#code", totp(secret, clock))
    page.click("main button[type=submit]")
    page.wait_for_selector("text=Logged in as admin.")
    page.goto(f"{origin}/admin/environment")
    assert page.url == f"{origin}/admin/environment"


# --- keyboard only --------------------------------------------------------------------------------


def tab_to(page, selector, limit=40):
    """Press Tab until `selector` has the focus."""
    for _ in range(limit):
        if page.evaluate("(s) => document.activeElement && document.activeElement.matches(s)", selector):
            return
        page.keyboard.press("Tab")
    raise AssertionError(f"Tab never reached {selector}")


def follow(page, link, url):
    """Tab to a link, press Enter, and wait for the page it opens."""
    tab_to(page, link)
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(url))


def type_into(page, selector, text):
    """Tab to a field and type into it, as a keyboard user does."""
    tab_to(page, selector)
    page.keyboard.type(text)


def test_every_flow_can_be_finished_with_the_keyboard_alone(page, origin, production_store):
    page.goto(f"{origin}/animals")
    tab_to(page, "#status")
    page.keyboard.press("ArrowDown")  # All -> Available
    tab_to(page, ".filter-bar button[type=submit]")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r"status=available"))
    tab_to(page, "tbody tr:first-child a")
    page.keyboard.press("Enter")
    page.wait_for_selector("h1:has-text('Rex')")
    follow(page, "nav a[href='/login']", r"/login$")
    type_into(page, "#username", "admin")
    type_into(page, "#password", PASSWORDS["admin"])
    page.keyboard.press("Enter")
    page.wait_for_selector("text=Logged in as admin.")
    follow(page, "nav a[href='/animals/new']", r"/animals/new$")
    type_into(page, "#name", "Keys")
    type_into(page, "#category_id", "3")
    tab_to(page, "button[data-submit-once]")
    page.keyboard.press("Enter")
    page.wait_for_selector("h1:has-text('Keys')")
    page.goto(f"{origin}/admin/environment")
    type_into(page, "#confirm", "staging")
    page.keyboard.press("Enter")
    page.wait_for_selector("text=Everyone is now served from staging.")
    assert [a["name"] for a in production_store.animals()].count("Keys") == 1


# --- accessibility and layout ---------------------------------------------------------------------


def test_every_page_has_no_serious_or_critical_accessibility_violation(page, origin, production_store):
    rex = production_store.animals()[0]["id"]
    for path in ("/animals", f"/animals/{rex}", "/login", "/no-such-page", "/animals?limit=0"):
        page.goto(origin + path)
        assert_accessible(page)
    log_in(page, origin, "admin")
    for path in (
        "/animals/new",
        "/admin/environment",
        "/admin/status",
        "/admin/audit",
        "/admin/users",
        "/admin/users/new",
        "/admin/users/staff",
        "/account/password",
        "/account/sessions",
        "/account/mfa",
        "/admin/categories",
        "/animals/mine",
        "/animals?q=rex&sort=status",
        "/animals?q=nobody",
    ):
        page.goto(origin + path)
        assert_accessible(page)
    page.goto(f"{origin}/animals/new")
    page.click("button[data-submit-once]")
    page.wait_for_selector(".invalid-feedback")
    assert_accessible(page)


def test_the_502_and_503_pages_are_accessible(make_portal, page, tmp_path, staging_store):
    with FaultServer() as store:
        store.script(answer(200, b"{broken"))
        app = make_portal.over(store.base_url, staging_store.url)
        with serve(app) as url:
            assert page.goto(f"{url}/animals").status == 502
            assert_accessible(page)
    with FaultServer() as closed:
        gone = closed.base_url
    (tmp_path / "down").mkdir()
    app = make_portal.over(gone, staging_store.url)
    with serve(app) as url:
        assert page.goto(f"{url}/animals").status == 503
        assert_accessible(page)


@pytest.mark.parametrize("width", [375, 1280])
def test_screenshots_and_no_horizontal_scroll_on_a_phone(browser, origin, width):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    log_in(page, origin, "admin")
    for category_id, label in (("1", "Dogs"), ("2", "Cats"), ("3", "Fish")):
        page.goto(f"{origin}/admin/categories")
        page.fill("#category_id", category_id)
        page.fill("#label", label)
        page.click("text=Save label")
        page.wait_for_selector(f"td[data-label=Label] >> text={label}")
    pages = (
        ("list", "/animals"),
        ("add", "/animals/new"),
        ("admin-switch", "/admin/environment"),
        ("admin-users", "/admin/users"),
        ("admin-user", "/admin/users/staff"),
        ("admin-new-user", "/admin/users/new"),
        ("account-password", "/account/password"),
        ("account-sessions", "/account/sessions"),
        ("account-mfa", "/account/mfa"),
        ("admin-categories", "/admin/categories"),
        ("your-additions", "/animals/mine"),
        ("search", "/animals?q=i&sort=name"),
    )
    for name, path in pages:
        page.goto(origin + path)
        shoot(page, name, width)
    page.goto(f"{origin}/animals/import")
    shoot(page, "import-upload", width)
    choose_file(page, 'name,categoryId,status\nBiscuit,Dogs,available\n"Tom, the tabby",2,\nNo category,,sold\n')
    page.click("text=Upload and preview")
    page.wait_for_selector("text=Nothing has been sent yet.")
    shoot(page, "import-preview", width)
    page.click("text=Add 2 animals to production")
    page.wait_for_selector("text=Done.")
    shoot(page, "import-done", width)
    context.close()


def shoot(page, name, width):
    """A full-page screenshot for people to look at; the page must not scroll sideways at this width."""
    page.screenshot(path=str(SCREENSHOTS / f"{name}-{width}.png"), full_page=True)
    overflow = sideways_scroll(page)
    assert overflow <= 0, f"{page.url} scrolls sideways by {overflow}px at {width}px"
