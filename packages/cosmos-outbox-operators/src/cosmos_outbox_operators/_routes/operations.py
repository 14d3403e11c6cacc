"""The bulk operations' routes: every operation with its progress (the open ones and the last
finished), one, and an operator's cancel, or continue after a canary paused it. An operation is
started by its action's route (`groups/{groupId}/act`, `deadletters/{entity}/operations`),
which answers 202 with it at once; whoever runs the relay works it
(`cosmos_outbox.operations.Operations.bulk`)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from cosmos_outbox.http import HttpCall, Reply, RequestModel
from cosmos_outbox.operations import BULK_KINDS, Operation, OperationList
from cosmos_outbox_operators._routes._context import Routes
from cosmos_outbox_operators._types import ERRORS

#: A cancel or a continue may find the operation finished, or not paused: 409.
CHANGE_ERRORS = tuple(sorted((*ERRORS, 409)))


_CANARY = BULK_KINDS.canary


class CanaryOptions(RequestModel):
    """A retry's canary: `canary` items first (default 5; 0: none), then the rest only once
    they are seen applied, or not back as dead letters within `canaryWaitSeconds` (default
    60); the bounds are the core's (`BULK_KINDS.canary`)."""

    canary: Annotated[int, Field(ge=0, le=_CANARY.most)] | None = None
    canary_wait_seconds: Annotated[float, Field(ge=0, le=_CANARY.most_wait_seconds)] | None = None


def declare(routes: Routes) -> None:
    operations = routes.operations

    @routes.get("operations", OperationList, errors=(400, 429, 500, 503))
    async def list_operations(call: HttpCall[None]) -> Reply:
        """Operators: the bulk operations with their progress, the newest first: every one not
        finished, and the last finished ones"""
        return Reply(await operations().bulk.list())

    @routes.get("operations/{operationId}", Operation)
    async def show_operation(call: HttpCall[None]) -> Reply:
        """Operators: one bulk operation and its progress (items, done, failed, skipped), its
        state and what it says (the canary's verdict, why it paused or stopped)"""
        return Reply(await operations().bulk.get(call.path["operationId"]))

    @routes.post("operations/{operationId}/cancel", Operation, errors=CHANGE_ERRORS)
    async def cancel_operation(call: HttpCall[None]) -> Reply:
        """Operators: stop a bulk operation: no batch is begun after this (one in flight is
        finished); the operation's audit line says what it did"""
        return Reply(await operations().bulk.cancel(call.path["operationId"]))

    @routes.post("operations/{operationId}/continue", Operation, errors=CHANGE_ERRORS)
    async def continue_operation(call: HttpCall[None]) -> Reply:
        """Operators: continue a bulk operation paused after its canary: its other items are
        acted on as though the canary had succeeded"""
        return Reply(await operations().bulk.resume(call.path["operationId"]))
