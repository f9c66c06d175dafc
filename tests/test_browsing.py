"""Browsing: category labels per environment, search and sort within the fetched animals, and each
account's own additions."""

import html
import re
import unicodedata

import pytest

from petportal.data.models import AuditEntry, CategoryLabel
from petportal.extensions import db

from support.helpers import at_once, post_form, submission_token
from support.portal import csrf_token

HOSTILE = '<script>alert("x")</script> & <b>bold</b>'


def names_on(page):
    """The animals' names in the order the list shows them."""
    return [html.unescape(name) for name in re.findall(r'<td class="text-free" data-label="Name">([^<]*)</td>', page)]


def list_calls(store):
    return [r.target for r in store.received if r.method == "GET" and r.target.startswith("/v1/pets?")]


def label(client, category_id, text):
    """Send the label form as the page shows it: for the environment the page was opened for."""
    page = client.get("/admin/categories").text
    fields = {"csrf_token": csrf_token(page), "environment": shown_environment(page)}
    return client.post("/admin/categories", data={**fields, "category_id": str(category_id), "label": text})


def label_in_languages(client, category_id, text, **own):
    """The label form with its own label per language (`de="Hunde"` sends `label_de`)."""
    page = client.get("/admin/categories").text
    fields = {"csrf_token": csrf_token(page), "environment": shown_environment(page)}
    languages = {f"label_{code}": own_label for code, own_label in own.items()}
    return client.post(
        "/admin/categories", data={**fields, "category_id": str(category_id), "label": text, **languages}
    )


def reading(client, language):
    client.set_cookie("language", language)
    return client


def shown_environment(page):
    match = re.search(r'name="environment" type="hidden" value="([^"]*)"', page)
    return match.group(1) if match else ""


def add_animal(client, name, category_id="1"):
    page = client.get("/animals/new").text
    fields = {"csrf_token": csrf_token(page), "submission_token": submission_token(page)}
    return client.post("/animals/new", data={**fields, "name": name, "category_id": category_id, "status": ""})


def audit_actions(app):
    with app.app_context():
        return [(entry.action, entry.environment, entry.details) for entry in db.session.scalars(db.select(AuditEntry))]


# --- category labels -------------------------------------------------------------------------------


def test_a_label_shows_beside_its_id_on_the_list_detail_and_add_pages(portal_app, auth_for, production_store):
    admin = auth_for(portal_app, "admin")
    assert label(admin, 1, "Dogs").status_code == 303
    rex = production_store.animals()[0]
    anyone = portal_app.test_client()
    listing = anyone.get("/animals").text
    assert '<td class="text-free" data-label="Category">Dogs · 1</td>' in listing
    assert '<td class="text-free" data-label="Category">2</td>' in listing  # no label: the id alone
    assert "Dogs · 1" in anyone.get(f"/animals/{rex['id']}").text
    form = auth_for(portal_app, "staff").get("/animals/new").text
    assert '<option value="1" label="Dogs · 1">Dogs</option>' in form
    assert 'list="category-choices"' in form
    labelled = {"code": "category_labelled", "category": 1, "label": "Dogs"}
    assert ("category_labelled", "production", labelled) in audit_actions(portal_app)


def test_a_label_is_shown_in_the_visitors_language_and_falls_back_to_the_default(
    portal_app, auth_for, production_store, staging_store
):
    """ "Fish · 3" on the German list read the English label: a label given in German is shown there, on the list,
    detail, add and promote pages; Spanish without its own reads the default label."""
    admin = auth_for(portal_app, "admin")
    assert label_in_languages(admin, 1, "Fish", de="Fische").status_code == 303
    rex = production_store.animals()[0]
    for language, shown in (("de", "Fische · 1"), ("en", "Fish · 1"), ("es", "Fish · 1")):
        anyone = reading(portal_app.test_client(), language)
        assert shown in anyone.get("/animals").text
        assert shown in anyone.get(f"/animals/{rex['id']}").text
        add_form = reading(auth_for(portal_app, "staff"), language).get("/animals/new").text
        assert f'<option value="1" label="{shown}">' in add_form
    assert "Fische" not in reading(portal_app.test_client(), "en").get("/animals").text
    labels_page = reading(admin, "de").get("/admin/categories").text
    assert '<td class="text-free" data-label="Name">Fish</td>' in labels_page
    assert '<td class="text-free" data-label="Auf Deutsch">Fische</td>' in labels_page
    post_form(admin, "/admin/environment", "/admin/environment/preview", environment="staging")
    assert label_in_languages(admin, 9, "Lizards", es="Lagartos").status_code == 303  # staging's one animal's
    assert "Lagartos · 9" in reading(admin, "es").get("/animals/promote").text
    assert "Lizards · 9" in reading(admin, "de").get("/animals/promote").text


