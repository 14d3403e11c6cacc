"""Each HTTP operation declared once: an `HttpOperation` holds every fact of one route (function
name, route, method, auth level, summary, request model, success status, response model and
headers, query parameters, whether it is paged, whether preconditions apply, whether it takes an
`Idempotency-Key`, the errors it may answer, and what it does to an aggregate when the route
helper declared it). The request pipeline (`_pipeline`) reads it on every call, the 404/405
fallback and the OpenAPI document read the declarations of the indexed functions
(`operation_of`): no fact is stated twice."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import azure.functions as func
from pydantic import BaseModel, TypeAdapter

from cosmos_outbox._domain import Aggregate
from cosmos_outbox.http._models import ID_MAX_LENGTH, ID_PATTERN
from cosmos_outbox.http._paging import TOKEN_PATTERN
from cosmos_outbox.http.bounded import BOUND_SECONDS

#: The Functions key may travel in the query as `code` (Azure reads it; the app ignores it).
KEY_PARAMETER = "code"
DEFAULT_PAGE_SIZE = 10
MAX_PAGE_SIZE = 100
#: The attribute of an indexed function that holds its declaration.
ATTRIBUTE = "__http_operation__"
#: Set (True) on an HTTP function that serves a page or its files, not an API operation (the
#: operators' console page): the OpenAPI document leaves it out; the fallback still knows it.
PAGE_ATTRIBUTE = "__http_page__"


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
    "X-Continuation-Token",
    "The token of the next page; absent on the last page",
    _TOKEN_SCHEMA,
    required=False,
)
#: The paging parameters of a paged operation (they are read by `HttpCall.cursor`).
PAGING_PARAMETERS = ("pageSize", "continuationToken")


@dataclass(frozen=True)
class Command:
    """What an operation of the route helper does to an aggregate of type `aggregate`: create
    one (`apply` builds it from the body) or change one (`apply(aggregate, **changes)`, the
    keyword arguments being the fields the client sent unless `changes` derives them from the
    body otherwise)."""

    aggregate: type[Aggregate]
    verb: Literal["create", "change"]
    apply: Callable[..., object]
    changes: Callable[[Any], Mapping[str, Any] | Awaitable[Mapping[str, Any]]] | None = None

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
    #: answers within `bound_seconds` (503 + Retry-After past it): the handler runs bounded
    bounded: bool = False
    #: the bound of a `bounded` operation, in seconds (`cosmos_outbox.http.bounded`)
    bound_seconds: float = BOUND_SECONDS
    #: what the operation does to an aggregate, when the route helper declared it
    #: (`cosmos_outbox.http._aggregate_routes`): the testing kit checks it against the aggregate
    command: Command | None = None
    #: the conditional headers are required on a write: without them, 428
    precondition_required: bool = False
    #: a write that takes an `Idempotency-Key` (`cosmos_outbox.http._idempotency_key`): its retries
    #: with the key answer what it answered; another request with the key answers 422
    idempotent: bool = False
    #: the reference sample's `ETag` request header is read as If-Match when there is none (an
    #: app whose older clients send it opts in: `HttpApi(etag_request_header=True)`)
    etag_request_header: bool = False
    #: the OpenAPI security schemes that admit a request, when not the auth level's (the
    #: operators' doors: the master key in its header only; a signed-in operator)
    security: tuple[str, ...] | None = None

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


def operation_of(user_function: object) -> HttpOperation | None:
    """The declaration of an indexed function's user function (None for the fallback and for
    functions that are not declared operations)."""
    found = getattr(user_function, ATTRIBUTE, None)
    return found if isinstance(found, HttpOperation) else None


def is_page(user_function: object) -> bool:
    """Whether an indexed function serves a page or its files (the operators' console), not an
    API operation: the OpenAPI document leaves it out."""
    return bool(getattr(user_function, PAGE_ATTRIBUTE, False))
