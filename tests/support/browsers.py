"""The browser the end-to-end tests drive: Debian's Chromium through Playwright (which cannot download a browser of
its own here), and what the tests measure of a page in it."""

import os
from contextlib import contextmanager
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SCREENSHOTS = Path(
    os.environ.get("PETPORTAL_SCREENSHOT_DIR", Path(__file__).parents[2] / "test-output" / "screenshots")
)


@contextmanager
def chromium():
    """Debian's Chromium, headless; skips the test when it is not installed."""
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium): no browser to test with")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        try:
            yield browser
        finally:
            browser.close()


@contextmanager
def desktop_page(browser):
    """A page in a new context of `browser`, 1280 px wide, that waits at most 10 s for anything."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(10_000)
    try:
        yield page
    finally:
        context.close()


def log_in(page, origin, username):
    """Log in through the login form, with the test account's password."""
    from support.helpers import PASSWORDS

    page.goto(f"{origin}/login")
    page.fill("#username", username)
    page.fill("#password", PASSWORDS[username])
    page.click("button[type=submit]")


def sideways_scroll(page):
    """How many pixels the page scrolls sideways at its current width (0 when it fits)."""
    return page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
