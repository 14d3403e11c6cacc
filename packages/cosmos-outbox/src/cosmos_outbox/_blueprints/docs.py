"""The app's own pages as a Functions blueprint: `/health` (anonymous; pings the store),
`/openapi.json` (anonymous; generated from the indexed functions' declarations) and the
lowest-precedence catch-all that answers every request no function takes with a problem
document (404, or 405 with `Allow` from the app's own routes), so Azure and the local host
answer alike."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from functools import cache
from typing import TYPE_CHECKING, Any

import azure.functions as func
from azure.functions.decorators.function_app import Function

from cosmos_outbox._domain import Aggregate
from cosmos_outbox.http._api import HttpApi
from cosmos_outbox.http._call import HttpCall, Reply
from cosmos_outbox.http._openapi import openapi_document
from cosmos_outbox.http._routing import fallback, http_routes
from cosmos_outbox.http.bounded import BOUND_SECONDS

if TYPE_CHECKING:
    pass

_HEALTHY = {
    "type": "object",
    "properties": {
        "status": {"enum": ["healthy", "degraded"]},
        "relay": {
            "type": "object",
            "description": "degraded: what the relay is stuck on",
            "properties": {
                "eventId": {"type": ["string", "null"]},
                "reason": {"type": "string"},
                "since": {"type": ["string", "null"]},
                "attempts": {"type": "integer"},
            },
        },
    },
    "required": ["status"],
}


def docs_blueprint(
    functions: Callable[[], Sequence[Function]],
    *,
    health_answer: Callable[[], Awaitable[dict[str, Any]]],
    title: str,
    description: str,
    aggregates: Iterable[type[Aggregate]] = (),
    asynchronous: bool = False,
    bound_seconds: float = BOUND_SECONDS,
) -> func.Blueprint:
    """Health, the OpenAPI document and the fallback of an app whose indexed functions
    `functions()` gives; `health_answer` is /health's answer (the operations'
    `status.health()`: the store answers, else 503; 200 "degraded" with what the relay is stuck
    on when it says it is blocked: the API works, the events wait); the document describes the
    events of `aggregates`. `asynchronous`: /health is an `async def` function; it answers
    within `bound_seconds`."""
    api = HttpApi(auth_level=func.AuthLevel.ANONYMOUS, bound_seconds=bound_seconds)
    bp = api.blueprint
    documented = tuple(aggregates)

    @cache
    def document() -> dict[str, Any]:
        return openapi_document(
            functions(), title=title, description=description, aggregates=documented
        )

    @api.operation(
        route="health",
        method="GET",
        status=200,
        summary=f"Health: checks the store (answers within {bound_seconds:g} s: "
        "503 when the store fails or does not answer)",
        response_schema=_HEALTHY,
        errors=(400, 500, 503),
        bounded=True,
        asynchronous=asynchronous,
    )
    async def health(call: HttpCall[None]) -> Reply:
        return Reply(await health_answer())

    @api.operation(
        route="openapi.json",
        method="GET",
        status=200,
        summary="This document",
        response_schema={"type": "object"},
        errors=(400,),
        asynchronous=False,
    )
    def openapi(call: HttpCall[None]) -> Reply:
        return Reply(document())

    routes = cache(lambda: http_routes(functions()))
    api.fallback(lambda req: fallback(req, routes()))
    return bp
