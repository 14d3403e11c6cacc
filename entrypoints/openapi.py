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
from application.conditional import TAG_LIST_PATTERN
from entrypoints.http import ID_PATTERN
from entrypoints.paging import TOKEN_PATTERN
from entrypoints.problems import Problem
from entrypoints.requests import MAX_BODY_BYTES


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
    errors: tuple[int, ...] = (400, 404, 412, 429, 500, 503)


_WRITE_ERRORS = (400, 404, 412, 413, 415, 429, 500, 503)

OPERATIONS: tuple[Operation, ...] = (
    Operation("create_contact", "POST", "contacts", "Create a contact (raises ContactCreated)",
              201, CreateContact, ContactView, errors=(400, 409, 413, 415, 429, 500, 503)),
    Operation("list_contacts", "GET", "contacts", "List contacts, one page at a time", 200,
              None, ContactPage, errors=(400, 429, 500, 503)),
    Operation("get_contact", "GET", "contacts/{id}", "Read a contact", 200, None, ContactView,
              conditional=True, errors=(400, 404, 412, 429, 500, 503)),
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
              conditional=True, errors=(400, 404, 412, 429, 500, 503)),
    Operation("health", "GET", "health", "Health: checks the store (answers within 5 s)", 200,
              anonymous=True, errors=(400, 500, 503)),
    Operation("openapi", "GET", "openapi.json", "This document", 200, anonymous=True,
              errors=(400,)),
)

_STATUS_TEXT = {
    200: "OK", 201: "Created", 204: "No Content", 304: "Not Modified", 400: "Bad Request",
    404: "Not Found", 409: "Conflict", 412: "Precondition Failed", 413: "Content Too Large",
    415: "Unsupported Media Type", 429: "Too Many Requests", 500: "Internal Server Error",
    503: "Service Unavailable",
}

_STRING = {"type": "string"}
_ETAG = {"description": "The entity tag of the stored contact (strong)", "required": True,
         "schema": _STRING}
_RETRY_AFTER = {"description": "Seconds to wait before retrying", "required": True,
                "schema": {"type": "string", "pattern": "^[0-9]+$"}}
_TOKEN = {"type": "string", "pattern": TOKEN_PATTERN}
_TAGS = {"type": "string", "pattern": TAG_LIST_PATTERN}


def _ref(model: type[BaseModel]) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{model.__name__}"}


def _operation(op: Operation) -> dict[str, Any]:
    params: list[dict[str, Any]] = []
    if "{id}" in op.route:
        params.append({"name": "id", "in": "path", "required": True,
                       "schema": {"type": "string", "pattern": ID_PATTERN, "maxLength": 128}})
    if op.function == "list_contacts":
        params += [
            {"name": "pageSize", "in": "query",
             "schema": {"type": "integer", "minimum": 1, "maximum": 100, "default": 10}},
            {"name": "continuationToken", "in": "query", "schema": _TOKEN,
             "description": "The continuationToken of the previous page, unchanged"},
            {"name": "x-continuation-token", "in": "header", "schema": _TOKEN,
             "description": "Same as continuationToken (send one, or the same in both)"},
        ]
    if op.conditional:
        params += [
            {"name": "If-Match", "in": "header", "schema": _TAGS,
             "description": "`*` or entity tags (strong comparison); no match gives 412"},
            {"name": "ETag", "in": "header", "schema": _TAGS,
             "description": "Same as If-Match when there is none, for reference-sample clients"},
            {"name": "If-None-Match", "in": "header", "schema": _TAGS,
             "description": "`*` or entity tags (weak comparison); a match gives "
                            + ("304" if op.method == "GET" else "412")},
        ]
    success: dict[str, Any] = {"description": _STATUS_TEXT.get(op.status, "OK")}
    if op.response is not None:
        success["content"] = {"application/json": {"schema": _ref(op.response)}}
    elif op.function == "health":
        success["content"] = {"application/json": {"schema": {
            "type": "object", "properties": {"status": {"const": "healthy"}},
            "required": ["status"]}}}
    elif op.function == "openapi":
        success["content"] = {"application/json": {"schema": {"type": "object"}}}
    headers: dict[str, Any] = {}
    if op.status == 201:
        headers["Location"] = {"description": "The new contact", "required": True,
                               "schema": {"type": "string", "format": "uri-reference"}}
    if op.status == 201 or "{id}" in op.route:
        headers["ETag"] = _ETAG
    if op.function == "list_contacts":
        headers["X-Continuation-Token"] = {
            "description": "The token of the next page; absent on the last page",
            "schema": _TOKEN}
    if headers:
        success["headers"] = headers
    responses: dict[str, Any] = {str(op.status): success}
    if op.function == "get_contact":
        responses["304"] = {"description": "Not Modified (If-None-Match matched); no body",
                            "headers": {"ETag": _ETAG}}
    for status in op.errors:
        error: dict[str, Any] = {
            "description": _STATUS_TEXT[status],
            "content": {"application/problem+json": {"schema": _ref(Problem)}},
        }
        if status in (429, 503):
            error["headers"] = {"Retry-After": _RETRY_AFTER}
        if status == 413:
            error["description"] += f" (over {MAX_BODY_BYTES} bytes)"
        responses[str(status)] = error
    result: dict[str, Any] = {"operationId": op.function, "summary": op.summary,
                              "responses": responses}
    if params:
        result["parameters"] = params
    if op.request is not None:
        result["requestBody"] = {"required": True,
                                 "content": {"application/json": {"schema": _ref(op.request)}}}
    result["security"] = [] if op.anonymous else [{"functionKey": []}, {"functionKeyQuery": []}]
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
                "functionKey": {"type": "apiKey", "in": "header", "name": "x-functions-key"},
                "functionKeyQuery": {"type": "apiKey", "in": "query", "name": "code"},
            },
        },
    }
