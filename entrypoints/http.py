"""HTTP handlers: parse the request, call the use case, map the result. function_app.py binds
each route to one of these; they never touch storage directly."""

from __future__ import annotations

import json
import re
import secrets
import threading
from collections.abc import Callable, Iterable
from typing import TypeVar

import azure.functions as func
from azure.functions._abc import TraceContext
from pydantic import BaseModel

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
from application.conditional import MalformedConditionError, Outcome, Preconditions
from application.errors import InvalidContinuationError
from application.ports import Page, UnitOfWork
from application.service import MAX_PAGE_SIZE, ContactService, Versioned
from entrypoints.bootstrap import dependencies
from entrypoints.paging import Cursor, TokenCodec
from entrypoints.problems import HttpProblemError, bad_request, json_response
from entrypoints.requests import MAX_BODY_BYTES, parse_body
from entrypoints.routes import HttpRoute, allowed_methods

__all__ = ["MAX_BODY_BYTES"]

DEFAULT_PAGE_SIZE = 10
#: A contact id (also the OpenAPI pattern of the `id` path parameter).
ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
_ID = re.compile(ID_PATTERN)
_PAGE_SIZE = re.compile(r"[0-9]{1,4}")
_TRACEPARENT = re.compile(r"00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")
#: /health answers within this many seconds whatever the store does.
HEALTH_TIMEOUT_SECONDS = 4.0

M = TypeVar("M", bound=BaseModel)


#: The Functions key may travel in the query as `code` (Azure reads it; the app ignores it).
KEY_PARAMETER = "code"


def query(req: func.HttpRequest, *allowed: str) -> None:
    """Unknown query parameters are refused (400 naming one), like unknown body fields."""
    for name in req.params:
        if name not in allowed and name != KEY_PARAMETER:
            raise bad_request(f"unknown query parameter {json.dumps(name)}", name)


def read_body[M: BaseModel](req: func.HttpRequest, model: type[M]) -> M:
    """413 over 64 KiB, 415 unless JSON, 400 for bad JSON or invalid fields (per field)."""
    return parse_body(req.get_body() or b"", req.headers.get("content-type"), model)


def contact_id(req: func.HttpRequest) -> str:
    value = str(req.route_params.get("id", ""))
    if not _ID.fullmatch(value):
        raise bad_request("the contact id must be 1-128 letters, digits, '.', '_' or '-', "
                          "starting with a letter or digit", "id")
    return value


def preconditions(req: func.HttpRequest) -> Preconditions:
    """`If-Match` (or the reference sample's `ETag` request header) and `If-None-Match`; a
    malformed one is a 400 naming the header."""
    try:
        return Preconditions.parse(
            if_match=req.headers.get("if-match"),
            if_none_match=req.headers.get("if-none-match"),
            etag=req.headers.get("etag"),
        )
    except MalformedConditionError as exc:
        raise bad_request(f"{exc.header} is not a valid entity-tag list: {exc.reason}",
                          exc.header) from None


def if_match(req: func.HttpRequest) -> Preconditions | None:
    """The preconditions of a write (kept under its old name for callers)."""
    conditions = preconditions(req)
    return None if conditions.unconditional else conditions


def traceparent(req: func.HttpRequest, trace: TraceContext | None = None) -> str:
    """The W3C trace context carried into the events: the invocation's (the host's
    `context.trace_context`, which continues the caller's), else the request's `traceparent`
    header, else a new one. So the events of one request share its trace."""
    candidates = (trace.trace_parent if trace is not None else None,
                  req.headers.get("traceparent"))
    for candidate in candidates:
        value = (candidate or "").strip().lower()
        if _TRACEPARENT.fullmatch(value) and value[3:35] != "0" * 32:
            return value
    return f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01"


def _contact(result: Versioned, *, status: int = 200,
             extra: dict[str, str] | None = None) -> func.HttpResponse:
    return json_response(ContactView.of(result.contact), status=status,
                         headers={"ETag": result.etag, **(extra or {})})


def _no_content(status: int, etag: str) -> func.HttpResponse:
    """204 / 304: no body."""
    return func.HttpResponse(status_code=status, headers={"ETag": etag})


def create_contact(
    req: func.HttpRequest, service: ContactService, trace: TraceContext | None = None
) -> func.HttpResponse:
    query(req)
    command = read_body(req, CreateContact)
    result = service.create(command, traceparent=traceparent(req, trace))
    return _contact(result, status=201,
                    extra={"Location": f"/api/contacts/{result.contact.id}"})


def get_contact(req: func.HttpRequest, service: ContactService) -> func.HttpResponse:
    query(req)
    cid = contact_id(req)
    conditions = preconditions(req)
    result = service.get(cid)
    safe = req.method.upper() in ("GET", "HEAD")
    match conditions.evaluate(result.etag, safe=safe):
        case Outcome.NOT_MODIFIED:
            return _no_content(304, result.etag)
        case Outcome.PRECONDITION_FAILED:
            raise HttpProblemError(412, "Precondition Failed",
                                   "the contact does not match the If-Match condition")
    return _contact(result)


def page_size(req: func.HttpRequest) -> int:
    raw = req.params.get("pageSize")
    if raw is None:
        return DEFAULT_PAGE_SIZE
    if not _PAGE_SIZE.fullmatch(raw) or not 1 <= int(raw) <= MAX_PAGE_SIZE:
        raise bad_request(f"pageSize must be an integer 1..{MAX_PAGE_SIZE}", "pageSize")
    return int(raw)


