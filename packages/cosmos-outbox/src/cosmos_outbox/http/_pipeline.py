"""The request pipeline of a declared operation (`_declaration.HttpOperation`): the request is
parsed and checked against the declaration (unknown query parameters, path parameters, declared
query values, page size, preconditions, the Idempotency-Key, the body: 4xx problems, the first
fault answers), the handler runs (bounded when declared so), and its `Reply` gets the declared
status. Every error leaves as a problem document, never a stack trace.

Written once, as a coroutine (`respond`): an `async def` function awaits it, a sync function
runs it (`cosmos_outbox._sync_over_async.run_sync`: a sync handler completes without suspending)."""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from typing import Any, cast

import azure.functions as func
from pydantic import BaseModel, ValidationError

from cosmos_outbox._sync_over_async import SuspendedError, resolved, run_sync
from cosmos_outbox.http._call import Handler, HttpCall, Reply
from cosmos_outbox.http._conditional import MalformedConditionError, Preconditions
from cosmos_outbox.http._declaration import (
    DEFAULT_PAGE_SIZE,
    MAX_PAGE_SIZE,
    HttpOperation,
    PathParameter,
    QueryParameter,
)
from cosmos_outbox.http._idempotency_key import KEY_HEADER, parse_key
from cosmos_outbox.http._models import ID_PATTERN
from cosmos_outbox.http._problems import (
    HttpProblemError,
    bad_request,
    field_errors,
    from_exception,
    json_response,
)
from cosmos_outbox.http._requests import parse_body
from cosmos_outbox.http.bounded import await_bounded, run_bounded

_PAGE_SIZE = re.compile(r"[0-9]{1,4}")


async def respond(
    operation: HttpOperation,
    handler: Handler,
    req: func.HttpRequest,
    context: func.Context | None,
    *,
    asynchronous: bool,
) -> func.HttpResponse:
    """The answer to one request: parsed, handled, answered; every error a problem document.
    `asynchronous`: the handler runs on the event loop (a bounded one under a timeout), else in
    this thread (a bounded one on a thread of its own)."""
    try:
        call = parse(operation, req, context)
        if not operation.bounded:
            result = await resolved(handler(call))
        elif asynchronous:
            result = await await_bounded(
                resolved(handler(call)), what=operation.name, seconds=operation.bound_seconds
            )
        else:
            result = run_bounded(
                lambda: run_sync(resolved(handler(call))),
                what=operation.name,
                seconds=operation.bound_seconds,
            )
        if isinstance(result, func.HttpResponse):
            return result
        return answer(operation, cast(Reply, result))
    except Exception as exc:  # the boundary: translate everything
        return from_exception(exc).response()


def entry(
    operation: HttpOperation, handler: Handler, *, asynchronous: bool
) -> Callable[..., func.HttpResponse | Awaitable[func.HttpResponse]]:
    """The function the worker indexes: `async def (req, context)` when `asynchronous`, else a
    plain function that runs the pipeline in its thread."""
    if asynchronous:

        async def serve(req: func.HttpRequest, context: func.Context) -> func.HttpResponse:
            return await respond(operation, handler, req, context, asynchronous=True)

        return serve

    def run(req: func.HttpRequest, context: func.Context) -> func.HttpResponse:
        try:
            return run_sync(respond(operation, handler, req, context, asynchronous=False))
        except SuspendedError as exc:  # a coroutine handed to this sync function waited on I/O
            return from_exception(exc).response()

    return run


def parse(
    operation: HttpOperation, req: func.HttpRequest, context: func.Context | None
) -> HttpCall[Any]:
    """Query names, path parameters, declared query values, page size, preconditions, the
    Idempotency-Key, body: in this order, the first fault answers."""
    for name in req.params:
        if name not in operation.allowed_query:
            raise bad_request(f"unknown query parameter {json.dumps(name)}", name)
    path = {p.name: _path_value(req, p) for p in operation.path}
    query = {q.name: value for q in operation.query if (value := _query_value(req, q)) is not None}
    page_size = _page_size(req) if operation.paged else DEFAULT_PAGE_SIZE
    preconditions = (
        _preconditions(req, etag_header=operation.etag_request_header)
        if operation.conditional
        else Preconditions()
    )
    if operation.precondition_required and preconditions.if_match is None:
        raise HttpProblemError(
            428,
            "Precondition Required",
            "this change needs If-Match (or ETag) with the ETag you read: read the resource, "
            "then send its ETag",
        )
    key = parse_key(req.headers.get(KEY_HEADER)) if operation.idempotent else None
    body = None
    if operation.request is not None:
        body = parse_body(req.get_body() or b"", req.headers.get("content-type"), operation.request)
    return HttpCall(
        request=req,
        context=context,
        operation=operation,
        path=path,
        query=query,
        preconditions=preconditions,
        body=body,
        page_size=page_size,
        idempotency_key=key,
    )


def _path_value(req: func.HttpRequest, parameter: PathParameter) -> str:
    value = str(req.route_params.get(parameter.name, ""))
    if len(value) > parameter.max_length or not re.fullmatch(parameter.pattern, value):
        form = (
            f"1-{parameter.max_length} letters, digits, '.', '_' or '-', starting with a letter "
            "or digit"
            if parameter.pattern == ID_PATTERN
            else f"at most {parameter.max_length} characters matching {parameter.pattern}"
        )
        raise bad_request(f"{parameter.what} must be {form}", parameter.name)
    return value


def _query_value(req: func.HttpRequest, parameter: QueryParameter) -> Any:
    raw = req.params.get(parameter.name)
    if raw is None:
        if parameter.required:
            raise bad_request(parameter.missing or f"{parameter.name} is required", parameter.name)
        return None
    try:
        return parameter.adapter.validate_python(raw)
    except ValidationError as exc:
        error = field_errors(exc, prefix=parameter.name)[0]
        raise bad_request(f"{parameter.name} {error.message}", parameter.name) from None


def _page_size(req: func.HttpRequest) -> int:
    raw = req.params.get("pageSize")
    if raw is None:
        return DEFAULT_PAGE_SIZE
    if not _PAGE_SIZE.fullmatch(raw) or not 1 <= int(raw) <= MAX_PAGE_SIZE:
        raise bad_request(f"pageSize must be an integer 1..{MAX_PAGE_SIZE}", "pageSize")
    return int(raw)


def _preconditions(req: func.HttpRequest, *, etag_header: bool) -> Preconditions:
    """`If-Match` (or, with `etag_header`, the reference sample's `ETag` request header) and
    `If-None-Match`; a malformed one is a 400 naming the header."""
    try:
        return Preconditions.parse(
            if_match=req.headers.get("if-match"),
            if_none_match=req.headers.get("if-none-match"),
            etag=req.headers.get("etag") if etag_header else None,
        )
    except MalformedConditionError as exc:
        raise bad_request(
            f"{exc.header} is not a valid entity-tag list: {exc.reason}", exc.header
        ) from None


def answer(operation: HttpOperation, reply: Reply) -> func.HttpResponse:
    status = reply.status if reply.status is not None else operation.status
    headers = dict(reply.headers)
    if reply.body is None:
        return func.HttpResponse(status_code=status, headers=headers)
    return json_response(
        reply.body if isinstance(reply.body, BaseModel) else cast(Any, reply.body),
        status=status,
        headers=headers,
    )
