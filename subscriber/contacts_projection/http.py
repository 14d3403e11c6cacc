"""The projection over HTTP, on cosmos-outbox's HTTP layer (`cosmos_outbox.http.HttpApi`: each
operation declared once; its request pipeline, problem documents and sealed paging tokens),
served by `async def` functions on the reads' `aio` client:

- `GET projections/contacts/{id}`: 200 with the projection (`id`, `version`, `lastEventId`,
  `deleted`, `data`); 404 when there is none;
- `GET projections/contacts?pageSize=N` (1..100, default 10): 200 `{items, continuationToken,
  hasMore}`; the next page with `continuationToken` (query) or `x-continuation-token` (header),
  the token also in the `X-Continuation-Token` response header.

Errors are RFC 9457 problem documents: 400 for bad input (an id that is not one, a bad page
size or token, an unknown query parameter; only `code`, the function key, is let through), 404,
429/503 with Retry-After when the store throttles or fails. Never a traceback, never a 5xx for
what a client sends. Tokens are sealed (`TokenCodec`): the store sees only tokens this app
issued.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from contacts_projection.reads import ProjectionPage, ProjectionReads, ProjectionView
from cosmos_outbox.http import (
    HttpApi,
    HttpCall,
    HttpProblemError,
    PathParameter,
    Reply,
    TokenCodec,
    next_token,
)

CONTACT_ID = PathParameter("id", "the contact id")


def projection_routes(
    reads: Callable[[], ProjectionReads], tokens: Callable[[], TokenCodec]
) -> HttpApi:
    """The projection's routes (a function key in Azure), on `reads()`, paged with
    `tokens()`."""
    api = HttpApi(parameters={CONTACT_ID.name: CONTACT_ID})

    @api.operation(
        route="projections/contacts/{id}",
        method="GET",
        status=200,
        summary="Read a contact's projection",
        response=ProjectionView,
        errors=(400, 404, 429, 500, 503),
    )
    async def read_contact_projection(call: HttpCall[None]) -> Reply:
        found = await reads().get(call.path[CONTACT_ID.name])
        if found is None:
            raise HttpProblemError(
                404,
                "Not Found",
                "no projection of this contact (unknown, "
                "or its first event has not been applied yet)",
            )
        return Reply(_json(found))

    @api.operation(
        route="projections/contacts",
        method="GET",
        status=200,
        paged=True,
        summary="List the contacts' projections, one page at a time",
        response=ProjectionPage,
        errors=(400, 429, 500, 503),
    )
    async def list_contact_projections(call: HttpCall[None]) -> Reply:
        codec = tokens()
        cursor = call.cursor(codec)
        # a store token the store refuses (InvalidContinuationError) is a 400 too
        page = await reads().page(
            size=call.page_size, continuation=cursor.store_token if cursor else None
        )
        token = next_token(page.continuation_token, cursor, codec)
        return Reply(
            _json(ProjectionPage.of_items(list(page.items), token)),
            {"X-Continuation-Token": token} if token else {},
        )

    return api


def _json(body: BaseModel) -> dict[str, Any]:
    """The body as JSON data: answered with `json.dumps` (non-ASCII escaped), as before."""
    return body.model_dump(mode="json", by_alias=True)
