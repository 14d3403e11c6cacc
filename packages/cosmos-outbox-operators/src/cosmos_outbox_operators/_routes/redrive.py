"""The re-drive's routes: stored events published again under MessageIds of their own, a page
at a time, and the preview of a re-drive before it is confirmed."""

from __future__ import annotations

from typing import Any

from cosmos_outbox.http import HttpCall, Reply
from cosmos_outbox.operations import RedrivePage, RedrivePreview
from cosmos_outbox_operators._routes._context import Routes
from cosmos_outbox_operators._types import BODY_ERRORS


def declare(routes: Routes) -> None:
    prefix, operations, operation = routes.prefix, routes.operations, routes.operation
    request = routes.models.redrive_request

    @operation(
        route=f"{prefix}/redrive",
        method="POST",
        status=202,
        summary="Operators: publish again the stored events created at or after `since` (of "
        "one aggregate type, and one aggregate, if given; to one subscription if given), per "
        "aggregate in version order, a page at a time, each under a MessageId of its own that "
        "the topic's duplicate detection cannot drop (the event id stays its CloudEvents id); "
        "the answer counts what the topic accepted and what subscribers will apply",
        request=request,
        response=RedrivePage,
        errors=BODY_ERRORS,
    )
    async def redrive_events(call: HttpCall[Any]) -> Reply:
        body = call.body
        aggregate_type, aggregate_id = body.scope
        page = await operations().redrive.page(
            body.since,
            aggregate_type=aggregate_type,
            aggregate_id=aggregate_id,
            subscription=body.subscription,
            page_size=body.page_size,
            continuation=body.continuation_token,
        )
        return Reply(page)

    @operation(
        route=f"{prefix}/redrive/preview",
        method="POST",
        status=200,
        summary="Operators: what a re-drive of this scope would send, before it is confirmed: "
        "the stored events (how many, of how many aggregates, the first of them), those left "
        "out (discarded, cancelled), the pages, and per subscription what it receives and what "
        "its subscriber would apply; nothing is sent, and a scope the re-drive would refuse is "
        "refused here",
        request=request,
        response=RedrivePreview,
        errors=BODY_ERRORS,
    )
    async def preview_redrive(call: HttpCall[Any]) -> Reply:
        body = call.body
        aggregate_type, aggregate_id = body.scope
        preview = await operations().redrive.preview(
            body.since,
            aggregate_type=aggregate_type,
            aggregate_id=aggregate_id,
            subscription=body.subscription,
            page_size=body.page_size,
        )
        return Reply(preview)
