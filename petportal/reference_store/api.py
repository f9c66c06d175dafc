"""The Pet Store v1 operations: listPets, createPet and the deprecated getPet."""

from __future__ import annotations

import hmac
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from flask import Blueprint, Response, current_app, jsonify, request, url_for
from jsonschema import Draft7Validator
from jsonschema.exceptions import best_match

from petportal.reference_store.models import Pet, db
from petportal.reference_store.openapi import PET_STATUSES, SCHEMAS, SUNSET, describe

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError
    from werkzeug.exceptions import HTTPException

URL_PREFIX = "/v1"
bp = Blueprint("api", __name__, url_prefix=URL_PREFIX)

INTEGER = re.compile(r"-?[0-9]{1,20}")
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# RFC 9745: the moment getPet was marked deprecated, as a structured-field date.
DEPRECATION = "@1733356800"
NEW_PET = Draft7Validator({**SCHEMAS["NewPet"], "components": {"schemas": SCHEMAS}})


class ApiError(Exception):
    """An error answered as an `Error` record: `ApiError(status, code, message)`."""


def error_response(status: int, code: str, message: str, headers: Mapping[str, str] | None = None) -> Response:
    response = jsonify(code=code, message=message, status=status)
    response.status_code = status
    response.headers.extend(headers or {})
    return response


@bp.errorhandler(ApiError)
def answer_api_error(error: ApiError) -> Response:
    return error_response(*error.args)


@bp.before_request
def require_api_key() -> None:
    """Refuse every operation without a configured bearer key (the description itself is public)."""
    if request.endpoint == "api.openapi":
        return
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    presented = token.strip().encode()
    # Every key compared (a list, not any()'s short cut), in constant time: timing tells nothing about them.
    accepted = any([hmac.compare_digest(presented, key.encode()) for key in current_app.config["PETSTORE_API_KEYS"]])
    if scheme.lower() != "bearer" or not presented or not accepted:
        raise ApiError(401, "unauthorized", "The API key is missing or invalid.")


@bp.after_request
def announce_deprecation(response: Response) -> Response:
    """Every answer of the deprecated getPet carries its Deprecation and Sunset notices."""
    if request.endpoint == "api.get_pet":
        response.headers["Deprecation"] = DEPRECATION
        response.headers["Sunset"] = SUNSET
        response.headers["Link"] = f'<{url_for("api.list_pets", _external=True)}>; rel="successor-version"'
    return response


def parse_int64(text: str | None, field: str) -> int:
    """The integer that `text` spells, or a 400 naming `field`."""
    if text is None or not INTEGER.fullmatch(text) or not INT64_MIN <= int(text) <= INT64_MAX:
        raise ApiError(400, "invalid_parameter", f"{field} must be a 64-bit integer.")
    return int(text)


@bp.get("/pets")
def list_pets() -> Response:
    """listPets: at most `limit` animals in order of id, optionally of one status."""
    limit = parse_int64(request.args.get("limit", "20"), "limit")
    if not 1 <= limit <= 100:
        raise ApiError(400, "invalid_parameter", "limit must be between 1 and 100.")
    query = db.select(Pet).order_by(Pet.id).limit(limit)
    if "status" in request.args:
        status = request.args["status"]
        if status not in PET_STATUSES:
            raise ApiError(400, "invalid_parameter", "status must be one of available, pending, sold.")
        query = query.where(Pet.status == status)
    return jsonify([pet.to_json() for pet in db.session.scalars(query)])


@bp.post("/pets")
def create_pet() -> tuple[dict[str, int | str], int, dict[str, str]]:
    """createPet: store a new animal and answer it with its id."""
    payload = request.get_json(force=True, silent=True, cache=False)
    if payload is None:
        raise ApiError(400, "malformed_body", "The body must be a JSON object.")
    if (problem := best_match(NEW_PET.iter_errors(payload))) is not None:
        raise ApiError(400, "invalid_body", describe_problem(problem))
    pet = Pet(name=payload["name"], category_id=payload["categoryId"], status=payload.get("status"))
    db.session.add(pet)
    db.session.commit()
    return pet.to_json(), 201, {"Location": url_for("api.get_pet", pet_id=pet.id)}


def describe_problem(error: ValidationError) -> str:
    """A short sentence for one schema violation, in terms of the NewPet fields."""
    field = ".".join(str(part) for part in error.absolute_path)
    if not field:
        return "The body must be a JSON object." if error.validator == "type" else error.message[:200]
    rule = error.validator
    if rule in ("pattern", "minLength"):
        return f"{field} must contain a visible character and no NUL character."
    if rule == "maxLength":
        return f"{field} must be at most {error.validator_value} characters long."
    if rule == "enum":
        return f"{field} must be one of {', '.join(error.validator_value)}."
    if field == "categoryId":
        return "categoryId must be a 64-bit integer."
    return f"{field} must be a {error.validator_value}."


@bp.get("/pets/<pet_id>")
def get_pet(pet_id: str) -> dict[str, int | str]:
    """getPet (deprecated): one animal by id."""
    pet = db.session.get(Pet, parse_int64(pet_id, "petId"))
    if pet is None:
        raise ApiError(404, "not_found", "No animal has this id.")
    return pet.to_json()


@bp.get("/openapi.json")
def openapi() -> dict[str, Any]:
    return describe(request.url_root + URL_PREFIX.lstrip("/"))


def unsupported_route(error: HTTPException) -> Response:
    """Unknown paths and methods, and any other HTTP error, answered as an `Error` record."""
    headers = {name: value for name, value in error.get_headers() if name != "Content-Type"}
    code = (error.name or "error").lower().replace(" ", "_")
    # Flask hands an error handler only exceptions that have a code (it returns the others as they are).
    return error_response(error.code or 500, code, error.description or error.name, headers)


def internal_error(error: Exception) -> Response:
    """A failure of the store itself, answered as an `Error` record without details."""
    current_app.logger.exception("unhandled error", exc_info=error)
    return error_response(500, "internal_error", "The store failed to answer this request.")
