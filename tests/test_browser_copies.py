"""No silent change and no copy by mistake, in a real browser (Debian's Chromium through Playwright): a long name
reaches the server, an animal the store already lists is added only once confirmed, an import of the list's own
file adds nothing unless rows are chosen, and the promote page selects what is not yet promoted."""

import re

import pytest

from support import browsers
from support.browsers import SCREENSHOTS, desktop_page, sideways_scroll
from support.servers import serve

pytestmark = pytest.mark.slow

LONG_NAME = "Sehr-langer-Tiername-" * 4 + "x" * 16  # 100 characters, with few places to break


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


def creates(store):
    return [request for request in store.received if request.method == "POST"]


def choose_file(page, content, name="animals.csv"):
    page.set_input_files("#file", files=[{"name": name, "mimeType": "text/csv", "buffer": content.encode()}])


def test_300_characters_typed_into_the_name_field_give_a_message_and_add_nothing(page, origin, production_store):
    log_in(page, origin, "staff")
    page.goto(f"{origin}/animals/new")
    page.locator("#name").press_sequentially("Pip" * 100)  # typed key by key: nothing cuts it in the browser
    assert len(page.input_value("#name")) == 300
    page.fill("#category_id", "2")
    page.click("button[data-submit-once]")
    page.wait_for_selector("#name ~ .invalid-feedback")
    assert "Keep the name to 100 characters or fewer." in page.inner_text("#name ~ .invalid-feedback")
    assert creates(production_store) == []


def test_a_copy_of_a_listed_animal_is_added_only_once_confirmed(page, origin, production_store):
    log_in(page, origin, "staff")
    page.goto(f"{origin}/animals/new")
    page.fill("#name", "Rex")  # production lists Rex, category 1, available
    page.fill("#category_id", "1")
    page.select_option("#status", "available")
    page.click("button[data-submit-once]")
    warning = page.wait_for_selector("#duplicate-warning")
    assert "already lists an animal with this name, category and status" in warning.inner_text()
    assert creates(production_store) == []
    assert page.input_value("input[name=confirm_duplicate]") == "1"
    page.click("text=Add it anyway")
    page.wait_for_selector("h1:has-text('Rex')")
    assert [animal["name"] for animal in production_store.animals()].count("Rex") == 2
    assert len(creates(production_store)) == 1


def test_the_lists_own_csv_imported_into_the_same_environment_adds_nothing_unless_rows_are_chosen(
    page, origin, production_store
):
    log_in(page, origin, "staff")
    page.goto(f"{origin}/animals")
    download = page.request.get(origin + page.get_attribute("a[href^='/animals.csv']", "href"))
    assert download.ok
    page.goto(f"{origin}/animals/import")
    choose_file(page, download.text(), name="animals-production.csv")
    page.click("text=Upload and preview")
    page.wait_for_selector("text=Nothing has been sent yet.")
    assert "0 animals will be added to production." in page.inner_text("main")
    assert "4 rows have the name, category and status of animals production already lists." in page.inner_text(
        "#copies-warning"
    )
    assert page.locator("text=Add 4 animals").count() == 0
    assert page.locator("input[name=row]").count() == 4
    # Nothing chosen: nothing is sent.
    page.click("text=Add the rows checked below to production")
    page.wait_for_selector("text=Nothing was sent: no row is chosen to add.")
    assert creates(production_store) == []
    # One chosen: that one alone is added.
    page.locator("tr", has_text="Mittens").locator("input[name=row]").check()
    page.click("text=Add the rows checked below to production")
    page.wait_for_selector("text=Done.", timeout=20_000)
    assert len(creates(production_store)) == 1
    names = [animal["name"] for animal in production_store.animals()]
    assert names.count("Mittens") == 2 and names.count("Rex") == names.count("Goldie") == names.count("Nibbles") == 1