def test_a_label_in_a_language_may_not_read_as_another_categorys_there(portal_app, auth_for):
    """Two categories never read the same in any language: German "Hunde" for 2 while 1 reads "Hunde" in German
    (its own label, or its default label that German falls back to) is refused on the German field."""
    admin = auth_for(portal_app, "admin")
    assert label_in_languages(admin, 1, "Dogs", de="Hunde").status_code == 303
    refused = label_in_languages(admin, 2, "Hounds", de="hunde")
    assert refused.status_code == 400
    assert "“Hunde” already names category 1 in production." in html.unescape(refused.text)
    assert label_in_languages(admin, 3, "Cats").status_code == 303
    assert label_in_languages(admin, 2, "Hounds", es="cats").status_code == 400
    assert label_in_languages(admin, 2, "Hounds", es="Perros", de="Jagdhunde").status_code == 303
    with portal_app.app_context():
        rows = db.session.scalars(db.select(CategoryLabel).order_by(CategoryLabel.category_id)).all()
        assert [(row.category_id, row.label, row.label_de, row.label_es) for row in rows] == [
            (1, "Dogs", "Hunde", None),
            (2, "Hounds", "Jagdhunde", "Perros"),
            (3, "Cats", None, None),
        ]


def test_a_label_may_not_read_as_another_categorys_in_another_language(portal_app, auth_for):
    """An import reads a category's label in the uploader's language, then by the default labels: "Dogs" as category
    4's German label and category 1's default label would name 4 for a German uploader and 1 for everyone else."""
    admin = auth_for(portal_app, "admin")
    assert label_in_languages(admin, 1, "Dogs", de="Hunde").status_code == 303
    refused = label_in_languages(admin, 4, "Birds", de="dogs")
    assert refused.status_code == 400
    assert "“Dogs” already names category 1 in production." in html.unescape(refused.text)
    assert label_in_languages(admin, 2, "Hunde", de="Jagdhunde").status_code == 400
    assert label_in_languages(admin, 4, "Birds", de="Vögel").status_code == 303


def test_changing_only_a_languages_label_is_saved_and_audited(portal_app, auth_for):
    admin = auth_for(portal_app, "admin")
    label(admin, 1, "Dogs")
    assert label_in_languages(admin, 1, "Dogs", de="Hunde").status_code == 303
    assert "Hunde · 1" in reading(portal_app.test_client(), "de").get("/animals").text
    assert label_in_languages(admin, 1, "Dogs", de="").status_code == 303
    assert "Dogs · 1" in reading(portal_app.test_client(), "de").get("/animals").text
    # Each change an entry, naming the label again (not "renamed from Dogs to Dogs").
    labelled = {"code": "category_labelled", "category": 1, "label": "Dogs"}
    assert [details for action, _, details in audit_actions(portal_app) if action == "category_labelled"] == [
        labelled
    ] * 3


def test_labels_are_renamed_and_removed_with_an_audit_entry_each(portal_app, auth_for):
    admin = auth_for(portal_app, "admin")
    label(admin, 1, "Dogs")
    label(admin, 1, "Hounds")
    page = admin.get("/admin/categories").text
    response = admin.post(
        "/admin/categories/1/remove", data={"csrf_token": csrf_token(page), "environment": "production"}
    )
    assert response.status_code == 303
    assert "Hounds" not in portal_app.test_client().get("/animals").text
    assert [action for action in audit_actions(portal_app) if action[0].startswith("category")] == [
        ("category_labelled", "production", {"code": "category_labelled", "category": 1, "label": "Dogs"}),
        (
            "category_labelled",
            "production",
            {"code": "category_renamed", "category": 1, "previous": "Dogs", "label": "Hounds"},
        ),
        ("category_unlabelled", "production", {"code": "category_unlabelled", "category": 1, "label": "Hounds"}),
    ]


