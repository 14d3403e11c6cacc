"""Each HTTP operation declared once, next to its handler.

An `HttpOperation` holds every fact of one route: function name, route, method, auth level,
summary, request model, success status, response model and headers, query parameters, whether it
is paged, whether preconditions apply, whether it takes an `Idempotency-Key`, and the errors it
may answer. `HttpApi.operation`
registers the handler on a blueprint from that declaration (the indexed metadata), and the
function it registers reads the same declaration on every call: unknown query parameters, path
parameters, declared query values, preconditions and the body are parsed and checked (4xx
problems) before the handler runs, and the handler's `Reply` gets the declared status. The
404/405 fallback and the OpenAPI document read the declarations of the indexed functions
(`operation_of`), so no fact is stated twice.

The function the worker indexes takes `(req, context)` and returns an `HttpResponse`; every
error leaves it as a problem document, never a stack trace.
"""

from __future__ import annotations

import contextvars
import json
import logging
import re
import secrets
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import azure.functions as func
from pydantic import BaseModel, TypeAdapter, ValidationError

from cosmos_outbox._callables import not_awaitable, refuse_async
from cosmos_outbox._domain import Aggregate
from cosmos_outbox.errors import InvalidContinuationError
from cosmos_outbox.http._conditional import MalformedConditionError, Preconditions
from cosmos_outbox.http._idempotency_key import KEY_HEADER, parse_key
from cosmos_outbox.http._models import ID_MAX_LENGTH, ID_PATTERN
from cosmos_outbox.http._paging import TOKEN_PATTERN, Cursor, TokenCodec
from cosmos_outbox.http._problems import (
    HttpProblemError,
    bad_request,
    field_errors,
    from_exception,
    json_response,
)
from cosmos_outbox.http._requests import parse_body

logger = logging.getLogger(__name__)

#: The Functions key may travel in the query as `code` (Azure reads it; the app ignores it).
KEY_PARAMETER = "code"
DEFAULT_PAGE_SIZE = 10
MAX_PAGE_SIZE = 100
_PAGE_SIZE = re.compile(r"[0-9]{1,4}")
_TRACEPARENT = re.compile(r"00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")
#: The attribute of an indexed function that holds its declaration.
_ATTRIBUTE = "__http_operation__"
#: A bounded operation (/health, the operators' routes) answers within this many seconds
#: whatever the store or the broker does: past it, 503 with Retry-After (`run_bounded`).
BOUND_SECONDS = 4.0
#: The Retry-After of a bounded operation that ran out of time.
BOUND_RETRY_AFTER_SECONDS = 5


@dataclass(frozen=True)
class PathParameter:
    """A `{name}` segment of a route: an identifier (`cosmos_outbox.http._models.ID_PATTERN`)."""

    name: str
    #: what it names, as an error says it: "the order id"
    what: str
    pattern: str = ID_PATTERN
    max_length: int = ID_MAX_LENGTH

    @property
    def schema(self) -> dict[str, Any]:
        return {"type": "string", "pattern": self.pattern, "maxLength": self.max_length}


@dataclass(frozen=True)
class QueryParameter:
    """A declared query parameter: its value validated by `adapter` (400 naming it)."""

    name: str
    adapter: TypeAdapter[Any]
    description: str
    required: bool = False
    #: the detail of the 400 when a required one is missing
    missing: str = ""

    @property
    def schema(self) -> dict[str, Any]:
        return self.adapter.json_schema()


@dataclass(frozen=True)
class ResponseHeader:
    """A header of the success response."""

    name: str
    description: str
    schema: Mapping[str, Any]
    required: bool = True


_TOKEN_SCHEMA = {"type": "string", "pattern": TOKEN_PATTERN}
#: The response header that carries the next page's token (paged operations).
CONTINUATION_HEADER = ResponseHeader(
    "X-Continuation-Token", "The token of the next page; absent on the last page",
    _TOKEN_SCHEMA, required=False)
#: The paging parameters of a paged operation (they are read by `HttpCall.cursor`).
PAGING_PARAMETERS = ("pageSize", "continuationToken")


