"""The failure groups' routes: the quarantined events and dead letters grouped by cause, and a
whole group retried or discarded (previewed first) through the same use cases as one row: a
bulk operation, answered 202 at once and worked by whoever runs the relay
(`cosmos_outbox.operations.Operations.groups`, `.bulk`)."""

from __future__ import annotations

from typing import Any, Literal, Self

from pydantic import ConfigDict, model_validator

from cosmos_outbox.http import HttpCall, Reply, ResponseHeader, omit_null_defaults
from cosmos_outbox.operations import FailureGroups, GroupOutcome, Operation, Unarchived
from cosmos_outbox_operators._preview import (
    PREVIEW_TOKEN_HEADER,
    PREVIEW_TOKEN_PATTERN,
    group_preview_token,
)
from cosmos_outbox_operators._routes._context import Routes
from cosmos_outbox_operators._routes.operations import CanaryOptions
from cosmos_outbox_operators._types import START_ERRORS, OperatorReason


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


def group_decision(group_id: str, body: GroupAction) -> dict[str, Any]:
    """What a group's action is asked, as its preview's token binds it: the group's id and the
    body's fields as sent (by their wire names; those left out, out)."""
    sent = body.model_dump(
        mode="json", by_alias=True, exclude_none=True, include=set(GroupAction.model_fields)
    )
    return {"groupId": group_id, **sent}


#: The preview's token (`cosmos_outbox_operators._preview`): what a caller that is not the
#: console's page (an agent, through the MCP server) confirms the action with.
PREVIEW_TOKEN = ResponseHeader(
    PREVIEW_TOKEN_HEADER,
    "the preview's token: the MCP server's act_on_group takes it to confirm this very decision "
    "(refused if the group changed since)",
    {"type": "string", "pattern": PREVIEW_TOKEN_PATTERN},
)


def declare(routes: Routes) -> None:
    operations = routes.operations

    @routes.get("groups", FailureGroups, errors=(400, 429, 500, 503))
    async def list_groups(call: HttpCall[None]) -> Reply:
        """Operators: the quarantined events and dead letters grouped by cause (exception type
        and normalised message, subscription, event type), each with its count and when it was
        first and last seen, the largest first"""
        return Reply(await operations().groups.groups())

    @routes.post(
        "groups/{groupId}/preview", GroupOutcome, request=GroupAction, headers=(PREVIEW_TOKEN,)
    )
    async def preview_group(call: HttpCall[Any]) -> Reply:
        """Operators: what a retry or discard of a failure group would do, before it is
        confirmed: how many of its events, what subscribers will see and what each subscription
        receives; nothing is sent or removed"""
        body, group_id = call.body, call.path["groupId"]
        outcome = await operations().groups.preview(group_id, body.action, reason=body.reason)
        token = group_preview_token(group_decision(group_id, body), outcome)
        return Reply(outcome, {PREVIEW_TOKEN_HEADER: token})

    @routes.post("groups/{groupId}/unarchive", Unarchived)
    async def unarchive_group(call: HttpCall[None]) -> Reply:
        """Operators: bring a group's archived failure records (discarded: OUTBOX_FAILURE_INGEST)
        back among the open ones, each noted with who brought it back; at most 100 a call
        (`remaining`: call again); the group's count is exact again"""
        return Reply(await operations().groups.unarchive(call.path["groupId"]))

    @routes.post(
        "groups/{groupId}/act", Operation, status=202, request=GroupAction, errors=START_ERRORS
    )
    async def act_on_group(call: HttpCall[Any]) -> Reply:
        """Operators: retry or discard a failure group through the same use cases as one row,
        as a bulk operation (answered at once; whoever runs the relay works it in batches: GET
        operations/{operationId} says how far it is); a retry sends `canary` events first
        (default 5) and goes on only once they are not seen failing again; each event's action
        is audited, and the operation's once, with its counts; 409 naming the open operation
        that acts on the group (or on its entity's dead letters) already"""
        body = call.body
        operation = await operations().bulk.start_group(
            call.path["groupId"],
            body.action,
            reason=body.reason,
            canary=body.canary,
            canary_wait_seconds=body.canary_wait_seconds,
        )
        return Reply(operation)
