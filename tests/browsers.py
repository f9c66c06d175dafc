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
    os.environ.get("PETPORTAL_SCREENSHOT_DIR", Path(__file__).parent.parent / "test-output" / "screenshots")
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


def sideways_scroll(page):
    """How many pixels the page scrolls sideways at its current width (0 when it fits)."""
    return page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
