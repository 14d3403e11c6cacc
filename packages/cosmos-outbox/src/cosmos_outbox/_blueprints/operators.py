"""The operators' API models: request bodies and the views answered by the `/outbox/...` routes.
Aggregate-neutral: a record names its aggregate by `aggregateType` + `aggregateId`, nothing else.

An app whose clients know another spelling (an alias of one aggregate type's id) subclasses
`RedriveRequest` (overriding `scope`), `QuarantineItem` (overriding `of`) and
`QuarantineListPage`, and hands them to the blueprint as `OperatorModels`: the routes, their
parsing and the OpenAPI document then read the app's models."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Self

from pydantic import BeforeValidator, ConfigDict, Field, WithJsonSchema, model_validator

from cosmos_outbox._text import Text
from cosmos_outbox.http._models import (
    Identifier,
    Model,
    PageView,
    RequestModel,
    omit_null_defaults,
)
from cosmos_outbox.ports import Page, QuarantinedEvent

if TYPE_CHECKING:
    from cosmos_outbox._relay.operators import OutboxStatus

__all__ = [
    "AggregateType",
    "Instant",
    "LeaseStatusView",
    "OperatorModels",
    "OperatorReason",
    "OutboxStatusView",
    "QuarantineItem",
    "QuarantineListPage",
    "RedriveRequest",
    "RedriveView",
    "parse_instant",
]

#: Free text an operator gives for an action (discarding a quarantined event): required, the
#: same character rules as every text field.
OperatorReason = Annotated[str, Text(max_length=500)]

_RFC3339 = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt]([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?"
    r"([Zz]|[+-][0-9]{2}:[0-9]{2})")


def parse_instant(value: object) -> datetime:
    """An RFC 3339 date-time with its offset (no other form: no bare dates, no epoch numbers),
    as an aware UTC datetime; times beyond the calendar's range clamp to its ends."""
    m = _RFC3339.fullmatch(value) if isinstance(value, str) else None
    if m is None:
        raise ValueError("must be an RFC 3339 date-time with an offset, "
                         "e.g. 2026-11-22T08:00:00Z")
    fraction = (m.group(7) or ".0")[1:7].ljust(6, "0")
    text = (f"{m.group(1)}-{m.group(2)}-{m.group(3)}T{m.group(4)}:{m.group(5)}:{m.group(6)}"
            f".{fraction}{'+00:00' if m.group(8) in 'Zz' else m.group(8)}")
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError("is not a valid date-time") from None
    try:
        return at.astimezone(UTC)
    except OverflowError:
        return (datetime.min if at.year == 1 else datetime.max).replace(tzinfo=UTC)


Instant = Annotated[datetime, BeforeValidator(parse_instant),
                    WithJsonSchema({"type": "string", "format": "date-time"})]
AggregateType = Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9]{0,63}$", max_length=64)]


class RedriveRequest(RequestModel):
    """Body of POST /outbox/redrive: `since` (RFC 3339 with offset); optionally one aggregate
    type, and one aggregate of it (`aggregateId`, which needs `aggregateType`)."""

    model_config = ConfigDict(json_schema_extra=omit_null_defaults({
        "dependentRequired": {"aggregateId": ["aggregateType"]},
    }))

    since: Instant
    aggregate_type: AggregateType | None = None
    aggregate_id: Identifier | None = None

    @model_validator(mode="after")
    def _one_aggregate(self) -> Self:
        if self.aggregate_id is not None and self.aggregate_type is None:
            raise ValueError("aggregateId needs aggregateType")
        return self

    @property
    def scope(self) -> tuple[str | None, str | None]:
        """(aggregate type, aggregate id) to re-drive."""
        return self.aggregate_type, self.aggregate_id


class RedriveView(Model):
    events: int
    sent: int
    quarantined: int


class LeaseStatusView(Model):
    lease: str
    pending: int
    oldest_pending_age_seconds: float | None
    owner: str | None
    checkpoint_at: str | None


class OutboxStatusView(Model):
    pending: int
    oldest_pending_age_seconds: float | None
    quarantined: int
    leases: list[LeaseStatusView]

    @classmethod
    def of(cls, status: OutboxStatus) -> OutboxStatusView:
        return cls(
            pending=status.pending,
            oldest_pending_age_seconds=_round(status.oldest_age_seconds),
            quarantined=status.quarantined,
            leases=[LeaseStatusView(
                lease=s.lease.lease, pending=s.lease.pending,
                oldest_pending_age_seconds=_round(s.oldest_age_seconds), owner=s.lease.owner,
                checkpoint_at=s.lease.checkpoint_at) for s in status.leases])


class QuarantineItem(Model):
    event_id: str
    aggregate_type: str | None
    aggregate_id: str
    action: str | None
    version: int | None
    reason: str
    quarantined_at: datetime | None
    replays: int
    status: str = Field(json_schema_extra={"enum": ["quarantined", "resolved"]})
    resolved_at: datetime | None

    @classmethod
    def fields_of(cls, entry: QuarantinedEvent) -> dict[str, object]:
        """The fields of the item of `entry`, by name (a subclass adds its own to them)."""
        return {
            "event_id": entry.event_id, "aggregate_type": entry.aggregate_type,
            "aggregate_id": entry.aggregate_id, "action": entry.action,
            "version": entry.version, "reason": entry.reason,
            "quarantined_at": entry.quarantined_at, "replays": entry.replays,
            "status": "resolved" if entry.resolved else "quarantined",
            "resolved_at": entry.resolved_at,
        }

    @classmethod
    def of(cls, entry: QuarantinedEvent) -> Self:
        return cls.model_validate(cls.fields_of(entry))


class QuarantineListPage(PageView):
    items: list[QuarantineItem]

    @classmethod
    def of(cls, page: Page[QuarantinedEvent], item: type[QuarantineItem] = QuarantineItem
           ) -> Self:
        return cls.of_items([item.of(e) for e in page.items], page.continuation_token)


@dataclass(frozen=True)
class OperatorModels:
    """The models the operators' routes parse and answer with: these, or an app's subclasses."""

    redrive_request: type[RedriveRequest] = RedriveRequest
    quarantine_item: type[QuarantineItem] = QuarantineItem
    quarantine_page: type[QuarantineListPage] = QuarantineListPage


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
