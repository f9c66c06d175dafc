"""Lighthouse on the pages a newcomer opens first, as a phone and as a desktop see them.

    npm ci --prefix bench && python -m bench.lighthouse

Starts the demo (`python app.py`) on a free port at http://localhost, then runs Lighthouse 13 (bench/package.json)
with Debian's Chromium, headless, on /animals, one animal and /login, with its mobile preset (a throttled phone)
and its desktop preset. Prints the four category scores of each run and the mobile first contentful paint, then
every audit that held a score under 100 back, so a figure below 100 names its cause. A benchmark, not a test.
"""

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from petportal.running.processes import free_port, stop, wait_for_port
from tests.support.portal import PROJECT_ROOT

LIGHTHOUSE = PROJECT_ROOT / "bench" / "node_modules" / ".bin" / "lighthouse"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = (
    "--headless=new --no-sandbox --disable-gpu --disable-background-networking --disable-component-update "
    "--disable-sync --no-first-run"
)
CATEGORIES = ("performance", "accessibility", "best-practices", "seo")
PRESETS = ("mobile", "desktop")


def run(url, preset, folder):
    """One Lighthouse run: its report (JSON)."""
    report = Path(folder) / "report.json"
    command = [
        str(LIGHTHOUSE),
        url,
        "--quiet",
        f"--chrome-flags={CHROMIUM_FLAGS}",
        "--output=json",
        f"--output-path={report}",
        f"--only-categories={','.join(CATEGORIES)}",
    ]
    if preset == "desktop":
        command.append("--preset=desktop")
    subprocess.run(command, check=True, env={"CHROME_PATH": CHROMIUM, "PATH": "/usr/bin:/bin"}, timeout=300)
    return json.loads(report.read_text())


def held_back(report):
    """In each category that scored under 100, its weighted audits that scored under 1, as (category, audit
    title, what it found)."""
    found = []
    for category in CATEGORIES:
        if round(report["categories"][category]["score"] * 100) == 100:
            continue
        for reference in report["categories"][category]["auditRefs"]:
            audit = report["audits"][reference["id"]]
            if reference["weight"] and audit.get("score") is not None and audit["score"] < 1:
                found.append((category, audit["title"], audit.get("displayValue", "")))
        if category == "performance":  # and what slows those metrics down, as Lighthouse estimates it
            for audit in report["audits"].values():
                savings = audit.get("metricSavings") or {}
                if audit.get("score") is not None and audit["score"] < 1 and any(savings.values()):
                    found.append(("performance, the cause", audit["title"], audit.get("displayValue", "")))
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args()
    if not LIGHTHOUSE.exists():
        sys.exit("Lighthouse is not installed: npm ci --prefix bench")
    port = free_port()
    demo = subprocess.Popen(
        [sys.executable, "app.py", "--port", str(port)],
        cwd=PROJECT_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, demo, seconds=60)
        origin = f"http://localhost:{port}"
        import requests  # the portal's own dependency

        animal = re.search(r'href="/animals/(\d+)', requests.get(f"{origin}/animals", timeout=10).text).group(1)
        pages = ("/animals", f"/animals/{animal}", "/login")
        print("| page | preset | performance | accessibility | best practices | SEO | first contentful paint |")
        print("|---|---|---:|---:|---:|---:|---:|")
        causes = {}
        with tempfile.TemporaryDirectory(prefix="petportal-lighthouse-") as folder:
            for page in pages:
                for preset in PRESETS:
                    report = run(origin + page, preset, folder)
                    scores = [round(report["categories"][name]["score"] * 100) for name in CATEGORIES]
                    paint = report["audits"]["first-contentful-paint"]["displayValue"]
                    print(f"| {page} | {preset} | " + " | ".join(map(str, scores)) + f" | {paint} |")
                    for cause in held_back(report):
                        causes.setdefault(cause[:2], []).append(f"{page} {preset}: {cause[2]}".rstrip(": "))
        print()
        print("What held a score under 100 back:" if causes else "Every score is 100.")
        for (category, title), where in sorted(causes.items()):
            print(f"- {category}: {title} ({'; '.join(where)})")
    finally:
        stop([demo])


if __name__ == "__main__":
    main()
