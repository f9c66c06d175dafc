"""The reference store conforms to the Pet Store v1 interface."""

import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from openapi_spec_validator import validate

from petportal.reference_store import SAMPLE_ANIMALS
from petportal.reference_store import create_app as create_store
from petportal.reference_store.models import db
from petportal.running.processes import stop, wait_for_port

from support.helpers import STORE_KEY
from support.servers import free_port, serve

AUTH = {"Authorization": f"Bearer {STORE_KEY}"}


@pytest.fixture
def api(store_app):
    """A test client that sends the store's key."""
    client = store_app.test_client()
    client.environ_base["HTTP_AUTHORIZATION"] = AUTH["Authorization"]
    return client


def add(api, **fields):
    payload = {"name": "Rex", "categoryId": 1, **fields}
    response = api.post("/v1/pets", json=payload)
    assert response.status_code == 201, response.json
    return response.json


def assert_error(response, status):
    assert response.status_code == status
    assert response.mimetype == "application/json"
    record = response.json
    assert set(record) == {"code", "message", "status"}
    assert record["status"] == status
    assert record["code"] and record["message"]


def test_create_returns_the_stored_record_with_a_new_id(api):
    first = add(api, name="Rex", categoryId=7, status="pending")
    second = add(api, name="Mia", categoryId=8)
    assert first == {"id": first["id"], "name": "Rex", "categoryId": 7, "status": "pending"}
    assert second["id"] != first["id"]
    assert api.get(f"/v1/pets/{first['id']}").json == first


def test_created_without_status_has_no_status_field_anywhere(api):
    created = add(api)
    assert "status" not in created
    assert "status" not in api.get(f"/v1/pets/{created['id']}").json
    assert "status" not in api.get("/v1/pets").json[0]


def test_list_is_ordered_by_id_defaults_to_20_and_filters_by_status(api):
    statuses = ["available", "pending", "sold", None] * 7
    for number, status in enumerate(statuses):
        add(api, name=f"Pet {number}", **({"status": status} if status else {}))
    listed = api.get("/v1/pets").json
    assert len(listed) == 20
    assert [pet["id"] for pet in listed] == sorted(pet["id"] for pet in listed)
    assert len(api.get("/v1/pets?limit=100").json) == 28
    sold = api.get("/v1/pets?status=sold&limit=100").json
    assert len(sold) == 7 and {pet["status"] for pet in sold} == {"sold"}
    assert len(api.get("/v1/pets?status=sold&limit=3").json) == 3


def test_int64_extremes_survive_a_round_trip(api):
    for category in (2**63 - 1, -(2**63), 2**53 + 1):
        created = add(api, categoryId=category)
        assert api.get(f"/v1/pets/{created['id']}").json["categoryId"] == category


@pytest.mark.parametrize(
    "query", ["limit=0", "limit=101", "limit=abc", "limit=-1", "limit=1.5", "limit=", "status=foo", "status="]
)
def test_list_rejects_values_outside_the_interface(api, query):
    assert_error(api.get(f"/v1/pets?{query}"), 400)


@pytest.mark.parametrize(
    "payload",
    [
        {"categoryId": 1},
        {"name": "Rex"},
        {"name": "", "categoryId": 1},
        {"name": "   ", "categoryId": 1},
        {"name": "a\u0000b", "categoryId": 1},
        {"name": "x" * 201, "categoryId": 1},
        {"name": 5, "categoryId": 1},
        {"name": "Rex", "categoryId": True},
        {"name": "Rex", "categoryId": "5"},
        {"name": "Rex", "categoryId": 1.5},
        {"name": "Rex", "categoryId": 2**63},
        {"name": "Rex", "categoryId": 1, "status": "lost"},
        {"name": "Rex", "categoryId": 1, "status": None},
        {"name": "Rex", "categoryId": 1, "id": 5},
        {"name": "Rex", "categoryId": 1, "colour": "brown"},
        ["Rex", 1],
        "Rex",
    ],
)
def test_create_rejects_invalid_bodies_with_an_error_record(api, payload):
    assert_error(api.post("/v1/pets", json=payload), 400)
    assert api.get("/v1/pets").json == []


def test_create_rejects_malformed_json(api):
    response = api.post("/v1/pets", data='{"name": "Rex",', content_type="application/json")
    assert_error(response, 400)


def test_create_refuses_an_oversized_body_with_413(api):
    body = json.dumps({"name": "Rex", "categoryId": 1, "pad": "x" * 100_000})
    assert_error(api.post("/v1/pets", data=body, content_type="application/json"), 413)


def test_get_pet_answers_404_and_carries_the_deprecation_notices_on_every_answer(api):
    created = add(api)
    found = api.get(f"/v1/pets/{created['id']}")
    missing = api.get("/v1/pets/999999")
    unauthorized = api.get("/v1/pets/1", headers={"Authorization": "Bearer wrong"})
    assert found.status_code == 200
    assert_error(missing, 404)
    assert_error(unauthorized, 401)
    for response in (found, missing, unauthorized):
        assert response.headers["Sunset"] == "Thu, 05 Dec 2030 00:00:00 GMT"
        assert response.headers["Deprecation"].startswith("@")