@dataclass(frozen=True)
class Command:
    """What an operation of the route helper does to an aggregate of type `aggregate`: create
    one (`apply` builds it from the body) or change one (`apply(aggregate, **changes)`, the
    keyword arguments being the fields the client sent unless `changes` derives them from the
    body otherwise)."""

    aggregate: type[Aggregate]
    kind: str  # "create" | "change"
    apply: Callable[..., object]
    changes: Callable[[Any], Mapping[str, Any]] | None = None

    @property
    def derived(self) -> bool:
        """The keyword arguments are derived from the body by `changes`."""
        return self.changes is not None


@dataclass(frozen=True)
class HttpOperation:
    """Every fact of one HTTP operation."""

    name: str
    route: str
    method: str
    auth_level: func.AuthLevel
    summary: str
    status: int
    request: type[BaseModel] | None = None
    response: type[BaseModel] | None = None
    #: the success body's schema when it is not a model (health, the OpenAPI document)
    response_schema: Mapping[str, Any] | None = None
    query: tuple[QueryParameter, ...] = ()
    paged: bool = False
    conditional: bool = False
    headers: tuple[ResponseHeader, ...] = ()
    errors: tuple[int, ...] = ()
    path: tuple[PathParameter, ...] = ()
    #: answers within BOUND_SECONDS (503 + Retry-After past it): the handler runs bounded
    bounded: bool = False
    #: what the operation does to an aggregate, when the route helper declared it
    #: (`cosmos_outbox.http._routes`): the testing kit checks it against the aggregate
    command: Command | None = None
    #: the conditional headers are required on a write: without them, 428
    precondition_required: bool = False
    #: a write that takes an `Idempotency-Key` (`cosmos_outbox.http._idempotency_key`): its retries
    #: with the key answer what it answered; another request with the key answers 422
    idempotent: bool = False

    @property
    def declared_errors(self) -> tuple[int, ...]:
        """`errors`, with 422 (a key used for another request) on an idempotent operation."""
        if self.idempotent and 422 not in self.errors:
            return tuple(sorted((*self.errors, 422)))
        return self.errors

    @property
    def allowed_query(self) -> frozenset[str]:
        names = {q.name for q in self.query} | {KEY_PARAMETER}
        return frozenset(names | (set(PAGING_PARAMETERS) if self.paged else set()))

    @property
    def not_modified(self) -> bool:
        """A conditional read answers 304 when If-None-Match matches."""
        return self.conditional and self.method in ("GET", "HEAD")

    @property
    def success_headers(self) -> tuple[ResponseHeader, ...]:
        return self.headers + ((CONTINUATION_HEADER,) if self.paged else ())


@dataclass(frozen=True)
class Reply:
    """What a handler answers: a body (a model, or JSON-able data), headers, and the status when
    it is not the operation's success status (304)."""

    body: BaseModel | Mapping[str, Any] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    status: int | None = None


@dataclass(frozen=True)
class HttpCall[B]:
    """One request, parsed and checked against its operation's declaration."""

    request: func.HttpRequest
    context: func.Context | None
    operation: HttpOperation
    path: Mapping[str, str]
    query: Mapping[str, Any]
    preconditions: Preconditions
    body: B
    page_size: int = DEFAULT_PAGE_SIZE
    #: the `Idempotency-Key` sent to an idempotent operation (None when none was sent)
    idempotency_key: str | None = None

    @property
    def write_preconditions(self) -> Preconditions | None:
        """The preconditions of a write (If-Match, its `ETag` alias and If-None-Match); None
        when the request has none."""
        return None if self.preconditions.unconditional else self.preconditions

    @property
    def traceparent(self) -> str:
        """The W3C trace context carried into the events: the invocation's (the host's
        `context.trace_context`, which continues the caller's), else the request's `traceparent`
        header, else a new one. So the events of one request share its trace."""
        trace = self.context.trace_context if self.context is not None else None
        candidates = (trace.trace_parent if trace is not None else None,
                      self.request.headers.get("traceparent"))
        for candidate in candidates:
            value = (candidate or "").strip().lower()
            if _TRACEPARENT.fullmatch(value) and value[3:35] != "0" * 32:
                return value
        return f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01"

    def cursor(self, tokens: TokenCodec) -> Cursor | None:
        """The page token from the query or the `x-continuation-token` header (the same one if
        both), opened with `tokens`; 400 for anything the API did not issue."""
        query = self.request.params.get("continuationToken")
        header = self.request.headers.get("x-continuation-token")
        if query is not None and header is not None and query != header:
            raise bad_request("continuationToken and x-continuation-token differ; send one",
                              "continuationToken")
        token = query if query is not None else header
        if token is None:
            return None
        try:
            return tokens.decode(token)
        except InvalidContinuationError:
            raise bad_request("the continuation token is not valid: pass back a "
                              "continuationToken this API returned, unchanged",
                              "continuationToken") from None


