"""The failure groups' routes: the quarantined events and dead letters grouped by cause, and a
whole group retried or discarded (previewed first) through the same use cases as one row: a
bulk operation, answered 202 at once and worked by whoever runs the relay
(`cosmos_outbox.operations.Operations.groups`, `.bulk`)."""

from __future__ import annotations

from typing import Any, Literal, Self

from pydantic import ConfigDict, model_validator

from cosmos_outbox.http import HttpCall, Reply, omit_null_defaults
from cosmos_outbox.operations import FailureGroups, GroupOutcome, Operation
from cosmos_outbox_operators._routes._context import Routes
from cosmos_outbox_operators._routes.operations import CanaryOptions
from cosmos_outbox_operators._types import OperatorReason


class GroupAction(CanaryOptions):
    """What to do with a failure group: `retry` (a quarantined event replayed, a dead letter
    resubmitted; `canary` of them first) or `discard` (given up, with `reason`, required then:
    the schema says so too)."""

    model_config = ConfigDict(
        json_schema_extra=omit_null_defaults(
            {
                "oneOf": [
                    {"properties": {"action": {"const": "retry"}}},
                    {"properties": {"action": {"const": "discard"}}, "required": ["reason"]},
                ]
            }
        )
    )

    action: Literal["retry", "discard"]
    reason: OperatorReason | None = None

    @model_validator(mode="after")
    def _reason(self) -> Self:
        if self.action == "discard" and not self.reason:
            raise ValueError("reason is required to discard: say why the group is given up")
        return self


def declare(routes: Routes) -> None:
    operations = routes.operations

    @routes.get("groups", FailureGroups, errors=(400, 429, 500, 503))
    async def list_groups(call: HttpCall[None]) -> Reply:
        """Operators: the quarantined events and dead letters grouped by cause (exception type
        and normalised message, subscription, event type), each with its count and when it was
        first and last seen, the largest first"""
        return Reply(await operations().groups.groups())

    @routes.post("groups/{groupId}/preview", GroupOutcome, request=GroupAction)
    async def preview_group(call: HttpCall[Any]) -> Reply:
        """Operators: what a retry or discard of a failure group would do, before it is
        confirmed: how many of its events, what subscribers will see and what each subscription
        receives; nothing is sent or removed"""
        body = call.body
        outcome = await operations().groups.preview(
            call.path["groupId"], body.action, reason=body.reason
        )
        return Reply(outcome)

    @routes.post("groups/{groupId}/act", Operation, status=202, request=GroupAction)
    async def act_on_group(call: HttpCall[Any]) -> Reply:
        """Operators: retry or discard a failure group through the same use cases as one row,
        as a bulk operation (answered at once; whoever runs the relay works it in batches: GET
        operations/{operationId} says how far it is); a retry sends `canary` events first
        (default 5) and goes on only once they are not seen failing again; each event's action
        is audited, and the operation's once, with its counts"""
        body = call.body
        operation = await operations().bulk.start_group(
            call.path["groupId"],
            body.action,
            reason=body.reason,
            canary=body.canary,
            canary_wait_seconds=body.canary_wait_seconds,
        )
        return Reply(operation)
