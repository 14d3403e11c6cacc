"""The OpenAPI 3.1 document, generated from the same pydantic models that validate requests and
shape responses. `OPERATIONS` is checked against the indexed app by a unit test, so routes
cannot drift either."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from application.commands import (
    ContactPage,
    ContactView,
    CreateContact,
    PatchContact,
    UpdateCompany,
    UpdateDescription,
    UpdateEmail,
    UpdateName,
)
from entrypoints.problems import Problem


@dataclass(frozen=True)
class Operation:
    function: str
    method: str
    route: str
    summary: str
    status: int
    request: type[BaseModel] | None = None
    response: type[BaseModel] | None = None
    anonymous: bool = False
    conditional: bool = False
    errors: tuple[int, ...] = (400, 404, 412, 429, 503)


_WRITE_ERRORS = (400, 404, 412, 413, 415, 429, 503)

OPERATIONS: tuple[Operation, ...] = (
    Operation("create_contact", "POST", "contacts", "Create a contact (raises ContactCreated)",
              201, CreateContact, ContactView, errors=(400, 413, 415, 429, 503)),
    Operation("list_contacts", "GET", "contacts", "List contacts, one page at a time", 200,
              None, ContactPage, errors=(400, 429, 503)),
    Operation("get_contact", "GET", "contacts/{id}", "Read a contact", 200, None, ContactView,
              errors=(400, 404, 429, 503)),
    Operation("patch_contact", "PATCH", "contacts/{id}",
              "Change any of name, email, description, company (one event per changed aspect)",
              200, PatchContact, ContactView, conditional=True, errors=_WRITE_ERRORS),
    Operation("update_contact_name", "POST", "contacts/{id}/update-name", "Change the name",
              204, UpdateName, conditional=True, errors=_WRITE_ERRORS),
    Operation("update_contact_email", "POST", "contacts/{id}/update-email", "Change the email",
              204, UpdateEmail, conditional=True, errors=_WRITE_ERRORS),
    Operation("update_contact_description", "POST", "contacts/{id}/update-description",
              "Change the description", 204, UpdateDescription, conditional=True,
              errors=_WRITE_ERRORS),
    Operation("update_contact_company", "POST", "contacts/{id}/update-company",
              "Change the company", 204, UpdateCompany, conditional=True, errors=_WRITE_ERRORS),
    Operation("delete_contact", "DELETE", "contacts/{id}", "Soft-delete a contact", 204,
              conditional=True, errors=(400, 404, 412, 429, 503)),
    Operation("health", "GET", "health", "Health: checks the store", 200, anonymous=True,
              errors=(503,)),
    Operation("openapi", "GET", "openapi.json", "This document", 200, anonymous=True, errors=()),
)

_STATUS_TEXT = {
    200: "OK", 201: "Created", 204: "No Content", 304: "Not Modified", 400: "Bad Request",
    404: "Not Found", 409: "Conflict", 412: "Precondition Failed", 413: "Content Too Large",
    415: "Unsupported Media Type", 429: "Too Many Requests", 503: "Service Unavailable",
}


def _ref(model: type[BaseModel]) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{model.__name__}"}


def _operation(op: Operation) -> dict[str, Any]:
    params: list[dict[str, Any]] = []
    if "{id}" in op.route:
        params.append({"name": "id", "in": "path", "required": True,
                       "schema": {"type": "string", "maxLength": 128}})
    if op.function == "list_contacts":
        params += [
            {"name": "pageSize", "in": "query",
             "schema": {"type": "integer", "minimum": 1, "maximum": 100, "default": 10}},
            {"name": "continuationToken", "in": "query", "schema": {"type": "string"}},
            {"name": "x-continuation-token", "in": "header", "schema": {"type": "string"}},
        ]
    if op.conditional:
        params += [
            {"name": "If-Match", "in": "header", "schema": {"type": "string"},
             "description": "ETag of the version you read; a stale one gives 412"},
            {"name": "ETag", "in": "header", "schema": {"type": "string"},
             "description": "Same as If-Match, for clients of the reference sample"},
        ]
    if op.function == "get_contact":
        params.append({"name": "If-None-Match", "in": "header", "schema": {"type": "string"}})
    success: dict[str, Any] = {"description": _STATUS_TEXT.get(op.status, "OK")}
    if op.response is not None:
        success["content"] = {"application/json": {"schema": _ref(op.response)}}
    if op.status != 200 or op.function in ("get_contact", "patch_contact"):
        success["headers"] = {"ETag": {"schema": {"type": "string"}}}
    responses: dict[str, Any] = {str(op.status): success}
    if op.function == "get_contact":
        responses["304"] = {"description": "Not Modified"}
    for status in op.errors:
        responses[str(status)] = {
            "description": _STATUS_TEXT[status],
            "content": {"application/problem+json": {"schema": _ref(Problem)}},
        }
    result: dict[str, Any] = {"operationId": op.function, "summary": op.summary,
                              "responses": responses}
    if params:
        result["parameters"] = params
    if op.request is not None:
        result["requestBody"] = {"required": True,
                                 "content": {"application/json": {"schema": _ref(op.request)}}}
    result["security"] = [] if op.anonymous else [{"functionKey": []}]
    return result


@cache
def openapi_document() -> dict[str, Any]:
    requests = {op.request for op in OPERATIONS if op.request is not None}
    responses = {op.response for op in OPERATIONS if op.response is not None} | {Problem}
    entries: list[tuple[type[BaseModel], Any]] = [(m, "validation") for m in requests]
    entries += [(m, "serialization") for m in responses - requests]
    _, schemas = models_json_schema(
        sorted(entries, key=lambda e: e[0].__name__),
        by_alias=True,
        ref_template="#/components/schemas/{model}",
    )
    paths: dict[str, dict[str, Any]] = {}
    for op in OPERATIONS:
        paths.setdefault(f"/{op.route}", {})[op.method.lower()] = _operation(op)
    return {
        "openapi": "3.1.0",
        "info": {"title": "Contacts outbox API", "version": "1.0.0",
                 "description": "Contacts saved with their domain events in one Cosmos DB "
                                "transactional batch; events relayed to Service Bus."},
        "servers": [{"url": "/api"}],
        "paths": paths,
        "components": {
            "schemas": schemas.get("$defs", {}),
            "securitySchemes": {
                "functionKey": {"type": "apiKey", "in": "header", "name": "x-functions-key"}
            },
        },
    }