def test_a_hostile_label_is_escaped_everywhere_it_is_shown(portal_app, auth_for, production_store):
    admin = auth_for(portal_app, "admin")
    assert label(admin, 1, HOSTILE).status_code == 303
    rex = production_store.animals()[0]
    pages = [
        portal_app.test_client().get("/animals").text,
        portal_app.test_client().get(f"/animals/{rex['id']}").text,
        auth_for(portal_app, "staff").get("/animals/new").text,
        admin.get("/admin/categories").text,
        admin.get("/admin/audit").text,
    ]
    for page in pages:
        assert "<script>alert" not in page and "<b>bold</b>" not in page
        assert "&lt;script&gt;alert" in page


def test_each_environment_keeps_its_own_labels(portal_app, auth_for):
    admin = auth_for(portal_app, "admin")
    label(admin, 1, "Dogs")
    post_form(admin, "/admin/environment", "/admin/environment/preview", environment="staging")
    assert '<td class="text-free" data-label="Label">Dogs</td>' not in admin.get("/admin/categories").text
    label(admin, 1, "Lizards")
    assert "Lizards · 1" not in portal_app.test_client().get("/animals").text
    assert "Dogs · 1" in portal_app.test_client().get("/animals").text
    with portal_app.app_context():
        rows = db.session.scalars(db.select(CategoryLabel).order_by(CategoryLabel.environment)).all()
        assert [(row.environment, row.category_id, row.label) for row in rows] == [
            ("production", 1, "Dogs"),
            ("staging", 1, "Lizards"),
        ]


@pytest.mark.parametrize(
    "category_id, text, error",
    [
        ("1", "", "Enter the label."),
        ("1", "x" * 61, "Keep the label to 60 characters or fewer."),
        ("1", "Dogs\x00", "must not contain control characters"),
        ("one", "Dogs", "The category id must be a whole number from 0 up."),
        ("-5", "Dogs", "The category id must be a whole number from 0 up."),
        ("\u0661", "Dogs", "The category id must be a whole number from 0 up."),
        (str(2**63), "Dogs", "This category id is too large for the pet store."),
    ],
)
def test_a_bad_label_gets_a_400_with_the_reason_and_nothing_is_stored(portal_app, auth_for, category_id, text, error):
    admin = auth_for(portal_app, "admin")
    response = label(admin, category_id, text)
    assert response.status_code == 400
    assert error in response.text
    with portal_app.app_context():
        assert db.session.scalars(db.select(CategoryLabel)).all() == []


def test_a_label_change_is_refused_when_the_admin_is_served_another_environment_by_then(portal_app, auth_for):
    """The page names the environment it shows; a preview changed in another tab changes nothing."""
    admin = auth_for(portal_app, "admin")
    label(admin, 1, "Hounds")
    post_form(admin, "/admin/environment", "/admin/environment/preview", environment="staging")
    opened_for_staging = admin.get("/admin/categories").text
    post_form(admin, "/admin/environment", "/admin/environment/preview", environment="")  # another tab
    fields = {"csrf_token": csrf_token(opened_for_staging), "environment": shown_environment(opened_for_staging)}
    renamed = admin.post("/admin/categories", data={**fields, "category_id": "1", "label": "meant-for-staging"})
    removed = admin.post("/admin/categories/1/remove", data=fields)
    for response in (renamed, removed):
        assert response.status_code == 409
        assert "This page was opened for staging, but you are now served production. Nothing was changed." in (
            response.text
        )
    with portal_app.app_context():
        rows = db.session.scalars(db.select(CategoryLabel)).all()
        assert [(row.environment, row.category_id, row.label) for row in rows] == [("production", 1, "Hounds")]


@pytest.mark.parametrize("category_id", [0, 2**63 - 1])
def test_any_category_id_label_can_be_removed(portal_app, auth_for, category_id):
    admin = auth_for(portal_app, "admin")
    assert label(admin, category_id, "Edge").status_code == 303
    page = admin.get("/admin/categories").text
    fields = {"csrf_token": csrf_token(page), "environment": "production"}
    assert admin.post(f"/admin/categories/{category_id}/remove", data=fields).status_code == 303
    with portal_app.app_context():
        assert db.session.scalars(db.select(CategoryLabel)).all() == []


