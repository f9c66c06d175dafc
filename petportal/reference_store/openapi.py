"""The reference store's own OpenAPI 3 description, which also drives its request validation."""

from collections.abc import Mapping
from typing import Any

INT64 = {"type": "integer", "format": "int64", "minimum": -(2**63), "maximum": 2**63 - 1}
PET_STATUSES = ("available", "pending", "sold")
NAME_MAX_LENGTH = 200
# A name holds at least one visible character and no NUL (which PostgreSQL text cannot store).
NAME_PATTERN = r"^[^\u0000]*[^\s\u0000][^\u0000]*$"
SUNSET = "Thu, 05 Dec 2030 00:00:00 GMT"


def _ref(schema: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{schema}"}


def _json(schema: object) -> dict[str, dict[str, object]]:
    return {"application/json": {"schema": schema}}


_PET = _json(_ref("Pet"))
_STATUS_REF = _ref("PetStatus")
_DEPRECATION_HEADERS = {
    "Deprecation": {"description": "When getPet was deprecated (RFC 9745).", "schema": {"type": "string"}},
    "Sunset": {"description": "When getPet will be removed (RFC 8594).", "schema": {"type": "string"}},
}


def _error(description: str, headers: Mapping[str, Any] | None = None) -> dict[str, Any]:
    return {"description": description, "content": _json(_ref("Error"))} | ({"headers": headers} if headers else {})


SCHEMAS: dict[str, dict[str, Any]] = {
    "PetStatus": {"type": "string", "enum": list(PET_STATUSES)},
    "NewPet": {
        "type": "object",
        "required": ["name", "categoryId"],
        "additionalProperties": False,
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": NAME_MAX_LENGTH, "pattern": NAME_PATTERN},
            "categoryId": INT64,
            "status": _STATUS_REF,
        },
    },
    "Pet": {
        "type": "object",
        "required": ["id", "name", "categoryId"],
        "additionalProperties": False,
        "properties": {
            "id": INT64,
            "name": {"type": "string"},
            "categoryId": INT64,
            "status": _STATUS_REF,
        },
    },
    "Error": {
        "type": "object",
        "required": ["code", "message", "status"],
        "properties": {"code": {"type": "string"}, "message": {"type": "string"}, "status": {"type": "integer"}},
    },
}


def describe(server_url: str) -> dict[str, Any]:
    """Return the OpenAPI document, with `server_url` as its one server."""
    return {
        "openapi": "3.0.3",
        "info": {"title": "Pet Store (reference implementation)", "version": "1.0.0"},
        "servers": [{"url": server_url}],
        "security": [{"bearerAuth": []}],
        "paths": {
            "/pets": {
                "get": {
                    "operationId": "listPets",
                    "summary": "List animals, optionally filtered by status, in order of id.",
                    "x-stability": "stable",
                    "parameters": [
                        {
                            "name": "limit",
                            "in": "query",
                            "required": False,
                            "schema": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20},
                        },
                        {"name": "status", "in": "query", "required": False, "schema": _STATUS_REF},
                    ],
                    "responses": {
                        "200": {
                            "description": "The animals.",
                            "content": _json({"type": "array", "items": _ref("Pet")}),
                        },
                        "400": _error("A query parameter is outside the interface."),
                        "401": _error("The API key is missing or invalid."),
                    },
                },
                "post": {
                    "operationId": "createPet",
                    "summary": "Add an animal.",
                    "x-stability": "stable",
                    "requestBody": {"required": True, "content": _json(_ref("NewPet"))},
                    "responses": {
                        "201": {
                            "description": "The stored animal.",
                            "content": _PET,
                            "links": {
                                "GetPetById": {"operationId": "getPet", "parameters": {"petId": "$response.body#/id"}}
                            },
                        },
                        "400": _error("The body is malformed, misses a required field or has an invalid value."),
                        "401": _error("The API key is missing or invalid."),
                        "413": _error("The body is larger than the store accepts."),
                    },
                },
            },
            "/pets/{petId}": {
                "get": {
                    "operationId": "getPet",
                    "summary": "Fetch one animal by id. Deprecated: use listPets.",
                    "deprecated": True,
                    "x-stability": "stable",
                    "parameters": [{"name": "petId", "in": "path", "required": True, "schema": INT64}],
                    "responses": {
                        "200": {"description": "The animal.", "headers": _DEPRECATION_HEADERS, "content": _PET},
                        "400": _error("The id is not an int64.", _DEPRECATION_HEADERS),
                        "401": _error("The API key is missing or invalid.", _DEPRECATION_HEADERS),
                        "404": _error("No animal has this id.", _DEPRECATION_HEADERS),
                    },
                }
            },
        },
        "components": {
            "securitySchemes": {"bearerAuth": {"type": "http", "scheme": "bearer"}},
            "schemas": SCHEMAS,
        },
    }
