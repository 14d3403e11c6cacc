"""The re-drive's routes: stored events published again under MessageIds of their own, as a bulk
operation (`redrive/operation`: answered at once, worked in batches by whoever runs the relay)
or a page per request (`redrive`: the caller sends each page's continuation token back), and the
preview of a re-drive before it is confirmed."""

from __future__ import annotations

from typing import Any

from cosmos_outbox.http import HttpCall, Reply
from cosmos_outbox.operations import Operation, RedrivePage, RedrivePreview
from cosmos_outbox_operators._routes._context import Routes
from cosmos_outbox_operators._routes.models import RedriveScope


def declare(routes: Routes) -> None:
    operations, request = routes.operations, routes.models.redrive_request

    @routes.post("redrive", RedrivePage, status=202, request=request)
    async def redrive_events(call: HttpCall[Any]) -> Reply:
        """Operators: publish again the stored events created at or after `since` (of one
        aggregate type, and one aggregate, if given; to one subscription if given), per
        aggregate in version order, one page per request (the next with the answer's
        continuationToken; POST redrive/operation re-drives them all as a bulk operation),
        each under a MessageId of its own that the topic's duplicate detection cannot drop
        (the event id stays its CloudEvents id); the answer counts what the topic accepted and
        what subscribers will apply"""
        body = call.body
        redrive = operations().redrive
        return Reply(
            await redrive.page(
                **_scope(body), page_size=body.page_size, continuation=body.continuation_token
            )
        )

    @routes.post("redrive/operation", Operation, status=202, request=routes.models.redrive_scope)
    async def redrive_events_operation(call: HttpCall[Any]) -> Reply:
        """Operators: re-drive the stored events of this scope as a bulk operation (answered at
        once; whoever runs the relay sends them in batches, each event once under a MessageId
        of its own: GET operations/{operationId}); the events stored when it begins"""
        return Reply(await operations().bulk.start_redrive(**_scope(call.body)))

    @routes.post("redrive/preview", RedrivePreview, request=request)
    async def preview_redrive(call: HttpCall[Any]) -> Reply:
        """Operators: what a re-drive of this scope would send, before it is confirmed: the
        stored events (how many, of how many aggregates, the first of them), those left out
        (discarded, cancelled), the pages, and per subscription what it receives and what its
        subscriber would apply; nothing is sent, and a scope the re-drive would refuse is
        refused here"""
        return Reply(
            await operations().redrive.preview(**_scope(call.body), page_size=call.body.page_size)
        )


def _scope(body: RedriveScope) -> dict[str, Any]:
    """What a re-drive request names (the app's model says its aggregate: `scope`)."""
    aggregate_type, aggregate_id = body.scope
    return {
        "since": body.since,
        "aggregate_type": aggregate_type,
        "aggregate_id": aggregate_id,
        "subscription": body.subscription,
    }