type Handler = Callable[[HttpCall[Any]], Reply | func.HttpResponse]


class HttpApi:
    """The HTTP operations of one blueprint. `parameters` declares the route parameters its
    routes use (by name), `auth_level` the default auth level of its operations."""

    def __init__(self, blueprint: func.Blueprint, *,
                 parameters: Mapping[str, PathParameter] | None = None,
                 auth_level: func.AuthLevel = func.AuthLevel.FUNCTION,
                 bounded: bool = False) -> None:
        self.blueprint = blueprint
        self._parameters = dict(parameters or {})
        self._auth_level = auth_level
        self._bounded = bounded

    def operation(
        self,
        *,
        route: str,
        method: str,
        summary: str,
        status: int,
        errors: tuple[int, ...],
        name: str | None = None,
        auth_level: func.AuthLevel | None = None,
        request: type[BaseModel] | None = None,
        response: type[BaseModel] | None = None,
        response_schema: Mapping[str, Any] | None = None,
        query: tuple[QueryParameter, ...] = (),
        paged: bool = False,
        conditional: bool = False,
        headers: tuple[ResponseHeader, ...] = (),
        bounded: bool | None = None,
        command: Command | None = None,
        precondition_required: bool = False,
        idempotent: bool = False,
    ) -> Callable[[Handler], Handler]:
        """Declare an operation and register its handler (the function name is `name`, else
        the handler's). A `bounded` operation (default: the API's) answers within
        BOUND_SECONDS."""

        def register(handler: Handler) -> Handler:
            refuse_async(handler, "the handler")
            names = re.findall(r"{([^}*]+)}", route)
            unknown = [n for n in names if n not in self._parameters]
            if unknown:
                raise ValueError(f"route {route!r} uses undeclared parameters {unknown}")
            operation = HttpOperation(
                name=name or handler.__name__, route=route, method=method.upper(),
                auth_level=auth_level or self._auth_level, summary=summary, status=status,
                request=request, response=response, response_schema=response_schema,
                query=query, paged=paged, conditional=conditional, headers=headers,
                errors=errors, path=tuple(self._parameters[n] for n in names),
                bounded=self._bounded if bounded is None else bounded, command=command,
                precondition_required=precondition_required, idempotent=idempotent)
            entry = _entry(operation, handler)
            self.blueprint.route(route=route, methods=[operation.method],
                                 auth_level=operation.auth_level)(entry)
            return handler

        return register

    def fallback(self, handler: Callable[[func.HttpRequest], func.HttpResponse]) -> None:
        """Register the lowest-precedence catch-all (`{*path}`, every method, anonymous): the
        host ranks catch-all routes below every other route, locally and in Azure."""

        def not_routed(req: func.HttpRequest) -> func.HttpResponse:
            try:
                return handler(req)
            except Exception as exc:  # the boundary: translate everything
                return from_exception(exc).response()

        self.blueprint.route(route="{*path}", methods=None,
                             auth_level=func.AuthLevel.ANONYMOUS)(not_routed)


def operation_of(user_function: object) -> HttpOperation | None:
    """The declaration of an indexed function's user function (None for the fallback and for
    functions that are not declared operations)."""
    found = getattr(user_function, _ATTRIBUTE, None)
    return found if isinstance(found, HttpOperation) else None


def _entry(operation: HttpOperation, handler: Handler) -> Callable[..., func.HttpResponse]:
    def entry(req: func.HttpRequest, context: func.Context) -> func.HttpResponse:
        try:
            call = _parse(operation, req, context)
            result = not_awaitable(
                run_bounded(lambda: handler(call), what=operation.name) if operation.bounded
                else handler(call), handler, "the handler")
            if isinstance(result, func.HttpResponse):
                return result
            return _respond(operation, result)
        except Exception as exc:  # the boundary: translate everything
            return from_exception(exc).response()

    entry.__name__ = entry.__qualname__ = operation.name
    entry.__module__ = handler.__module__
    entry.__doc__ = operation.summary
    setattr(entry, _ATTRIBUTE, operation)
    return entry