@pytest.mark.parametrize("pet_id", ["abc", "1.5", "99999999999999999999", " 1"])
def test_get_pet_rejects_ids_that_are_not_int64(api, pet_id):
    assert_error(api.get(f"/v1/pets/{pet_id}"), 400)


@pytest.mark.parametrize("authorization", [None, "Bearer wrong", f"Basic {STORE_KEY}", "Bearer ", STORE_KEY])
@pytest.mark.parametrize("method, path", [("GET", "/v1/pets"), ("POST", "/v1/pets"), ("GET", "/v1/pets/1")])
def test_every_operation_needs_a_valid_bearer_key(store_app, authorization, method, path):
    headers = {"Authorization": authorization} if authorization else {}
    response = store_app.test_client().open(path, method=method, headers=headers, json={"name": "Rex", "categoryId": 1})
    assert_error(response, 401)


def test_every_configured_key_is_accepted(store_app):
    response = store_app.test_client().get("/v1/pets", headers={"Authorization": "Bearer second-key"})
    assert response.status_code == 200


def test_unknown_paths_and_methods_answer_with_error_records(api):
    assert_error(api.get("/v1/nothing-here"), 404)
    not_allowed = api.delete("/v1/pets")
    assert_error(not_allowed, 405)
    assert set(not_allowed.headers["Allow"].replace(" ", "").split(",")) >= {"GET", "POST"}


def test_openapi_description_is_valid_and_marks_deprecation_and_stability(store_app):
    document = store_app.test_client().get("/v1/openapi.json").json
    validate(document)
    operations = {
        operation["operationId"]: operation for path in document["paths"].values() for operation in path.values()
    }
    assert set(operations) == {"listPets", "createPet", "getPet"}
    assert operations["getPet"]["deprecated"] is True
    assert not operations["listPets"].get("deprecated")
    assert all(operation["x-stability"] for operation in operations.values())


def test_schemathesis_finds_nothing_with_all_checks(store_url, tmp_path):
    command = shutil.which("schemathesis", path=os.path.dirname(sys.executable)) or shutil.which("schemathesis")
    result = subprocess.run(
        [
            command,
            "run",
            f"{store_url}/openapi.json",
            "--checks",
            "all",
            "--max-examples",
            "30",
            "--workers",
            "1",
            "--header",
            f"Authorization: Bearer {STORE_KEY}",
            "--seed",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={**os.environ, "SCHEMATHESIS_HOOKS": "", "NO_COLOR": "1"},
        check=False,
    )
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]
    assert "No issues found" in result.stdout


def test_concurrent_creates_lose_nothing(database_url):
    app = create_store({"PETSTORE_API_KEYS": [STORE_KEY], "SQLALCHEMY_DATABASE_URI": database_url})
    with serve(app) as origin:

        def create_fifty(thread):
            with requests.Session() as session:
                session.headers.update(AUTH)
                ids = []
                for number in range(50):
                    response = session.post(
                        f"{origin}/v1/pets", json={"name": f"T{thread}-{number}", "categoryId": thread}
                    )
                    assert response.status_code == 201, response.text
                    ids.append(response.json()["id"])
                return ids

        with ThreadPoolExecutor(8) as pool:
            ids = [pet_id for batch in pool.map(create_fifty, range(8)) for pet_id in batch]
        assert len(ids) == 400 and len(set(ids)) == 400
        with requests.Session() as session:
            session.headers.update(AUTH)
            for pet_id in ids:
                assert session.get(f"{origin}/v1/pets/{pet_id}").status_code == 200
    with app.app_context():
        db.engine.dispose()


def test_seed_command_adds_a_dozen_varied_animals(store_app, api):
    result = store_app.test_cli_runner().invoke(args=["seed"])
    assert result.exit_code == 0, result.output
    animals = api.get("/v1/pets?limit=100").json
    assert len(animals) == 12
    assert {pet.get("status") for pet in animals} == {"available", "pending", "sold", None}


def test_the_staging_sample_is_other_animals(store_app, api):
    """The demo seeds staging with --sample staging: after a switch, the list itself shows the other store."""
    result = store_app.test_cli_runner().invoke(args=["seed", "--sample", "staging"])
    assert result.exit_code == 0, result.output
    staging = {pet["name"] for pet in api.get("/v1/pets?limit=100").json}
    assert staging and not staging & {name for name, _, _ in SAMPLE_ANIMALS}


def test_flask_run_command_serves_the_store_with_keys_from_the_environment(tmp_path):
    port = free_port()
    env = {
        **os.environ,
        "PETSTORE_API_KEYS": "alpha,beta",
        "PETSTORE_DATABASE_URL": f"sqlite:///{tmp_path / 'run.sqlite'}",
    }
    flask = [sys.executable, "-m", "flask", "--app", "petportal.reference_store"]
    seeded = subprocess.run(
        [*flask, "seed"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False
    )
    assert seeded.returncode == 0, seeded.stderr
    server = subprocess.Popen(
        [*flask, "run", "--port", str(port)],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, server)
        response = requests.get(f"http://127.0.0.1:{port}/v1/pets", headers={"Authorization": "Bearer beta"}, timeout=2)
        assert response.status_code == 200
        assert len(response.json()) == 12
        refused = requests.get(f"http://127.0.0.1:{port}/v1/pets", headers={"Authorization": "Bearer gamma"}, timeout=2)
        assert refused.status_code == 401
    finally:
        stop([server])
