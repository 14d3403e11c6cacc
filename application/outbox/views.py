"""The operators' API models: request bodies and the views answered by the `/outbox/...` routes.
Aggregate-neutral: a record names its aggregate by `aggregateType` + `aggregateId`. `contactId`
stays, for this app's clients, as an alias: in a re-drive request it stands for
`aggregateType: "contact"` + `aggregateId`; in a quarantine item it is the aggregate id when the
aggregate is a contact (null otherwise)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Self

from pydantic import BeforeValidator, ConfigDict, Field, WithJsonSchema, model_validator

from application.models import Identifier, Model, PageView, RequestModel, omit_null_defaults
from application.outbox.ports import QuarantinedEvent
from application.ports import Page

if TYPE_CHECKING:
    from application.outbox.operators import OutboxStatus

#: The aggregate type `contactId` stands for.
CONTACT = "contact"

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
    type, and one aggregate of it (`aggregateId`, which needs `aggregateType`); `contactId` is
    this app's alias of `aggregateType: "contact"` + `aggregateId`."""

    model_config = ConfigDict(json_schema_extra=omit_null_defaults({
        "dependentRequired": {"aggregateId": ["aggregateType"]},
        "dependentSchemas": {"contactId": {
            "properties": {"aggregateType": {"const": CONTACT}},
            "not": {"required": ["aggregateId"]}}},
    }))

    since: Instant
    aggregate_type: AggregateType | None = None
    aggregate_id: Identifier | None = None
    contact_id: Identifier | None = Field(
        default=None, description="Alias of aggregateType contact + aggregateId")

    @model_validator(mode="after")
    def _one_aggregate(self) -> Self:
        if self.contact_id is not None:
            if self.aggregate_id is not None:
                raise ValueError("send contactId or aggregateId, not both")
            if self.aggregate_type not in (None, CONTACT):
                raise ValueError("contactId names a contact: aggregateType must be contact")
        elif self.aggregate_id is not None and self.aggregate_type is None:
            raise ValueError("aggregateId needs aggregateType")
        return self

    @property
    def scope(self) -> tuple[str | None, str | None]:
        """(aggregate type, aggregate id) to re-drive, `contactId` resolved."""
        if self.contact_id is not None:
            return CONTACT, self.contact_id
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
    contact_id: str | None = Field(
        description="Alias of aggregateId when the aggregate is a contact, else null")
    action: str | None
    version: int | None
    reason: str
    quarantined_at: datetime | None
    replays: int
    status: str = Field(json_schema_extra={"enum": ["quarantined", "resolved"]})
    resolved_at: datetime | None

    @classmethod
    def of(cls, entry: QuarantinedEvent) -> QuarantineItem:
        return cls(
            event_id=entry.event_id, aggregate_type=entry.aggregate_type,
            aggregate_id=entry.aggregate_id,
            contact_id=entry.aggregate_id if entry.aggregate_type in (CONTACT, None) else None,
            action=entry.action, version=entry.version,
            reason=entry.reason, quarantined_at=entry.quarantined_at, replays=entry.replays,
            status="resolved" if entry.resolved else "quarantined",
            resolved_at=entry.resolved_at)


class QuarantineListPage(PageView):
    items: list[QuarantineItem]

    @classmethod
    def of(cls, page: Page[QuarantinedEvent]) -> QuarantineListPage:
        return cls.of_items([QuarantineItem.of(e) for e in page.items], page.continuation_token)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
