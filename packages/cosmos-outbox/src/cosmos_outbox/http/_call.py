"""One request as a handler sees it (`HttpCall`: parsed and checked against its operation's
declaration), what a handler answers (`Reply`), and the handler's type. A module of its own:
the pipeline (`_pipeline`) builds calls, and the helpers a handler uses (`_idempotency_key`)
read them, without importing each other."""

from __future__ import annotations

import re
import secrets
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeAlias, TypeVar

import azure.functions as func
from pydantic import BaseModel

from cosmos_outbox.errors import InvalidContinuationError
from cosmos_outbox.http._conditional import Preconditions
from cosmos_outbox.http._declaration import DEFAULT_PAGE_SIZE, HttpOperation
from cosmos_outbox.http._paging import Cursor, TokenCodec
from cosmos_outbox.http._problems import bad_request

B = TypeVar("B")

_TRACEPARENT = re.compile(r"00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")


@dataclass(frozen=True)
class Reply:
    """What a handler answers: a body (a model, or JSON-able data), headers, and the status when
    it is not the operation's success status (304)."""

    body: BaseModel | Mapping[str, Any] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    status: int | None = None


@dataclass(frozen=True)
class HttpCall(Generic[B]):
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
        candidates = (
            trace.trace_parent if trace is not None else None,
            self.request.headers.get("traceparent"),
        )
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
            raise bad_request(
                "continuationToken and x-continuation-token differ; send one", "continuationToken"
            )
        token = query if query is not None else header
        if token is None:
            return None
        try:
            return tokens.decode(token)
        except InvalidContinuationError:
            raise bad_request(
                "the continuation token is not valid: pass back a "
                "continuationToken this API returned, unchanged",
                "continuationToken",
            ) from None


#: A handler: a plain function, or an async one (awaited).
Handler: TypeAlias = Callable[
    [HttpCall[Any]], Reply | func.HttpResponse | Awaitable[Reply | func.HttpResponse]
]
