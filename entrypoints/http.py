"""HTTP handlers: parse the request, call the use case, map the result. function_app.py binds
each route to one of these; they never touch storage directly."""

from __future__ import annotations

import json
import re
import secrets
from typing import TypeVar

import azure.functions as func
from azure.functions._abc import TraceContext
from pydantic import BaseModel, ValidationError

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
from application.service import MAX_PAGE_SIZE, ContactService, Versioned
from entrypoints.problems import HttpProblemError, bad_request, field_errors, json_response

MAX_BODY_BYTES = 64 * 1024
DEFAULT_PAGE_SIZE = 10
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_TRACEPARENT = re.compile(r"00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")
_JSON_TYPE = re.compile(r"application/(?:[\w.+-]+\+)?json", re.IGNORECASE)

M = TypeVar("M", bound=BaseModel)


def read_body[M: BaseModel](req: func.HttpRequest, model: type[M]) -> M:
    """413 over 64 KiB, 415 unless JSON, 400 for bad JSON or invalid fields (per field)."""
    body = req.get_body() or b""
    if len(body) > MAX_BODY_BYTES:
        raise HttpProblemError(413, "Content Too Large",
                          f"the body is larger than {MAX_BODY_BYTES} bytes")
    content_type = (req.headers.get("content-type") or "").split(";")[0].strip()
    if not _JSON_TYPE.fullmatch(content_type):
        raise HttpProblemError(415, "Unsupported Media Type", "send the body as application/json")
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise bad_request(f"the body is not valid JSON: {exc}", "$") from None
    if not isinstance(data, dict):
        raise bad_request("the body must be a JSON object", "$")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise HttpProblemError(400, "Bad Request", "the request is not valid",
                          errors=field_errors(exc)) from None


def contact_id(req: func.HttpRequest) -> str:
    value = str(req.route_params.get("id", ""))
    if not _ID.fullmatch(value):
        raise bad_request("the contact id must be 1-128 letters, digits, '.', '_' or '-'", "id")
    return value


def if_match(req: func.HttpRequest) -> str | None:
    """`If-Match`, or for the reference sample's clients a request header named `ETag`."""
    value = str(req.headers.get("if-match") or req.headers.get("etag") or "").strip()
    return None if value in ("", "*") else value


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


def _no_content(result: Versioned) -> func.HttpResponse:
    return func.HttpResponse(status_code=204, headers={"ETag": result.etag})


def create_contact(
    req: func.HttpRequest, service: ContactService, trace: TraceContext | None = None
) -> func.HttpResponse:
    command = read_body(req, CreateContact)
    result = service.create(command, traceparent=traceparent(req, trace))
    return _contact(result, status=201,
                    extra={"Location": f"/api/contacts/{result.contact.id}"})


def get_contact(req: func.HttpRequest, service: ContactService) -> func.HttpResponse:
    result = service.get(contact_id(req))
    if (req.headers.get("if-none-match") or "").strip() == result.etag:
        return func.HttpResponse(status_code=304, headers={"ETag": result.etag})
    return _contact(result)


def list_contacts(req: func.HttpRequest, service: ContactService) -> func.HttpResponse:
    raw = req.params.get("pageSize")
    page_size = DEFAULT_PAGE_SIZE
    if raw is not None:
        if not raw.isdigit() or not 1 <= int(raw) <= MAX_PAGE_SIZE:
            raise bad_request(f"pageSize must be an integer 1..{MAX_PAGE_SIZE}", "pageSize")
        page_size = int(raw)
    token = req.params.get("continuationToken") or req.headers.get("x-continuation-token")
    page = ContactPage.of(service.list_page(page_size=page_size, continuation=token or None))
    headers = {"X-Continuation-Token": page.continuation_token} if page.continuation_token else {}
    return json_response(page, headers=headers)


def patch_contact(
    req: func.HttpRequest, service: ContactService, trace: TraceContext | None = None
) -> func.HttpResponse:
    cid = contact_id(req)
    command = read_body(req, PatchContact)
    return _contact(service.patch(cid, command, if_match=if_match(req),
                                  traceparent=traceparent(req, trace)))


def update_name(
    req: func.HttpRequest, service: ContactService, trace: TraceContext | None = None
) -> func.HttpResponse:
    cid = contact_id(req)
    command = read_body(req, UpdateName)
    return _no_content(service.update_name(cid, command, if_match=if_match(req),
                                           traceparent=traceparent(req, trace)))


def update_email(
    req: func.HttpRequest, service: ContactService, trace: TraceContext | None = None
) -> func.HttpResponse:
    cid = contact_id(req)
    command = read_body(req, UpdateEmail)
    return _no_content(service.update_email(cid, command, if_match=if_match(req),
                                            traceparent=traceparent(req, trace)))


def update_description(
    req: func.HttpRequest, service: ContactService, trace: TraceContext | None = None
) -> func.HttpResponse:
    cid = contact_id(req)
    command = read_body(req, UpdateDescription)
    return _no_content(service.update_description(cid, command, if_match=if_match(req),
                                                  traceparent=traceparent(req, trace)))


def update_company(
    req: func.HttpRequest, service: ContactService, trace: TraceContext | None = None
) -> func.HttpResponse:
    cid = contact_id(req)
    command = read_body(req, UpdateCompany)
    return _no_content(service.update_company(cid, command, if_match=if_match(req),
                                              traceparent=traceparent(req, trace)))


def delete_contact(
    req: func.HttpRequest, service: ContactService, trace: TraceContext | None = None
) -> func.HttpResponse:
    cid = contact_id(req)
    return _no_content(service.delete(cid, if_match=if_match(req),
                                      traceparent=traceparent(req, trace)))
