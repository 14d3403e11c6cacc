"""HTTP handlers of the operators' routes (`/api/outbox/...`, auth level ADMIN in Azure: the
host's master key). Parse, call `application.admin.OutboxAdmin`, map the result; errors are
problem documents like everywhere else.

Decision: the reason of a discard is the required query parameter `reason` (1-500 characters,
the text rules of every field). DELETE bodies are dropped by some clients and proxies, and a
query parameter shows in the host's request log next to the route."""

from __future__ import annotations

import re

import azure.functions as func
from pydantic import TypeAdapter, ValidationError

from application.admin import (
    ID_PATTERN,
    OutboxAdmin,
    QuarantineItem,
    QuarantineListPage,
    RedriveRequest,
    RedriveView,
)
from application.ports import QuarantinePage
from domain.values import OperatorReason
from entrypoints.http import continuation, page_size, query, read_body
from entrypoints.paging import Cursor, TokenCodec
from entrypoints.problems import bad_request, field_errors, json_response

_ID = re.compile(ID_PATTERN)
_REASON: TypeAdapter[str] = TypeAdapter(OperatorReason)


def event_id(req: func.HttpRequest) -> str:
    value = str(req.route_params.get("eventId", ""))
    if not _ID.fullmatch(value):
        raise bad_request("the event id must be 1-128 letters, digits, '.', '_' or '-', "
                          "starting with a letter or digit", "eventId")
    return value


def status(req: func.HttpRequest, admin: OutboxAdmin) -> func.HttpResponse:
    query(req)
    return json_response(admin.status().view())


def list_quarantine(req: func.HttpRequest, admin: OutboxAdmin,
                    tokens: TokenCodec) -> func.HttpResponse:
    query(req, "pageSize", "continuationToken")
    size = page_size(req)
    cursor = continuation(req, tokens)
    page = admin.quarantine_page(page_size=size,
                                 continuation=cursor.store_token if cursor else None)
    body = QuarantineListPage.of(_next_page(page, cursor, tokens))
    headers = {"X-Continuation-Token": body.continuation_token} if body.continuation_token else {}
    return json_response(body, headers=headers)


def _next_page(page: QuarantinePage, cursor: Cursor | None,
               tokens: TokenCodec) -> QuarantinePage:
    """As for contacts: the store's token sealed in the API's own; one that does not move ends
    the listing."""
    store_token = page.continuation_token
    if store_token is None or (cursor is not None and store_token == cursor.store_token):
        return QuarantinePage(page.items, None)
    number = (cursor.page if cursor else 0) + 1
    return QuarantinePage(page.items, tokens.encode(Cursor(store_token=store_token, page=number)))


def replay(req: func.HttpRequest, admin: OutboxAdmin) -> func.HttpResponse:
    query(req)
    return json_response(QuarantineItem.of(admin.replay(event_id(req))), status=202)


def discard(req: func.HttpRequest, admin: OutboxAdmin) -> func.HttpResponse:
    query(req, "reason")
    eid = event_id(req)
    raw = req.params.get("reason")
    if raw is None:
        raise bad_request("reason is required: say why the event is discarded", "reason")
    try:
        reason = _REASON.validate_python(raw)
    except ValidationError as exc:
        error = field_errors(exc, prefix="reason")[0]
        raise bad_request(f"reason {error.message}", "reason") from None
    admin.discard(eid, reason)
    return func.HttpResponse(status_code=204)


def redrive(req: func.HttpRequest, admin: OutboxAdmin) -> func.HttpResponse:
    query(req)
    command = read_body(req, RedriveRequest)
    report = admin.redrive(command.since, aggregate_id=command.contact_id)
    return json_response(RedriveView(events=report.events, sent=report.sent,
                                     quarantined=report.quarantined), status=202)
