"""The OpenAPI 3.1 document, generated from the indexed app and the pydantic models.

The route table (function, method, route, auth level) is read from the app as the Functions
host indexes it (`app.get_functions()`), so it cannot drift from function_app.py. What the
bindings do not say (statuses, request and response models, whether preconditions apply) is in
`DOCUMENTATION`, keyed by function name; a test checks both cover the same functions. The
catch-all route that answers 404/405 problems is not an operation and is left out. Limits come
from where they are enforced: the models, the HTTP layer's page size, id and token rules.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from typing import Any

import azure.functions as func
from pydantic import BaseModel, TypeAdapter
from pydantic.json_schema import models_json_schema

from application.admin import (
    ID_PATTERN as EVENT_ID_PATTERN,
)
from application.admin import (
    OutboxStatusView,
    QuarantineItem,
    QuarantineListPage,
    RedriveRequest,
    RedriveView,
)
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
from application.service import MAX_PAGE_SIZE
from domain.values import OperatorReason
from entrypoints.http import DEFAULT_PAGE_SIZE, ID_PATTERN
from entrypoints.paging import TOKEN_PATTERN
from entrypoints.problems import Problem
from entrypoints.requests import MAX_BODY_BYTES


@dataclass(frozen=True)
class Documentation:
    summary: str
    status: int
    request: type[BaseModel] | None = None
    response: type[BaseModel] | None = None
    conditional: bool = False
    errors: tuple[int, ...] = (400, 404, 412, 429, 500, 503)


@dataclass(frozen=True)
class Operation:
    """One HTTP function as the host indexes it, with its documentation."""

    function: str
    method: str
    route: str
    anonymous: bool
    doc: Documentation


_WRITE_ERRORS = (400, 404, 412, 413, 415, 429, 500, 503)

DOCUMENTATION: dict[str, Documentation] = {
    "create_contact": Documentation(
        "Create a contact (raises ContactCreated)", 201, CreateContact, ContactView,
        errors=(400, 409, 413, 415, 429, 500, 503)),
    "list_contacts": Documentation(
        "List contacts, one page at a time", 200, None, ContactPage,
        errors=(400, 429, 500, 503)),
    "get_contact": Documentation(
        "Read a contact", 200, None, ContactView, conditional=True,
        errors=(400, 404, 412, 429, 500, 503)),
    "patch_contact": Documentation(
        "Change any of name, email, description, company (one event per changed aspect)",
        200, PatchContact, ContactView, conditional=True, errors=_WRITE_ERRORS),
    "update_contact_name": Documentation(
        "Change the name", 204, UpdateName, conditional=True, errors=_WRITE_ERRORS),
    "update_contact_email": Documentation(
        "Change the email", 204, UpdateEmail, conditional=True, errors=_WRITE_ERRORS),
    "update_contact_description": Documentation(
        "Change the description", 204, UpdateDescription, conditional=True,
        errors=_WRITE_ERRORS),
    "update_contact_company": Documentation(
        "Change the company", 204, UpdateCompany, conditional=True, errors=_WRITE_ERRORS),
    "delete_contact": Documentation(
        "Soft-delete a contact", 204, conditional=True, errors=(400, 404, 412, 429, 500, 503)),
    "health": Documentation(
        "Health: checks the store (answers within 5 s)", 200, errors=(400, 500, 503)),
    "openapi": Documentation("This document", 200, errors=(400,)),
    "outbox_status": Documentation(
        "Operators: the relay's backlog per lease and the number of quarantined events", 200,
        None, OutboxStatusView, errors=(400, 429, 500, 503)),
    "list_quarantine": Documentation(
        "Operators: the quarantined events (resolved ones too, until they expire), one page "
        "at a time", 200, None, QuarantineListPage, errors=(400, 429, 500, 503)),
    "replay_quarantined": Documentation(
        "Operators: send a quarantined event through the relay again with its own id; the "
        "record answered is resolved, or still quarantined with the new reason", 202, None,
        QuarantineItem, errors=(400, 404, 429, 500, 503)),
    "discard_quarantined": Documentation(
        "Operators: delete a quarantine record for good, with the reason (audit log)", 204,
        errors=(400, 404, 429, 500, 503)),
    "redrive_events": Documentation(
        "Operators: publish again every stored event created at or after `since`, per contact "
        "in version order (duplicates inside the topic's detection window are dropped)", 202,
        RedriveRequest, RedriveView, errors=(400, 413, 415, 429, 500, 503)),
}

#: Functions answered with the host's master key in Azure (auth level ADMIN).
ADMIN_FUNCTIONS = frozenset(
    {"outbox_status", "list_quarantine", "replay_quarantined", "discard_quarantined",
     "redrive_events"})


def operations(app: func.FunctionApp) -> list[Operation]:
    """The HTTP functions of the app, in declaration order, with their documentation. The app
    is `entrypoints.routes.FunctionApp`, whose `get_functions()` may be called again."""
    found = []
    for function in app.get_functions():
        if not function.is_http_function():
            continue
        name = str(function.get_function_name())
        trigger = json.loads(function.get_function_json())["bindings"][0]
        if "{*" in str(trigger["route"]):
            continue  # the fallback route: not an operation
        for method in trigger["methods"]:
            found.append(Operation(name, str(method).upper(), str(trigger["route"]),
                                   trigger["authLevel"] == "ANONYMOUS", DOCUMENTATION[name]))
    return found


_STATUS_TEXT = {
    200: "OK", 201: "Created", 202: "Accepted", 204: "No Content", 304: "Not Modified",
    400: "Bad Request",
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
_REASON = TypeAdapter(OperatorReason).json_schema()


def _ref(model: type[BaseModel]) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{model.__name__}"}


def _operation(op: Operation) -> dict[str, Any]:
    doc = op.doc
    params: list[dict[str, Any]] = []
    if "{id}" in op.route:
        params.append({"name": "id", "in": "path", "required": True,
                       "schema": {"type": "string", "pattern": ID_PATTERN, "maxLength": 128}})
    if "{eventId}" in op.route:
        params.append({"name": "eventId", "in": "path", "required": True,
                       "schema": {"type": "string", "pattern": EVENT_ID_PATTERN,
                                  "maxLength": 128}})
    if op.function == "discard_quarantined":
        params.append({"name": "reason", "in": "query", "required": True,
                       "description": "Why the event is discarded (written to the audit log)",
                       "schema": _REASON})
    if op.function in ("list_contacts", "list_quarantine"):
        params += [
            {"name": "pageSize", "in": "query",
             "schema": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE_SIZE,
                        "default": DEFAULT_PAGE_SIZE}},
            {"name": "continuationToken", "in": "query", "schema": _TOKEN,
             "description": "The continuationToken of the previous page, unchanged"},
            {"name": "x-continuation-token", "in": "header", "schema": _TOKEN,
             "description": "Same as continuationToken (send one, or the same in both)"},
        ]
    if doc.conditional:
        params += [
            {"name": "If-Match", "in": "header", "schema": _TAGS,
             "description": "`*` or entity tags (strong comparison); no match gives 412"},
            {"name": "ETag", "in": "header", "schema": _TAGS,
             "description": "Same as If-Match when there is none, for reference-sample clients"},
            {"name": "If-None-Match", "in": "header", "schema": _TAGS,
             "description": "`*` or entity tags (weak comparison); a match gives "
                            + ("304" if op.method == "GET" else "412")},
        ]
    success: dict[str, Any] = {"description": _STATUS_TEXT.get(doc.status, "OK")}
    if doc.response is not None:
        success["content"] = {"application/json": {"schema": _ref(doc.response)}}
    elif op.function == "health":
        success["content"] = {"application/json": {"schema": {
            "type": "object", "properties": {"status": {"const": "healthy"}},
            "required": ["status"]}}}
    elif op.function == "openapi":
        success["content"] = {"application/json": {"schema": {"type": "object"}}}
    headers: dict[str, Any] = {}
    if doc.status == 201:
        headers["Location"] = {"description": "The new contact", "required": True,
                               "schema": {"type": "string", "format": "uri-reference"}}
    if doc.status == 201 or "{id}" in op.route:
        headers["ETag"] = _ETAG
    if op.function in ("list_contacts", "list_quarantine"):
        headers["X-Continuation-Token"] = {
            "description": "The token of the next page; absent on the last page",
            "schema": _TOKEN}
    if headers:
        success["headers"] = headers
    responses: dict[str, Any] = {str(doc.status): success}
    if op.function == "get_contact":
        responses["304"] = {"description": "Not Modified (If-None-Match matched); no body",
                            "headers": {"ETag": _ETAG}}
    for status in doc.errors:
        error: dict[str, Any] = {
            "description": _STATUS_TEXT[status],
            "content": {"application/problem+json": {"schema": _ref(Problem)}},
        }
        if status in (429, 503):
            error["headers"] = {"Retry-After": _RETRY_AFTER}
        if status == 413:
            error["description"] += f" (over {MAX_BODY_BYTES} bytes)"
        responses[str(status)] = error
    result: dict[str, Any] = {"operationId": op.function, "summary": doc.summary,
                              "responses": responses}
    if params:
        result["parameters"] = params
    if doc.request is not None:
        result["requestBody"] = {"required": True,
                                 "content": {"application/json": {"schema": _ref(doc.request)}}}
    if op.anonymous:
        result["security"] = []
    elif op.function in ADMIN_FUNCTIONS:
        result["security"] = [{"masterKey": []}, {"masterKeyQuery": []}]
    else:
        result["security"] = [{"functionKey": []}, {"functionKeyQuery": []}]
    return result


@cache
def openapi_document(app: func.FunctionApp) -> dict[str, Any]:
    indexed = operations(app)
    requests = {op.doc.request for op in indexed if op.doc.request is not None}
    responses = {op.doc.response for op in indexed if op.doc.response is not None} | {Problem}
    entries: list[tuple[type[BaseModel], Any]] = [(m, "validation") for m in requests]
    entries += [(m, "serialization") for m in responses - requests]
    _, schemas = models_json_schema(
        sorted(entries, key=lambda e: e[0].__name__),
        by_alias=True,
        ref_template="#/components/schemas/{model}",
    )
    paths: dict[str, dict[str, Any]] = {}
    for op in indexed:
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
                "masterKey": {"type": "apiKey", "in": "header", "name": "x-functions-key",
                              "description": "The host's master key (admin routes)"},
                "masterKeyQuery": {"type": "apiKey", "in": "query", "name": "code",
                                   "description": "The host's master key (admin routes)"},
            },
        },
    }
