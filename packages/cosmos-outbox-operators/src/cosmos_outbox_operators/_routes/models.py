"""The operators' models an app may extend (`OperatorModels`: subclass `RedriveScope` and
`RedriveRequest` (overriding `scope`), `QuarantineItem` (overriding `fields_of`) and
`QuarantineListPage`): an app whose clients know another spelling of an aggregate (an alias of
its id) hands its subclasses to the blueprint, and the routes, their parsing and the OpenAPI
document read them; and the quarantine's views built on them."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Self

from pydantic import ConfigDict, Field, model_validator

from cosmos_outbox.documents import event_fields
from cosmos_outbox.http import (
    TOKEN_PATTERN,
    Identifier,
    Model,
    PageView,
    RequestModel,
    omit_null_defaults,
)
from cosmos_outbox.operations import QuarantinedEvent, trace_id
from cosmos_outbox.ports import Page
from cosmos_outbox.relay import OutboxRecord
from cosmos_outbox_operators._types import AggregateType, Instant

__all__ = [
    "OperatorModels",
    "QuarantineItem",
    "QuarantineListPage",
    "QuarantinedEventView",
    "RedriveRequest",
    "RedriveScope",
]


class RedriveScope(RequestModel):
    """Body of POST /outbox/redrive/operation (a re-drive as a bulk operation; the base of
    `RedriveRequest`): `since` (RFC 3339 with offset); optionally one aggregate type, and one
    aggregate of it (`aggregateId`, the session id its messages carry, which needs
    `aggregateType`); one watched subscription to send to (`subscription`; else every
    subscription)."""

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

    @model_validator(mode="after")
    def _one_aggregate(self) -> Self:
        if self.aggregate_id is not None and self.aggregate_type is None:
            raise ValueError("aggregateId needs aggregateType")
        return self

    @property
    def scope(self) -> tuple[str | None, str | None]:
        """(aggregate type, aggregate id) to re-drive."""
        return self.aggregate_type, self.aggregate_id


class RedriveRequest(RedriveScope):
    """Body of POST /outbox/redrive (one page per request; and of its preview, POST
    /outbox/redrive/preview, which ignores the token): a `RedriveScope`, `pageSize` events per
    call (default 100) and the `continuationToken` of the previous page."""

    page_size: Annotated[int, Field(ge=1, le=1000)] = 100
    continuation_token: Annotated[str, Field(pattern=TOKEN_PATTERN)] | None = None


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
            found = event_fields(event.document).traceparent
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
    #: a re-drive operation's (`RedriveRequest` without its paging)
    redrive_scope: type[RedriveScope] = RedriveScope
    quarantine_item: type[QuarantineItem] = QuarantineItem
    quarantine_page: type[QuarantineListPage] = QuarantineListPage
