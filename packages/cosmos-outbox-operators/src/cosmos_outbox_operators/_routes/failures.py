"""The failures' routes: the one set of routes for a failure of either kind (OUTBOX_FAILURE_INGEST:
a dead letter drained and an event the relay quarantined are one kind of record) -- a page of
them by kind, state and group, and one retried, archived or unarchived by its id, each through
the use case of its kind (`cosmos_outbox.operations.Operations.failures`); one is read whole by
`failures/{failureId}` (the journey's module). The quarantine's own routes (`quarantine/...`) and
the dead letters' (`deadletters/...`) stay beside them. An archive's reason is the required
query parameter `reason`, as a quarantined event's discard takes it."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, TypeAdapter

from cosmos_outbox.http import HttpCall, PageView, QueryParameter, Reply, next_token
from cosmos_outbox.operations import FailureActed, FailureSummary
from cosmos_outbox_operators._routes._context import Routes
from cosmos_outbox_operators._types import OperatorReason

#: What the list is filtered by (each left out: any).
FILTER_QUERY = (
    QueryParameter(
        "kind",
        TypeAdapter(Literal["deadLetter", "quarantine"]),
        "only failures of this kind: deadLetter (drained from a dead-letter queue) or "
        "quarantine (an event the relay set aside)",
    ),
    QueryParameter(
        "status",
        TypeAdapter(Literal["open", "resolved", "archived"]),
        "only failures in this state: open, resolved (retried and accepted) or archived (given up)",
    ),
    QueryParameter(
        "group",
        TypeAdapter(Annotated[str, Field(pattern=r"^[0-9a-f]{12}$", max_length=12)]),
        "only the failures of this group (its id: GET groups)",
    ),
)
REASON = QueryParameter(
    "reason",
    TypeAdapter(OperatorReason),
    "Why the failure is given up (the audit line, its record's history, the discard notice)",
    required=True,
    missing="reason is required: say why the failure is given up",
)
#: An action on one failure: 409 when its state does not allow it, or an open bulk operation
#: acts on it.
ACTION_ERRORS = (400, 404, 409, 429, 500, 503)


class FailurePage(PageView):
    """A page of failure records of either kind."""

    items: list[FailureSummary]


def declare(routes: Routes) -> None:
    operations = routes.operations

    @routes.get(
        "failures", FailurePage, paged=True, query=FILTER_QUERY, errors=(400, 404, 429, 500, 503)
    )
    async def list_failures(call: HttpCall[None]) -> Reply:
        """Operators: the failed messages kept as data (OUTBOX_FAILURE_INGEST) of either kind,
        dead letters and quarantined events, a page at a time, exact from the store: those of
        `kind`, in `status`, of `group` (each left out: any); `failures/{failureId}` reads one
        whole"""
        ops = operations()
        cursor = call.cursor(ops.tokens.failures)
        query = call.query
        page = await ops.failures.page(
            kind=query.get("kind"),
            state=query.get("status"),
            group=query.get("group"),
            page_size=call.page_size,
            continuation=cursor.store_token if cursor is not None else None,
        )
        token = next_token(page.continuation_token, cursor, ops.tokens.failures)
        body = FailurePage.of_items(page.items, token)
        return Reply(body, {"X-Continuation-Token": token} if token else {})

    @routes.post("failures/{failureId}/retry", FailureActed, errors=ACTION_ERRORS)
    async def retry_failure(call: HttpCall[None]) -> Reply:
        """Operators: send one failure again by its id: a dead letter resubmitted to its
        subscription only (as deadletters/{entity}/resubmit), a quarantined event replayed
        through the relay (as quarantine/{eventId}/replay); its record resolved once sent; 409
        for a dead letter's record not open, a discarded event, or a failure an open bulk
        operation acts on (naming it)"""
        return Reply(await operations().failures.retry(call.path["failureId"]))

    @routes.post(
        "failures/{failureId}/archive", FailureActed, query=(REASON,), errors=ACTION_ERRORS
    )
    async def archive_failure(call: HttpCall[None]) -> Reply:
        """Operators: give one failure up by its id, with the reason: a dead letter discarded at
        its subscription (as deadletters/{entity}/discard), a quarantined event discarded (as
        DELETE quarantine/{eventId}): its discard notice sent, its record archived with who and
        why; 409 for a dead letter's record not open, or a failure an open bulk operation acts
        on (naming it)"""
        failure_id, reason = call.path["failureId"], call.query["reason"]
        return Reply(await operations().failures.archive(failure_id, reason))

    @routes.post("failures/{failureId}/unarchive", FailureActed, errors=ACTION_ERRORS)
    async def unarchive_failure(call: HttpCall[None]) -> Reply:
        """Operators: bring one archived dead letter's record back among the open ones by its
        id, noted with who brought it back (as groups/{groupId}/unarchive does for a group's);
        409 for a quarantined event's (its version was given up), a record not archived, or a
        failure an open bulk operation acts on (naming it)"""
        return Reply(await operations().failures.unarchive(call.path["failureId"]))
