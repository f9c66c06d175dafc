"""Hostile input never breaks the portal: no 5xx page and no unescaped reflection, whatever is typed."""

import io
import re

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from support.helpers import submission_token
from support.portal import csrf_token
from support.scanning import FIGURES

NASTY = [
    "",
    "\x00",
    "Rex\x00Rex",
    "\u202egnp.exe",
    "\u200f\u05e9\u05dc\u05d5\u05dd",
    "<script>alert(1)</script>",
    '"><img src=x onerror=alert(1)>',
    "' OR 1=1 --",
    "x" * 100_000,
    "\U0001f436" * 50,
    "\u0663",
    "-1",
    "0",
    "101",
    str(2**63),
    str(-(2**63) - 1),
    str(10**400),
    "1e308",
    "NaN",
    " 7 ",
]
PROBES = ("<script>alert(1)</script>", '"><img src=x onerror=alert(1)>')
hostile = st.one_of(st.sampled_from(NASTY), st.text(max_size=300), st.integers().map(str))
# As many examples as the tests' profile gives (conftest.py).
settings_for_forms = settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


MARKUP = re.compile(r"<[A-Za-z!/?]")


def assert_safe(page, *values, neutral=""):
    """No 5xx, and no markup-like input reflected raw.

    Input whose markup already stands in a neutral rendering of the same pages (say "<a") cannot be
    told apart from the page's own, so only the rest is checked; the explicit probes always are.
    """
    FIGURES["hostile_inputs"] += len(values)
    assert page.status_code < 500, page.status_code
    for value in values:
        if MARKUP.search(value) and value not in neutral:
            assert value not in page.text, f"input reflected without escaping: {value!r}"


@settings_for_forms
@given(status=hostile, limit=hostile, q=hostile, sort=hostile)
@example(status=PROBES[0], limit=PROBES[0], q=PROBES[0], sort=PROBES[0])
@example(status=PROBES[1], limit=PROBES[1], q=PROBES[1], sort=PROBES[1])
@example(status="", limit="", q=PROBES[0], sort="name")
def test_the_filter_survives_anything(client, status, limit, q, sort):
    page = client.get("/animals", query_string={"status": status, "limit": limit, "q": q, "sort": sort})
    assert_safe(page, status, limit, q, sort, neutral=client.get("/animals?limit=0").text)
    assert page.status_code in (200, 400)


@settings_for_forms
@given(name=hostile, category_id=hostile, status=hostile)
@example(name=PROBES[0], category_id=PROBES[0], status=PROBES[0])
@example(name=PROBES[1], category_id=PROBES[1], status=PROBES[1])
def test_the_add_form_survives_anything(client, auth, name, category_id, status):
    if not client.get_cookie("session"):
        auth.login("staff")
    form = client.get("/animals/new").text
    data = {
        "csrf_token": csrf_token(form),
        "submission_token": submission_token(form),
        "name": name,
        "category_id": category_id,
        "status": status,
    }
    page = client.post("/animals/new", data=data)
    assert_safe(page, name, category_id, status, neutral=form + client.get("/animals/1").text)
    assert page.status_code in (303, 400)


@settings_for_forms
@given(username=hostile, password=hostile, target=hostile)
@example(username=PROBES[0], password=PROBES[0], target=PROBES[0])
@example(username=PROBES[1], password=PROBES[1], target=PROBES[1])
def test_the_login_form_survives_anything(client, username, password, target):
    token = csrf_token(client.get("/login").text)
    page = client.post(
        "/login", data={"username": username, "password": password, "csrf_token": token}, query_string={"next": target}
    )
    assert_safe(page, username, target, neutral=client.get("/login").text)
    assert page.status_code in (400, 401, 429)