def continuation(req: func.HttpRequest, tokens: TokenCodec) -> Cursor | None:
    """The token from the query or the `x-continuation-token` header (the same one if both)."""
    query = req.params.get("continuationToken")
    header = req.headers.get("x-continuation-token")
    if query is not None and header is not None and query != header:
        raise bad_request("continuationToken and x-continuation-token differ; send one",
                          "continuationToken")
    token = query if query is not None else header
    if token is None:
        return None
    try:
        return tokens.decode(token)
    except InvalidContinuationError:
        raise bad_request("the continuation token is not valid: pass back a continuationToken "
                          "this API returned, unchanged", "continuationToken") from None


def list_contacts(req: func.HttpRequest, service: ContactService,
                  tokens: TokenCodec | None = None) -> func.HttpResponse:
    query(req, "pageSize", "continuationToken")
    codec = tokens if tokens is not None else dependencies().tokens
    size = page_size(req)
    cursor = continuation(req, codec)
    page = service.list_page(page_size=size,
                             continuation=cursor.store_token if cursor else None)
    page = _next_page(page, cursor, codec)
    body = ContactPage.of(page)
    headers = {"X-Continuation-Token": body.continuation_token} if body.continuation_token else {}
    return json_response(body, headers=headers)


def _next_page(page: Page, cursor: Cursor | None, tokens: TokenCodec) -> Page:
    """The store's next token wrapped in the API's own; a store token that does not move
    (the same one back) ends the listing, so no token can loop."""
    store_token = page.continuation_token
    if store_token is None or (cursor is not None and store_token == cursor.store_token):
        return Page(items=page.items, continuation_token=None)
    number = (cursor.page if cursor else 0) + 1
    return Page(items=page.items,
                continuation_token=tokens.encode(Cursor(store_token=store_token, page=number)))


def patch_contact(
    req: func.HttpRequest, service: ContactService, trace: TraceContext | None = None
) -> func.HttpResponse:
    query(req)
    cid = contact_id(req)
    conditions = if_match(req)
    command = read_body(req, PatchContact)
    return _contact(service.patch(cid, command, if_match=conditions,
                                  traceparent=traceparent(req, trace)))


def update_name(
    req: func.HttpRequest, service: ContactService, trace: TraceContext | None = None
) -> func.HttpResponse:
    query(req)
    cid = contact_id(req)
    conditions = if_match(req)
    command = read_body(req, UpdateName)
    result = service.update_name(cid, command, if_match=conditions,
                                 traceparent=traceparent(req, trace))
    return _no_content(204, result.etag)


def update_email(
    req: func.HttpRequest, service: ContactService, trace: TraceContext | None = None
) -> func.HttpResponse:
    query(req)
    cid = contact_id(req)
    conditions = if_match(req)
    command = read_body(req, UpdateEmail)
    result = service.update_email(cid, command, if_match=conditions,
                                  traceparent=traceparent(req, trace))
    return _no_content(204, result.etag)


def update_description(
    req: func.HttpRequest, service: ContactService, trace: TraceContext | None = None
) -> func.HttpResponse:
    query(req)
    cid = contact_id(req)
    conditions = if_match(req)
    command = read_body(req, UpdateDescription)
    result = service.update_description(cid, command, if_match=conditions,
                                        traceparent=traceparent(req, trace))
    return _no_content(204, result.etag)


def update_company(
    req: func.HttpRequest, service: ContactService, trace: TraceContext | None = None
) -> func.HttpResponse:
    query(req)
    cid = contact_id(req)
    conditions = if_match(req)
    command = read_body(req, UpdateCompany)
    result = service.update_company(cid, command, if_match=conditions,
                                    traceparent=traceparent(req, trace))
    return _no_content(204, result.etag)


def delete_contact(
    req: func.HttpRequest, service: ContactService, trace: TraceContext | None = None
) -> func.HttpResponse:
    query(req)
    cid = contact_id(req)
    result = service.delete(cid, if_match=if_match(req), traceparent=traceparent(req, trace))
    return _no_content(204, result.etag)


def health(uow: Callable[[], Callable[[], UnitOfWork]]) -> func.HttpResponse:
    """Ping the store in a thread of its own and answer within HEALTH_TIMEOUT_SECONDS: 200, or
    503 with Retry-After when the store fails or does not answer in time. `uow` gives the unit
    of work factory (building it may itself reach the store)."""
    outcome: list[BaseException | None] = []

    def probe() -> None:
        try:
            with uow()() as unit:
                unit.ping()
            outcome.append(None)
        except BaseException as exc:  # handed to the request thread
            outcome.append(exc)

    thread = threading.Thread(target=probe, name="health-probe", daemon=True)
    thread.start()
    thread.join(HEALTH_TIMEOUT_SECONDS)
    if not outcome:
        raise HttpProblemError(503, "Service Unavailable",
                               f"the store did not answer within {HEALTH_TIMEOUT_SECONDS:g} s",
                               headers={"Retry-After": "5"})
    if outcome[0] is not None:
        raise outcome[0]
    return func.HttpResponse(json.dumps({"status": "healthy"}), mimetype="application/json")


def fallback(req: func.HttpRequest, routes: Iterable[HttpRoute]) -> func.HttpResponse:
    """Requests no function takes: 405 with `Allow` when the path exists, else 404."""
    path = str(req.route_params.get("path") or "")
    allowed = allowed_methods(routes, path)
    if allowed:
        raise HttpProblemError(
            405, "Method Not Allowed",
            f"{req.method.upper()} is not allowed here; allowed: {', '.join(sorted(allowed))}",
            headers={"Allow": ", ".join(sorted(allowed))},
        )
    raise HttpProblemError(404, "Not Found", "no such route")