def test_the_promote_pages_select_all_chooses_every_animal_not_yet_promoted(page, origin, staging_store):
    for name, status in (("Staging Ada", "pending"), ("Staging Bo", "sold")):
        staging_store.add(name, 3, status)
    log_in(page, origin, "admin")
    # Staging Sam promoted first, so one box is disabled.
    page.goto(f"{origin}/animals/promote")
    page.locator("tr", has_text="Staging Sam").locator("input[name=pet_id]").check()
    page.click("text=Preview the promotion")
    page.wait_for_selector("text=Nothing has been sent yet.")
    page.click("text=Add 1 animal to production")
    page.wait_for_selector("text=Done.", timeout=20_000)

    page.goto(f"{origin}/animals/promote")
    assert page.locator("tr.promoted input[name=pet_id]").is_disabled()
    assert page.locator(".promote-rows .status-badge").count() == 3  # statuses as the list shows them
    page.click("text=Select all 2 animals not yet promoted")
    boxes = page.locator("input[name=pet_id]")
    checked = {box.get_attribute("value"): box.is_checked() for box in boxes.all()}
    assert sorted(checked.values()) == [False, True, True]
    assert not page.locator("tr.promoted input[name=pet_id]").is_checked()
    page.click("text=Preview the promotion")
    page.wait_for_selector("text=Nothing has been sent yet.")
    assert page.locator("td[data-label=Name]").all_text_contents() == ["Staging Ada", "Staging Bo"]

    page.goto(f"{origin}/animals/promote?not_promoted=y")
    assert "Staging Sam" not in page.inner_text(".promote-rows")
    assert page.locator(".promote-rows tbody tr").count() == 2


def test_a_second_preview_names_the_animal_promoted_before(page, origin, staging_store):
    log_in(page, origin, "admin")
    for _ in range(2):
        page.goto(f"{origin}/animals/promote")
        box = page.locator("tr", has_text="Staging Sam").locator("input[name=pet_id]")
        if box.is_disabled():
            break
        box.check()
        page.click("text=Preview the promotion")
        page.wait_for_selector("text=Nothing has been sent yet.")
        page.click("text=Add 1 animal to production")
        page.wait_for_selector("text=Done.", timeout=20_000)
    # The ledger's entry is sent again by hand (a stale tab): the preview names it and offers no button for nothing.
    page.goto(f"{origin}/animals/promote")
    staging_id = page.get_attribute("tr.promoted input[name=pet_id]", "value")
    token = page.get_attribute("input[name=csrf_token]", "value")
    answer = page.request.post(
        f"{origin}/animals/promote", form={"csrf_token": token, "pet_id": staging_id}, max_redirects=0
    )
    page.goto(origin + answer.headers["location"])
    assert page.locator("td[data-label=Name]").all_text_contents() == ["Staging Sam"]
    assert "Promoted before" in page.inner_text(".import-rows")
    assert page.locator("text=Add 0 animals").count() == 0
    assert "There is nothing to add." in page.inner_text("main")


@pytest.mark.parametrize("width", [320, 1280])
def test_the_touched_pages_fit_in_german_with_a_100_character_name(
    browser, origin, production_store, staging_store, width
):
    """Each page this work changed, in German, with the longest name a field takes: no sideways scroll."""
    production_store.add(LONG_NAME, 1, "available")
    staging_store.add(LONG_NAME, 1, "available")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    page.set_default_timeout(10_000)
    page.goto(f"{origin}/language/de?next=/login")
    browsers.log_in(page, origin, "admin")
    page.wait_for_selector("text=Angemeldet als admin.")

    def shoot(name):
        page.screenshot(path=str(SCREENSHOTS / f"copies-{name}-de-{width}.png"), full_page=True)
        overflow = sideways_scroll(page)
        assert overflow <= 0, f"{page.url} scrolls sideways by {overflow}px at {width}px"

    page.goto(f"{origin}/animals/new")
    page.fill("#name", LONG_NAME)
    page.fill("#category_id", "1")
    page.select_option("#status", "available")
    page.click("button[data-submit-once]")
    page.wait_for_selector("#duplicate-warning")
    shoot("add-confirm")
    page.goto(f"{origin}/animals/import")
    choose_file(page, f"name,categoryId,status\n{LONG_NAME},1,available\n{LONG_NAME}x,1,\n")
    page.click("main form[enctype] button[type=submit]")
    page.wait_for_url(re.compile(r"/animals/import/[^/]+$"))
    shoot("import-preview")
    page.goto(f"{origin}/animals/promote")
    shoot("promote")
    page.goto(f"{origin}/admin/users/new")
    page.fill("#username", "bad name " + LONG_NAME)
    page.fill("#password", "short")
    page.click("main form button[type=submit]")
    page.wait_for_selector(".invalid-feedback")
    shoot("new-account-errors")
    page.goto(f"{origin}/admin/categories")
    shoot("categories")
    context.close()