@pytest.mark.parametrize("category_id", [str(2**63), "9" * 30, str(-(2**63) - 1)])
def test_removing_an_id_beyond_int64_is_a_404(portal_app, auth_for, category_id):
    admin = auth_for(portal_app, "admin")
    fields = {"csrf_token": csrf_token(admin.get("/admin/categories").text), "environment": "production"}
    assert admin.post(f"/admin/categories/{category_id}/remove", data=fields).status_code == 404


@pytest.mark.parametrize("text", ["\u200b", "\u202eevil", "Dogs\u2066"])
def test_a_label_must_be_visible_and_keep_its_direction(portal_app, auth_for, text):
    response = label(auth_for(portal_app, "admin"), 1, text)
    assert response.status_code == 400


def test_two_categories_cannot_read_the_same(portal_app, auth_for):
    admin = auth_for(portal_app, "admin")
    label(admin, 1, "Dogs")
    taken = label(admin, 2, "DOGS")
    assert taken.status_code == 400
    assert "“Dogs” already names category 1 in production." in taken.text
    assert label(admin, 1, "dogs").status_code == 303  # renaming a category to itself in other capitals is fine


def test_only_admins_name_categories(portal_app, auth_for):
    assert portal_app.test_client().get("/admin/categories").status_code == 302
    staff = auth_for(portal_app, "staff")
    assert staff.get("/admin/categories").status_code == 403
    assert label(staff, 1, "Dogs").status_code == 403


def test_the_add_form_still_accepts_an_unlabelled_id(portal_app, auth_for, production_store):
    label(auth_for(portal_app, "admin"), 1, "Dogs")
    response = add_animal(auth_for(portal_app, "staff"), "Odd", category_id="987654321")
    assert response.status_code == 303
    assert production_store.animals()[-1]["categoryId"] == 987654321


def test_a_label_change_reaches_cached_pages_at_once(make_portal, auth_for, production_store):
    app = make_portal(CACHE_SECONDS=30)
    anyone = app.test_client()
    assert "Dogs · 1" not in anyone.get("/animals").text
    label(auth_for(app, "admin"), 1, "Dogs")
    assert "Dogs · 1" in anyone.get("/animals").text
    assert len(list_calls(production_store)) == 2


# --- search and sort -------------------------------------------------------------------------------


def test_search_keeps_the_names_that_contain_the_text_and_says_what_it_searched(client, production_store):
    page = client.get("/animals?q=IT")
    assert page.status_code == 200
    assert names_on(page.text) == ["Mittens"]
    assert "1 of the 4 animals fetched matches “IT”." in page.text
    assert list_calls(production_store) == ["/v1/pets?limit=20"]  # searched here, not upstream
    assert 'name="q" type="search" value="IT"' in page.text


def test_search_is_unicode_aware(client, production_store):
    production_store.add("Zoë", 5)  # composed: "ë" is one code point
    production_store.add(unicodedata.normalize("NFD", "Chloë"), 5)  # decomposed: "e" and a combining mark
    assert names_on(client.get("/animals?q=zoë").text) == ["Zoë"]
    assert names_on(client.get("/animals?q=ZOË").text) == ["Zoë"]
    assert names_on(client.get("/animals?q=" + unicodedata.normalize("NFD", "zoë")).text) == ["Zoë"]
    assert len(names_on(client.get("/animals?q=loë").text)) == 1
    production_store.add("Straße", 5)
    assert names_on(client.get("/animals?q=STRASSE").text) == ["Straße"]
    # Accents are ignored both ways: "zoe" finds Zoë, "chloé" finds Chloë.
    assert names_on(client.get("/animals?q=zoe").text) == ["Zoë"]
    assert len(names_on(client.get("/animals?q=chloé").text)) == 1
    assert 'data-folded="strasse"' in client.get("/animals?q=strasse").text  # what search.js compares with


