"""The README's screenshots, taken anew from the demo: `python docs/screenshots.py` (after the tests' install,
`pip install -e '.[test]'`, for Playwright; Chromium from `apt-get install chromium`).

Starts the demo (`python app.py`) on a free port at http://localhost, with a company sign-in configured so that
the login page shows its button (never pressed: no provider is needed), reads the demo accounts' passwords from
its banner, and writes every picture the README shows into docs/, at 1280 px and, where the README offers the
phone's view, at 375 px. Run it after a change to a page the README shows, and commit the pictures.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--no-first-run"]  # fmt: skip
WIDTHS = (1280, 375)


def start_demo(port):
    """The demo on `port`, and its accounts' passwords from the banner it prints."""
    env = {
        **{name: value for name, value in os.environ.items() if not name.startswith(("PETSTORE_", "PETPORTAL_"))},
        "PETPORTAL_OIDC_ISSUER": "https://sign-in.example.com",
        "PETPORTAL_OIDC_CLIENT_ID": "pet-portal",
        "PETPORTAL_OIDC_NAME": "Acme Workspace",
        "PETPORTAL_OIDC_STAFF_VALUES": "pet-staff",
    }
    demo = subprocess.Popen(
        [sys.executable, "app.py", "--port", str(port)], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True
    )
    banner = "".join(demo.stdout.readline() for _ in range(5))
    passwords = dict(re.findall(r"user name: (\w+)\s+password: (\S+)", banner))
    return demo, passwords


def shoot(
    browser, origin, name, path, widths=WIDTHS, account=None, language="en", theme="light", then=None, whole=(1280,)
):
    """Open `path` as `account` in `language` and `theme`, do `then(page)`, and save docs/<name>-<width>.png (the
    whole page at the `whole` widths, else what the screen shows)."""
    for width in widths:
        context = browser.new_context(viewport={"width": width, "height": 900}, color_scheme=theme, locale=language)
        context.add_cookies([{"name": "language", "value": language, "url": origin}])
        page = context.new_page()
        if account is not None:
            username, password = account
            page.goto(f"{origin}/login")
            page.fill("#username", username)
            page.fill("#password", password)
            page.click("button[type=submit]")
            page.wait_for_load_state()
        page.goto(origin + path)
        if then is not None:
            then(page)
        page.screenshot(path=str(ROOT / "docs" / f"{name}-{width}.png"), full_page=width in whole)
        context.close()


LONG_NAME = "Bartholomew" * 9 + "X"  # 100 characters, the longest name an animal may have


def promote_one(browser, origin, admin):
    """As `admin`: add an animal with the longest name to staging (through a preview of staging) and promote the
    first of staging's animals, so the promote page shows both kinds of row."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto(f"{origin}/login")
    page.fill("#username", admin[0])
    page.fill("#password", admin[1])
    page.click("button[type=submit]")
    page.wait_for_load_state()
    page.goto(f"{origin}/admin/environment")
    page.select_option("#preview_environment", "staging")
    page.click("form[action$='/preview'] button[type=submit]")
    page.goto(f"{origin}/animals/new")
    page.fill("#name", LONG_NAME)
    page.fill("#category_id", "1")
    page.click("button[data-submit-once]")
    page.wait_for_load_state()
    page.goto(f"{origin}/admin/environment")
    page.select_option("#preview_environment", "")
    page.click("form[action$='/preview'] button[type=submit]")
    page.goto(f"{origin}/animals/promote?limit=100")
    first = page.get_attribute("input[name=pet_id]:not([disabled])", "value")
    page.check(f"#pet-{first}")
    page.click("main form[method=post] button[type=submit]")
    page.wait_for_load_state()
    page.click("form[action$='/start'] button[type=submit]")
    page.wait_for_load_state()
    page.wait_for_timeout(1500)  # the promotion of one animal ends at once
    context.close()


def main():
    from petportal.running.processes import free_port, stop, wait_for_port

    port = free_port()
    demo, passwords = start_demo(port)
    try:
        wait_for_port(port, demo, seconds=60)
        origin = f"http://localhost:{port}"
        staff, admin = ("staff", passwords["staff"]), ("admin", passwords["admin"])
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            shoot(browser, origin, "list", "/animals?q=i&sort=name")
            shoot(browser, origin, "add", "/animals/new", account=staff)
            shoot(browser, origin, "admin-switch", "/admin/environment", account=admin)
            shoot(browser, origin, "admin-users", "/admin/users", widths=(1280,), account=admin)
            shoot(browser, origin, "list-de-dark", "/animals?sort=name", widths=(1280,), language="de", theme="dark")
            shoot(
                browser,
                origin,
                "add-es",
                "/animals/new",
                widths=(1280,),
                account=staff,
                language="es",
                then=lambda page: (page.click("main form button[type=submit]"), page.wait_for_load_state()),
            )
            shoot(browser, origin, "login", "/login", widths=(1280,))
            promote_one(browser, origin, admin)
            shoot(
                browser,
                origin,
                "promote-de",
                "/animals/promote?limit=100",
                widths=(1280, 320),
                account=admin,
                language="de",
                whole=(1280, 320),
            )
            browser.close()
    finally:
        stop([demo])
    print("written: " + ", ".join(sorted(path.name for path in (ROOT / "docs").glob("*.png"))))


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