def run_bounded[T](work: Callable[[], T], *, what: str) -> T:
    """`work()`'s result or error, if it ends within BOUND_SECONDS; else 503 with Retry-After
    (HttpProblemError). It runs on a thread of its own, in this call's context (trace, logging);
    past the bound it is left to finish on its own: the store's and the broker's clients bound
    each of their calls, and the operators' actions may be repeated (a replayed event that is
    resolved is not sent again; the topic drops a re-driven event it has)."""
    seconds = BOUND_SECONDS
    outcome: list[tuple[bool, Any]] = []

    def run() -> None:
        try:
            outcome.append((True, work()))
        except BaseException as exc:  # handed to the request's thread
            outcome.append((False, exc))

    context = contextvars.copy_context()
    thread = threading.Thread(target=context.run, args=(run,), name=f"bounded-{what}",
                              daemon=True)
    thread.start()
    thread.join(seconds)
    if not outcome:
        logger.warning("%s did not complete within %g s: 503", what, seconds,
                       extra={"http.operation": what, "bound_seconds": seconds})
        raise HttpProblemError(
            503, "Service Unavailable",
            f"the store or the message broker did not answer within {seconds:g} s; retry later",
            headers={"Retry-After": str(BOUND_RETRY_AFTER_SECONDS)})
    ok, value = outcome[0]
    if not ok:
        raise value
    return cast(T, value)


def _parse(operation: HttpOperation, req: func.HttpRequest,
           context: func.Context | None) -> HttpCall[Any]:
    """Query names, path parameters, declared query values, page size, preconditions, the
    Idempotency-Key, body: in this order, the first fault answers."""
    for name in req.params:
        if name not in operation.allowed_query:
            raise bad_request(f"unknown query parameter {json.dumps(name)}", name)
    path = {p.name: _path_value(req, p) for p in operation.path}
    query = {q.name: value for q in operation.query
             if (value := _query_value(req, q)) is not None}
    page_size = _page_size(req) if operation.paged else DEFAULT_PAGE_SIZE
    preconditions = _preconditions(req) if operation.conditional else Preconditions()
    if operation.precondition_required and preconditions.if_match is None:
        raise HttpProblemError(
            428, "Precondition Required",
            "this change needs If-Match (or ETag) with the ETag you read: read the resource, "
            "then send its ETag")
    key = parse_key(req.headers.get(KEY_HEADER)) if operation.idempotent else None
    body = None
    if operation.request is not None:
        body = parse_body(req.get_body() or b"", req.headers.get("content-type"),
                          operation.request)
    return HttpCall(request=req, context=context, operation=operation, path=path, query=query,
                    preconditions=preconditions, body=body, page_size=page_size,
                    idempotency_key=key)


def _path_value(req: func.HttpRequest, parameter: PathParameter) -> str:
    value = str(req.route_params.get(parameter.name, ""))
    if len(value) > parameter.max_length or not re.fullmatch(parameter.pattern, value):
        raise bad_request(f"{parameter.what} must be 1-{parameter.max_length} letters, digits, "
                          "'.', '_' or '-', starting with a letter or digit", parameter.name)
    return value


def _query_value(req: func.HttpRequest, parameter: QueryParameter) -> Any:
    raw = req.params.get(parameter.name)
    if raw is None:
        if parameter.required:
            raise bad_request(parameter.missing or f"{parameter.name} is required",
                              parameter.name)
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


def _preconditions(req: func.HttpRequest) -> Preconditions:
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


def _respond(operation: HttpOperation, reply: Reply) -> func.HttpResponse:
    status = reply.status if reply.status is not None else operation.status
    headers = dict(reply.headers)
    if reply.body is None:
        return func.HttpResponse(status_code=status, headers=headers)
    return json_response(reply.body if isinstance(reply.body, BaseModel)
                         else cast(Any, reply.body), status=status, headers=headers)