def test_markup_in_the_search_is_shown_as_text(client, production_store):
    production_store.add("<b>Bold</b> Bo", 5)
    page = client.get("/animals", query_string={"q": "<b>"}).text
    assert "<b>" not in page.split("<main", 1)[1]
    assert "matches “&lt;b&gt;”" in page
    assert names_on(page) == ["<b>Bold</b> Bo"]


def test_no_match_says_so_and_offers_the_whole_list(client):
    page = client.get("/animals?q=nobody").text
    assert "0 of the 4 animals fetched match “nobody”." in page
    assert "No animals here whose name contains “nobody”." in page


@pytest.mark.parametrize(
    "sort, expected",
    [
        ("id", ["Rex", "Mittens", "Goldie", "Nibbles", "alf", "Alf", "Bert"]),
        ("name", ["alf", "Alf", "Bert", "Goldie", "Mittens", "Nibbles", "Rex"]),
        ("category", ["Rex", "alf", "Alf", "Bert", "Mittens", "Goldie", "Nibbles"]),
        ("status", ["Rex", "alf", "Bert", "Mittens", "Goldie", "Nibbles", "Alf"]),
        # Reversed: ties still in id order, and an animal without a status still last.
        ("-id", ["Bert", "Alf", "alf", "Nibbles", "Goldie", "Mittens", "Rex"]),
        ("-name", ["Rex", "Nibbles", "Mittens", "Goldie", "Bert", "alf", "Alf"]),
        ("-category", ["Nibbles", "Goldie", "Mittens", "Rex", "alf", "Alf", "Bert"]),
        ("-status", ["Goldie", "Mittens", "Rex", "alf", "Bert", "Nibbles", "Alf"]),
    ],
)
def test_each_sort_is_stable_case_insensitive_and_puts_a_missing_status_last(client, production_store, sort, expected):
    # Ties everywhere: "alf" and "Alf" differ only in case, three animals share category 1.
    production_store.add("alf", 1, "available")
    production_store.add("Alf", 1)
    production_store.add("Bert", 1, "available")
    page = client.get(f"/animals?sort={sort}")
    assert page.status_code == 200
    assert names_on(page.text) == expected
    # The sorted column's heading says which way (aria-sort), and only it.
    column = {"id": "Id", "name": "Name", "category": "Category", "status": "Status"}[sort.removeprefix("-")]
    direction = "descending" if sort.startswith("-") else "ascending"
    assert re.findall(r'<th scope="col" aria-sort="(\w+)"><span class="sort-name">(\w+)<', page.text) == [
        (direction, column)
    ]


def test_by_category_labelled_categories_come_first_in_label_order(portal_app, auth_for, production_store):
    admin = auth_for(portal_app, "admin")
    label(admin, 3, "cats")  # Goldie
    label(admin, 2, "Birds")  # Mittens
    page = portal_app.test_client().get("/animals?sort=category").text
    assert names_on(page) == ["Mittens", "Goldie", "Rex", "Nibbles"]


def test_search_and_sort_together_and_the_default_sort(client, production_store):
    production_store.add("Rexa", 9, "sold")
    assert names_on(client.get("/animals?q=rex&sort=status").text) == ["Rex", "Rexa"]
    assert names_on(client.get("/animals?q=&sort=").text)[0] == "Rex"  # empty values are the defaults


@pytest.mark.parametrize(
    "query, error",
    [
        ("sort=price", "Sort by id, name, category or status"),
        ("sort=name%00", "Sort by id, name, category or status"),
        ("sort=-", "Sort by id, name, category or status"),
        ("sort=+name", "Sort by id, name, category or status"),
        ("sort=NAME", "Sort by id, name, category or status"),
        ("q=" + "x" * 101, "Search with at most 100 characters."),
        ("q=a%00b", "must not contain control characters"),
    ],
)
def test_a_bad_search_or_sort_is_a_400_and_nothing_is_sent_upstream(client, production_store, query, error):
    page = client.get(f"/animals?{query}")
    assert page.status_code == 400
    assert error in page.text
    assert list_calls(production_store) == []


def test_the_detail_page_leads_back_to_the_list_as_it_was_searched_and_sorted(client, production_store):
    page = client.get("/animals?q=i&sort=name&limit=10").text
    link = re.search(r'href="(/animals/\d+\?[^"]+)"', page).group(1)
    assert html.unescape(link).endswith("?limit=10&q=i&sort=name")
    detail = client.get(html.unescape(link)).text
    assert 'href="/animals?limit=10&amp;q=i&amp;sort=name"' in detail


