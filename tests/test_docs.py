"""The README and the pages under docs/ as a fresh clone has them: every relative link and image resolves."""

import re

import pytest

from support.portal import PROJECT_ROOT

PAGES = [PROJECT_ROOT / "README.md", *sorted((PROJECT_ROOT / "docs").glob("*.md"))]
# Markdown links and images, and HTML src/href attributes.
TARGETS = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|(?:src|href)=\"([^\"]+)\"")


def relative_targets(page):
    for match in TARGETS.finditer(page.read_text()):
        target = match.group(1) or match.group(2)
        if not re.match(r"[a-z][a-z0-9+.-]*:|#", target):  # not http:, mailto:, or an anchor on the same page
            yield target.split("#", 1)[0]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_relative_link_and_image_exists(page):
    missing = [target for target in relative_targets(page) if not (page.parent / target).exists()]
    assert missing == [], f"{page.name} links to files a clone does not have"


def test_no_page_links_outside_the_repository():
    for page in PAGES:
        for target in relative_targets(page):
            assert (page.parent / target).resolve().is_relative_to(PROJECT_ROOT), (page.name, target)
