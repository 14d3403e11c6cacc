"""The operators' routes (`/outbox/...` by default, auth level ADMIN: the host's master key) and
their models: the outbox's status and the backlog's last hour, the quarantine (list, one record
with its body, replay, discard) and re-drive; the recovery routes beside them
(`recovery_routes`: health, dead letters, journey, subscribers). Aggregate-neutral: a record
names its aggregate by `aggregateType` + `aggregateId`, nothing else.

Each route but `outbox/health` (anonymous) is also served to a signed-in operator under
`/outbox/console/...`, and the console page at `/outbox/console` shows them
(`cosmos_outbox_operators._console`: two doors, one implementation); who acts is the operator a door
admitted (`cosmos_outbox.operations._actor.current_actor()`).

Decision: the reason of a discard is the required query parameter `reason` (1-500 characters,
the text rules of every field). DELETE bodies are dropped by some clients and proxies, and a
query parameter shows in the host's request log next to the route. The discard answers 200 with
what was given up, the notice sent and what subscribers will see (it answered 204 before 0.4).

An app whose clients know another spelling (an alias of one aggregate type's id) subclasses
`RedriveRequest` (overriding `scope`), `QuarantineItem` (overriding `of`) and
`QuarantineListPage`, and hands them to the blueprint as `OperatorModels`: the routes, their
parsing and the OpenAPI document then read the app's models."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Self

import azure.functions as func
from pydantic import (
    ConfigDict,
    Field,
    TypeAdapter,
    model_validator,
)

from cosmos_outbox.http import (
    TOKEN_PATTERN,
    HttpApi,
    HttpCall,
    Identifier,
    Model,
    PageView,
    PathParameter,
    QueryParameter,
    Reply,
    RequestModel,
    next_token,
    omit_null_defaults,
)
from cosmos_outbox.operations import (
    OutboxStatus,
    QuarantinedEvent,
    Reading,
    RedrivePage,
    RedrivePreview,
    trace_id,
)
from cosmos_outbox.ports import Page
from cosmos_outbox.relay import OutboxRecord
from cosmos_outbox_operators._console.doors import OperatorDoors
from cosmos_outbox_operators._console.identity import OPERATOR_ROLE
from cosmos_outbox_operators._recovery_routes import recovery_routes
from cosmos_outbox_operators._recovery_views import PARAMETERS, DiscardView
from cosmos_outbox_operators._types import (
    WHOLE,
)
from cosmos_outbox_operators._types import (
    AggregateType as AggregateType,
)
from cosmos_outbox_operators._types import (
    Instant as Instant,
)
from cosmos_outbox_operators._types import (
    OperatorReason as OperatorReason,
)
from cosmos_outbox_operators._types import (
    parse_instant as parse_instant,
)

if TYPE_CHECKING:
    from cosmos_outbox.operations import Operations

__all__ = [
    "AggregateType",
    "BacklogHistoryView",
    "Instant",
    "OperatorModels",
    "OperatorReason",
    "QuarantineItem",
    "QuarantineListPage",
    "QuarantinedEventView",
    "RedriveRequest",
    "parse_instant",
]


class RedriveRequest(RequestModel):
    """Body of POST /outbox/redrive (and of its preview, POST /outbox/redrive/preview, which
    ignores the token): `since` (RFC 3339 with offset); optionally one aggregate type, and one
    aggregate of it (`aggregateId`, the session id its messages carry, which needs
    `aggregateType`); one watched subscription to send to (`subscription`; else every
    subscription); `pageSize` events per call (default 100) and the `continuationToken` of the
    previous page."""

    model_config = ConfigDict(
        json_schema_extra=omit_null_defaults(
            {
                "dependentRequired": {"aggregateId": ["aggregateType"]},
            }
        )
    )

    since: Instant
    aggregate_type: AggregateType | None = None
    aggregate_id: Identifier | None = None
    subscription: Identifier | None = None
    page_size: Annotated[int, Field(ge=1, le=1000)] = 100
    continuation_token: Annotated[str, Field(pattern=TOKEN_PATTERN)] | None = None

    @model_validator(mode="after")
    def _one_aggregate(self) -> Self:
        if self.aggregate_id is not None and self.aggregate_type is None:
            raise ValueError("aggregateId needs aggregateType")
        return self

    @property
    def scope(self) -> tuple[str | None, str | None]:
        """(aggregate type, aggregate id) to re-drive."""
        return self.aggregate_type, self.aggregate_id


class BacklogHistoryView(Model):
    """The backlog timer's readings of the last hour, oldest first (the console's chart)."""

    readings: list[Reading]


class QuarantineItem(Model):
    event_id: str
    aggregate_type: str | None
    aggregate_id: str
    action: str | None
    version: int | None
    reason: str
    quarantined_at: datetime | None
    replays: int
    status: str = Field(json_schema_extra={"enum": ["quarantined", "resolved", "discarded"]})
    resolved_at: datetime | None

    @classmethod
    def fields_of(cls, entry: QuarantinedEvent) -> dict[str, object]:
        """The fields of the item of `entry`: the record's of the same name, and its status (a
        subclass adds its own to them)."""
        shown = {
            name: getattr(entry, name)
            for name in QuarantineItem.model_fields
            if hasattr(entry, name)
        }
        return {**shown, "status": entry.status}

    @classmethod
    def of(cls, entry: QuarantinedEvent) -> Self:
        return cls.model_validate(cls.fields_of(entry))


class QuarantinedEventView(QuarantineItem):
    """One quarantine record with the event it holds: its body (the JSON value the app
    committed; its text when it is not JSON), the body's size, and its trace id (the W3C trace
    the event was committed in: Application Insights' operation id)."""

    trace_id: str | None
    body: Any
    body_bytes: int

    @classmethod
    def of_entry(cls, entry: QuarantinedEvent) -> QuarantinedEventView:
        event = entry.event
        if isinstance(event, OutboxRecord):
            raw, traceparent = event.body, event.traceparent
        else:
            raw = json.dumps(dict(event.document), separators=(",", ":")).encode()
            found = event.document.get("traceparent")
            traceparent = found if isinstance(found, str) else None
        try:
            body: Any = json.loads(raw)
        except ValueError:
            body = raw.decode("utf-8", "replace")
        return cls.model_validate(
            {
                **QuarantineItem.fields_of(entry),
                "trace_id": trace_id(traceparent),
                "body": body,
                "body_bytes": len(raw),
            }
        )