def test_the_larger_limit_keeps_the_search_and_sort(client):
    page = client.get("/animals?limit=2&q=e&sort=name").text
    assert "and more matches among them" in page
    assert 'href="/animals?limit=4&amp;q=e&amp;sort=name"' in page


def test_the_cache_keeps_each_search_and_sort_apart(make_portal, production_store):
    app = make_portal(CACHE_SECONDS=30)
    anyone = app.test_client()
    queries = ("q=rex", "q=mit", "sort=name", "sort=-name", "q=rex", "sort=-name&q=")
    pages = {query: anyone.get(f"/animals?{query}").text for query in queries}
    assert names_on(pages["q=rex"]) == ["Rex"]
    assert names_on(pages["q=mit"]) == ["Mittens"]
    assert names_on(pages["sort=name"])[0] == "Goldie"
    assert names_on(pages["sort=-name"])[0] == "Rex"
    assert names_on(pages["sort=-name&q="])[0] == "Rex"
    assert len(list_calls(production_store)) == 4  # the second "q=rex" and "-name" came from the cache


# --- your additions --------------------------------------------------------------------------------


def test_staff_see_their_own_additions_newest_first_with_a_link_each(portal_app, auth_for, production_store):
    staff = auth_for(portal_app, "staff")
    first = add_animal(staff, "Biscuit")
    shown = staff.get(first.headers["Location"]).text
    new_id = first.headers["Location"].rsplit("/", 1)[1]
    assert f'<a class="alert-link ms-2" href="/animals/{new_id}">Biscuit, id {new_id}</a>' in shown
    assert '<a class="alert-link ms-2" href="/animals/mine">Your additions</a>' in shown
    add_animal(staff, HOSTILE)
    page = staff.get("/animals/mine").text
    assert names_on(page) == [HOSTILE, "Biscuit"]
    assert f'href="/animals/{new_id}"' in page
    assert "<script>alert" not in page
    assert "You have added no animals to staging." in page
    assert names_on(auth_for(portal_app, "admin").get("/animals/mine").text) == []
    assert portal_app.test_client().get("/animals/mine").status_code == 302


def test_two_admins_labelling_two_categories_alike_at_once_leave_one_label(make_portal, database_url, auth_for):
    app = make_portal(SQLALCHEMY_DATABASE_URI=database_url)
    admins = [auth_for(app, "admin") for _ in range(4)]
    tokens = [csrf_token(admin.get("/admin/categories").text) for admin in admins]

    def label_at_once(client, token, category_id, start):
        start.wait()
        fields = {"csrf_token": token, "environment": "production", "category_id": category_id, "label": "Racers"}
        return client.post("/admin/categories", data=fields)

    answers = at_once(
        [(admin, token, str(900 + n)) for n, (admin, token) in enumerate(zip(admins, tokens, strict=True))],
        label_at_once,
    )
    statuses = sorted(answer.status_code for answer in answers)
    assert statuses.count(303) == 1 and set(statuses) <= {303, 400, 409}, statuses
    with app.app_context():
        assert [row.category_id for row in db.session.scalars(db.select(CategoryLabel))] in ([900], [901], [902], [903])
        assert len(db.session.scalars(db.select(AuditEntry).filter_by(action="category_labelled")).all()) == 1


def test_a_search_cut_at_the_limit_offers_the_same_search_over_100_in_one_click(client, production_store):
    for number in range(20):
        production_store.add(f"Tom {number}" if number in (3, 17) else f"Cat {number}", 2, "available")
    page = client.get("/animals?q=tom&limit=5").text
    [further] = re.findall(r'<a class="search-further" href="([^"]+)">Search up to 100 animals</a>', page)
    further = html.unescape(further)
    assert "q=tom" in further and "limit=100" in further
    assert sorted(names_on(client.get(further).text)) == ["Tom 17", "Tom 3"]
    # Everything fetched (fewer than the limit came back): nothing further to search.
    assert "search-further" not in client.get("/animals?q=tom&limit=100").text