@settings_for_forms
@given(category_id=hostile, label=hostile)
@example(category_id="1", label=PROBES[0])
@example(category_id=PROBES[1], label=PROBES[1])
def test_the_category_form_survives_anything(client, auth, category_id, label):
    if not client.get_cookie("session"):
        auth.login("admin")
    neutral = client.get("/admin/categories").text  # before this label is stored
    token = csrf_token(neutral)
    fields = {"csrf_token": token, "environment": "production", "category_id": category_id, "label": label}
    page = client.post("/admin/categories", data=fields)
    shown = client.get("/animals")
    assert_safe(page, category_id, label, neutral=neutral)
    assert_safe(shown, label, neutral=neutral)
    assert page.status_code in (303, 400)


@settings_for_forms
@given(environment=hostile, confirm=hostile, previewed=hostile)
@example(environment=PROBES[0], confirm=PROBES[0], previewed=PROBES[0])
@example(environment=PROBES[1], confirm=PROBES[1], previewed=PROBES[1])
def test_the_admin_forms_survive_anything(client, auth, environment, confirm, previewed):
    if not client.get_cookie("session"):
        auth.login("admin")
    token = csrf_token(client.get("/admin/environment").text)
    switched = client.post(
        "/admin/environment", data={"csrf_token": token, "environment": environment, "confirm": confirm}
    )
    previewed_page = client.post("/admin/environment/preview", data={"csrf_token": token, "environment": previewed})
    neutral = client.get("/admin/environment").text
    assert_safe(switched, environment, confirm, neutral=neutral)
    assert_safe(previewed_page, previewed, neutral=neutral)
    assert switched.status_code in (303, 400) and previewed_page.status_code in (303, 400)


@settings_for_forms
@given(page_number=hostile, status=hostile, limit=hostile, pet_id=hostile)
@example(page_number=PROBES[0], status=PROBES[0], limit=PROBES[0], pet_id=PROBES[0])
@example(page_number=PROBES[1], status=PROBES[1], limit=PROBES[1], pet_id=PROBES[1])
def test_every_query_parameter_survives_anything(client, auth, page_number, status, limit, pet_id):
    if not client.get_cookie("session"):
        auth.login("admin")
    audit = client.get("/admin/audit", query_string={"page": page_number})
    detail = client.get("/animals/1", query_string={"status": status, "limit": limit})
    path = client.get(f"/animals/{pet_id}")
    neutral = client.get("/admin/audit").text + client.get("/animals/1").text
    assert_safe(audit, page_number, neutral=neutral)
    assert_safe(detail, status, limit, neutral=neutral)
    FIGURES["hostile_inputs"] += 1
    assert path.status_code == (400 if "\x00" in pet_id else 404) or path.status_code == 200  # a NUL: unreadable
    assert audit.status_code == 200 and detail.status_code == 200


# --- a file where a text field belongs -----------------------------------------------------------------------------


@pytest.mark.parametrize("field", ["username", "password"])
def test_a_text_field_sent_as_a_file_is_an_error_on_the_form_not_a_500(client, field):
    form = csrf_token(client.get("/login").text)
    data = {"username": "staff", "password": "x", "csrf_token": form, field: (io.BytesIO(b"staff"), "name.txt")}
    response = client.post("/login", data=data, content_type="multipart/form-data")
    assert response.status_code == 400


def test_a_nul_character_in_a_login_a_filter_or_an_account_path_is_a_400_on_every_database(
    make_portal, auth_for, database_url
):
    """PostgreSQL keeps no NUL in a text column: a name, a filter or a path holding one was a 500 there, even before
    logging in. It is refused before any query, with words."""
    app = make_portal(SQLALCHEMY_DATABASE_URI=database_url)
    anyone = app.test_client()
    token = csrf_token(anyone.get("/login").text)
    login = anyone.post("/login", data={"csrf_token": token, "username": "ad\x00min", "password": "x"})
    assert login.status_code == 400 and "NUL character" in login.text
    admin = auth_for(app, "admin")
    for path in ("/admin/audit?actor=%00", "/admin/audit.csv?actor=a%00", "/admin/users/a%00b"):
        page = admin.get(path)
        assert page.status_code == 400 and "NUL character" in page.text, path
    token = csrf_token(admin.get("/admin/users").text)
    assert admin.post("/admin/users/a%00b/disable", data={"csrf_token": token}).status_code == 400
