"""The subscribers' routes: per watched subscription, its dead letters and what the library's
subscriber there holds, why, and the gaps it accepted; and giving one version up there."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from cosmos_outbox.http import HttpCall, Identifier, Reply, RequestModel
from cosmos_outbox.operations import Released, Subscribers
from cosmos_outbox_operators._routes._context import Routes
from cosmos_outbox_operators._types import AggregateType, OperatorReason


class ReleaseRequest(RequestModel):
    """Give one version of an aggregate up at one subscription, and why."""

    aggregate_type: AggregateType
    aggregate_id: Identifier
    version: Annotated[int, Field(ge=1)]
    reason: OperatorReason


def declare(routes: Routes) -> None:
    operations = routes.operations

    @routes.get("subscribers", Subscribers, errors=(400, 429, 500, 503))
    async def subscribers_status(call: HttpCall[None]) -> Reply:
        """Operators: per watched subscription, its dead letters and, where the app knows the
        subscriber's projection container, what it holds, why, and what releases it, and the
        gaps it accepted"""
        return Reply(await operations().subscribers.status())

    @routes.post("subscribers/{subscription}/release", Released, request=ReleaseRequest)
    async def release_held(call: HttpCall[Any]) -> Reply:
        """Operators: give one version of an aggregate up at one subscription (its discard
        notice, to that subscription only): the subscriber records an accepted gap and applies
        the versions it held after it"""
        subscribers = operations().subscribers
        return Reply(await subscribers.release(call.path["subscription"], **dict(call.body)))
