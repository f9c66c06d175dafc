"""What a first visit meets on every page: a description of its own for search engines and link previews."""

import re
from html import unescape

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