class QuarantineListPage(PageView):
    items: list[QuarantineItem]

    @classmethod
    def of(cls, page: Page[QuarantinedEvent], item: type[QuarantineItem] = QuarantineItem) -> Self:
        return cls.of_items([item.of(e) for e in page.items], page.continuation_token)


@dataclass(frozen=True)
class OperatorModels:
    """The models the operators' routes parse and answer with: these, or an app's subclasses."""

    redrive_request: type[RedriveRequest] = RedriveRequest
    quarantine_item: type[QuarantineItem] = QuarantineItem
    quarantine_page: type[QuarantineListPage] = QuarantineListPage


EVENT_ID = PathParameter("eventId", "the event id")
REASON = QueryParameter(
    "reason",
    TypeAdapter(OperatorReason),
    "Why the event is discarded (written to the audit log)",
    required=True,
    missing="reason is required: say why the event is discarded",
)
_ERRORS = (400, 429, 500, 503)


def routes_blueprint(
    operations: Callable[[], Operations],
    *,
    asynchronous: bool,
    models: OperatorModels = OperatorModels(),
    route_prefix: str = "outbox",
    auth_level: func.AuthLevel = func.AuthLevel.ADMIN,
    console: bool = True,
    operator_role: str = OPERATOR_ROLE,
) -> func.Blueprint:
    """The operators' routes under `route_prefix` (`outbox/status`, `outbox/quarantine`, ...),
    at `auth_level` (ADMIN: the host's master key), served by `operations()`; `models` are the
    request and answer models (an app's subclasses). Bounded: a store or a broker that hangs
    makes an operator's call a 503 + Retry-After within BOUND_SECONDS, as /health, never a wait
    on the SDKs' own timeouts and retries. With `console`, each route also under
    `route_prefix/console/` for a signed-in operator with the app role `operator_role`, and the
    console page at `route_prefix/console` (`cosmos_outbox_operators._console`)."""
    prefix = route_prefix.strip("/")
    doors = OperatorDoors(
        prefix=prefix,
        parameters={"eventId": EVENT_ID, **PARAMETERS},
        auth_level=auth_level,
        console=console,
        role=operator_role,
    )

    def operation(**declared: Any) -> Callable[[Any], Any]:
        return doors.operation(asynchronous=asynchronous, **declared)

    @operation(
        route=f"{prefix}/status",
        method="GET",
        status=200,
        summary="Operators: the relay's state (healthy: moving; stalled: since when, which "
        "dependency does not answer, the last error; not ready), its backlog per lease, the "
        "quarantined events, the scheduled events waiting, and the dead letters that left "
        "their queue without being applied",
        response=OutboxStatus,
        errors=_ERRORS,
    )
    async def outbox_status(call: HttpCall[None]) -> Reply:
        return Reply(await operations().status.now())

    @operation(
        route=f"{prefix}/backlog",
        method="GET",
        status=200,
        summary="Operators: the backlog timer's readings of the last hour (pending events and "
        "the oldest one's age), oldest first",
        response=BacklogHistoryView,
        errors=_ERRORS,
    )
    async def backlog_history(call: HttpCall[None]) -> Reply:
        return Reply(BacklogHistoryView(readings=await operations().status.backlog()))

    @operation(
        route=f"{prefix}/quarantine",
        method="GET",
        status=200,
        paged=True,
        summary="Operators: the quarantined events (resolved ones too, until they "
        "expire), one page at a time",
        response=models.quarantine_page,
        errors=_ERRORS,
    )
    async def list_quarantine(call: HttpCall[None]) -> Reply:
        ops = operations()
        cursor = call.cursor(ops.tokens.quarantine)
        page = await ops.quarantine.page(
            page_size=call.page_size, continuation=cursor.store_token if cursor else None
        )
        token = next_token(page.continuation_token, cursor, ops.tokens.quarantine)
        body = models.quarantine_page.of(Page(page.items, token), models.quarantine_item)
        return Reply(body, {"X-Continuation-Token": token} if token else {})

    @operation(
        route=f"{prefix}/quarantine/{{eventId}}",
        method="GET",
        status=200,
        summary="Operators: one quarantine record with the event's body and trace id",
        query=(WHOLE,),
        response=QuarantinedEventView,
        errors=(400, 404, 429, 500, 503),
    )
    async def show_quarantined(call: HttpCall[None]) -> Reply:
        entry = await operations().quarantine.get(call.path["eventId"])
        return Reply(QuarantinedEventView.of_entry(entry))

    @operation(
        route=f"{prefix}/quarantine/{{eventId}}/replay",
        method="POST",
        status=202,
        summary="Operators: send a quarantined event through the relay again with its "
        "own id; the record answered is resolved, or still quarantined with "
        "the new reason",
        response=models.quarantine_item,
        errors=(400, 404, 429, 500, 503),
    )
    async def replay_quarantined(call: HttpCall[None]) -> Reply:
        replayed = await operations().quarantine.replay(call.path["eventId"])
        return Reply(models.quarantine_item.of(replayed))

    @operation(
        route=f"{prefix}/quarantine/{{eventId}}",
        method="DELETE",
        status=200,
        summary="Operators: give a quarantined event up, with the reason: its discard notice "
        "(OutboxEventDiscarded) sent in its session to every subscription, then its record "
        "kept as discarded; the answer and the audit line say what subscribers will see",
        query=(REASON,),
        response=DiscardView,
        errors=(400, 404, 429, 500, 503),
    )
    async def discard_quarantined(call: HttpCall[None]) -> Reply:
        discarded = await operations().quarantine.discard(
            call.path["eventId"], call.query["reason"]
        )
        return Reply(DiscardView.of(discarded))

    @operation(
        route=f"{prefix}/redrive",
        method="POST",
        status=202,
        summary="Operators: publish again the stored events created at or after `since` (of "
        "one aggregate type, and one aggregate, if given; to one subscription if given), per "
        "aggregate in version order, a page at a time, each under a MessageId of its own that "
        "the topic's duplicate detection cannot drop (the event id stays its CloudEvents id); "
        "the answer counts what the topic accepted and what subscribers will apply",
        request=models.redrive_request,
        response=RedrivePage,
        errors=(400, 404, 413, 415, 429, 500, 503),
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
        request=models.redrive_request,
        response=RedrivePreview,
        errors=(400, 404, 413, 415, 429, 500, 503),
    )
    async def preview_redrive(call: HttpCall[Any]) -> Reply:
        body = call.body
        aggregate_type, aggregate_id = body.scope
        return Reply(
            await operations().redrive.preview(
                body.since,
                aggregate_type=aggregate_type,
                aggregate_id=aggregate_id,
                subscription=body.subscription,
                page_size=body.page_size,
            )
        )

    # outbox/health is anonymous: through neither door (no key, no sign-in), bounded like them
    anonymous = HttpApi(
        doors.blueprint, parameters={}, auth_level=func.AuthLevel.ANONYMOUS, bounded=True
    )

    def anonymous_operation(**declared: Any) -> Callable[[Any], Any]:
        return anonymous.operation(asynchronous=asynchronous, **declared)

    recovery_routes(operation, operations, prefix=prefix, anonymous=anonymous_operation)

    if console:
        from cosmos_outbox_operators._console.page import register_page

        register_page(doors)
    return doors.blueprint
