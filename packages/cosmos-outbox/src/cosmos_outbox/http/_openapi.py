"""The OpenAPI 3.1 document, generated from the indexed app: each HTTP function's declaration
(`cosmos_outbox.http._declaration.HttpOperation`: route, method, auth level, models, status,
headers, parameters, errors) and the pydantic models. Nothing here names a function: an HTTP
function without a declaration fails the document (the catch-all fallback is not an
operation and is left out).

The events the app publishes are documented too, from the event catalogue: one schema per
event class (named by its action) and an `x-events` list saying how each travels (Subject,
SessionId, aggregate type), so a new event class is in the document without being listed.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from typing import Any

import azure.functions as func
from azure.functions.decorators.function_app import Function
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from cosmos_outbox._domain import Aggregate, Event
from cosmos_outbox.http._conditional import TAG_LIST_PATTERN
from cosmos_outbox.http._declaration import (
    DEFAULT_PAGE_SIZE,
    MAX_PAGE_SIZE,
    HttpOperation,
    is_page,
    operation_of,
)
from cosmos_outbox.http._idempotency_key import KEY_HEADER, KEY_MAX_LENGTH, KEY_PATTERN
from cosmos_outbox.http._paging import TOKEN_PATTERN
from cosmos_outbox.http._problems import Problem
from cosmos_outbox.http._requests import MAX_BODY_BYTES

_STATUS_TEXT = {
    200: "OK",
    201: "Created",
    202: "Accepted",
    204: "No Content",
    304: "Not Modified",
    400: "Bad Request",
    401: "Unauthorized (no one signed in)",
    403: "Forbidden (signed in without the operator role, or an action from another site)",
    404: "Not Found",
    409: "Conflict",
    412: "Precondition Failed",
    413: "Content Too Large",
    415: "Unsupported Media Type",
    422: "Unprocessable Content",
    428: "Precondition Required",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
}

_RETRY_AFTER = {
    "description": "Seconds to wait before retrying",
    "required": True,
    "schema": {"type": "string", "pattern": "^[0-9]+$"},
}
_TOKEN = {"type": "string", "pattern": TOKEN_PATTERN}
_TAGS = {"type": "string", "pattern": TAG_LIST_PATTERN}
_SECURITY: dict[func.AuthLevel, list[dict[str, list[str]]]] = {
    func.AuthLevel.ANONYMOUS: [],
    func.AuthLevel.ADMIN: [{"masterKey": []}, {"masterKeyQuery": []}],
    func.AuthLevel.FUNCTION: [{"functionKey": []}, {"functionKeyQuery": []}],
}


class UndeclaredOperationError(LookupError):
    """An HTTP function of the app has no declaration to document it from."""


def operations(functions: Iterable[Function]) -> list[HttpOperation]:
    """The declarations of the app's HTTP functions, in indexing order (the catch-all left out).
    Raises UndeclaredOperationError for an HTTP function that has none."""
    found = []
    for function in functions:
        if not function.is_http_function():
            continue
        trigger = json.loads(function.get_function_json())["bindings"][0]
        if "{*" in str(trigger.get("route") or ""):
            continue  # the fallback: not an operation
        if is_page(function.get_user_function()):
            continue  # a page or its files (the operators' console): not an API operation
        operation = operation_of(function.get_user_function())
        if operation is None:
            raise UndeclaredOperationError(
                f"HTTP function {function.get_function_name()} is not a declared operation: "
                "register it with HttpApi.operation"
            )
        found.append(operation)
    return found


def _ref(model: type[BaseModel]) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{model.__name__}"}


#: The parameters of a paged operation.
_PAGED: list[dict[str, Any]] = [
    {
        "name": "pageSize",
        "in": "query",
        "schema": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_PAGE_SIZE,
            "default": DEFAULT_PAGE_SIZE,
        },
    },
    {
        "name": "continuationToken",
        "in": "query",
        "schema": _TOKEN,
        "description": "The continuationToken of the previous page, unchanged",
    },
    {
        "name": "x-continuation-token",
        "in": "header",
        "schema": _TOKEN,
        "description": "Same as continuationToken (send one, or the same in both)",
    },
]


def _parameters(op: HttpOperation) -> list[dict[str, Any]]:
    params: list[dict[str, Any]] = [
        {"name": p.name, "in": "path", "required": True, "schema": p.schema} for p in op.path
    ]
    params += [
        {
            "name": q.name,
            "in": "query",
            "required": q.required,
            "description": q.description,
            "schema": q.schema,
        }
        for q in op.query
    ]
    if op.paged:
        params += copy.deepcopy(_PAGED)
    if op.conditional:
        params += [
            {
                "name": "If-Match",
                "in": "header",
                "schema": _TAGS,
                "description": "`*` or entity tags (strong comparison); no match gives 412",
            },
            {
                "name": "ETag",
                "in": "header",
                "schema": _TAGS,
                "description": "Same as If-Match when there is none, for reference-sample clients",
            },
            {
                "name": "If-None-Match",
                "in": "header",
                "schema": _TAGS,
                "description": "`*` or entity tags (weak comparison); a match gives "
                + ("304" if op.not_modified else "412"),
            },
        ]
    if op.idempotent:
        params.append(
            {
                "name": KEY_HEADER,
                "in": "header",
                "schema": {
                    "type": "string",
                    "pattern": KEY_PATTERN,
                    "maxLength": 2 * KEY_MAX_LENGTH + 2,
                },
                "description": (
                    f"Optional: 1-{KEY_MAX_LENGTH} characters naming this request, the same on "
                    'each retry of it (IETF httpapi draft "The Idempotency-Key HTTP Header '
                    'Field"; a quoted structured-field string, or bare). A retry with the same key '
                    "and the same request answers what the first answered (status, ETag, "
                    "Location, body as of that write) without writing again; the same key with "
                    "another request answers 422. Scoped to this route (and the caller when the "
                    "platform names one); remembered for IDEMPOTENCY_TTL_SECONDS (default 1 day)"
                ),
            }
        )
    return params


def _operation(op: HttpOperation) -> dict[str, Any]:
    success: dict[str, Any] = {"description": _STATUS_TEXT.get(op.status, "OK")}
    if op.response is not None:
        success["content"] = {"application/json": {"schema": _ref(op.response)}}
    elif op.response_schema is not None:
        success["content"] = {"application/json": {"schema": dict(op.response_schema)}}
    headers = {
        h.name: {"description": h.description, "required": h.required, "schema": dict(h.schema)}
        if h.required
        else {"description": h.description, "schema": dict(h.schema)}
        for h in op.success_headers
    }
    if headers:
        success["headers"] = headers
    responses: dict[str, Any] = {str(op.status): success}
    if op.not_modified:
        etag = {n: h for n, h in headers.items() if n == "ETag"}
        responses["304"] = {
            "description": "Not Modified (If-None-Match matched); no body",
            **({"headers": etag} if etag else {}),
        }
    for status in op.declared_errors:
        error: dict[str, Any] = {
            "description": _STATUS_TEXT[status],
            "content": {"application/problem+json": {"schema": _ref(Problem)}},
        }
        if status in (429, 503):
            error["headers"] = {"Retry-After": _RETRY_AFTER}
        if status == 413:
            error["description"] += f" (over {MAX_BODY_BYTES} bytes)"
        if status == 422 and op.idempotent:
            error["description"] += (
                f" (the {KEY_HEADER} was used for another request to this route)"
            )
        if status == 503 and op.bounded:
            error["description"] += (
                f" (also when the store or the message broker has not "
                f"answered within {op.bound_seconds:g} s)"
            )
        responses[str(status)] = error
    result: dict[str, Any] = {"operationId": op.name, "summary": op.summary, "responses": responses}
    params = _parameters(op)
    if params:
        result["parameters"] = params
    if op.request is not None:
        result["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": _ref(op.request)}},
        }
    result["security"] = (
        _SECURITY[op.auth_level]
        if op.security is None
        else [{scheme: []} for scheme in op.security]
    )
    return result


def _events(aggregates: Iterable[type[Aggregate]]) -> list[tuple[type[Aggregate], type[Event]]]:
    return sorted(
        ((a, e) for a in aggregates for e in a.event_classes()),
        key=lambda pair: (pair[0].aggregate_type, pair[1].action_name()),
    )


def openapi_document(
    functions: Iterable[Function],
    *,
    title: str,
    description: str,
    aggregates: Iterable[type[Aggregate]] = (),
) -> dict[str, Any]:
    """The document of the app's HTTP operations and of the events of `aggregates`."""
    indexed = operations(functions)
    events = _events(aggregates)
    requests = {op.request for op in indexed if op.request is not None}
    responses = {op.response for op in indexed if op.response is not None} | {Problem}
    entries: list[tuple[type[BaseModel], Any]] = [(m, "validation") for m in requests]
    entries += [(m, "serialization") for m in responses - requests]
    _, schemas = models_json_schema(
        sorted(entries, key=lambda e: e[0].__name__),
        by_alias=True,
        ref_template="#/components/schemas/{model}",
    )
    components = dict(schemas.get("$defs", {}))
    for _, event in events:
        schema = event.model_json_schema(
            by_alias=True, mode="serialization", ref_template="#/components/schemas/{model}"
        )
        components.update(schema.pop("$defs", {}))
        components[event.action_name()] = schema
    paths: dict[str, dict[str, Any]] = {}
    for op in indexed:
        paths.setdefault(f"/{op.route}", {})[op.method.lower()] = _operation(op)
    return {
        "openapi": "3.1.0",
        "info": {"title": title, "version": "1.0.0", "description": description},
        "servers": [{"url": "/api"}],
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {
                "functionKey": {"type": "apiKey", "in": "header", "name": "x-functions-key"},
                "functionKeyQuery": {"type": "apiKey", "in": "query", "name": "code"},
                "masterKey": {
                    "type": "apiKey",
                    "in": "header",
                    "name": "x-functions-key",
                    "description": "The host's master key (admin routes)",
                },
                "masterKeyQuery": {
                    "type": "apiKey",
                    "in": "query",
                    "name": "code",
                    "description": "The host's master key (admin routes)",
                },
                "signedInOperator": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "A signed-in operator: App Service Authentication (Entra "
                    "ID) admits the request, with its session cookie (/.auth/login/aad) or an "
                    "Entra ID token, and the app checks the operator's app role; actions from "
                    "a browser also need the console page's X-CSRF-Token (the operators' "
                    "console, /outbox/console)",
                },
            },
        },
        "x-events": [
            {
                "action": event.action_name(),
                "aggregateType": aggregate.aggregate_type,
                "source": aggregate.source(),
                "subject": event.action_name(),
                "sessionId": f"{aggregate.aggregate_type}Id",
                "schema": {"$ref": f"#/components/schemas/{event.action_name()}"},
            }
            for aggregate, event in events
        ],
    }
