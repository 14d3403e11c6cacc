"""Giving a version up: the notice (`OutboxEventDiscarded`, built by
`cosmos_outbox._mapper.discard_notice` as the quarantine notice is) for a quarantined event an
operator discards at the outbox (every subscription), a dead letter discarded at a subscription,
or a version released at one (that subscription only: `outboxTarget`), and what subscribers
will see of it, said in the operator's answer and the audit line."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from cosmos_outbox._mapper import DISCARD_NOTICE_SUBJECT, TARGET_PROPERTY, discard_notice
from cosmos_outbox._model import Model, of_attributes
from cosmos_outbox._records import OutboxMessage

__all__ = ["Notice", "Version", "Versioned", "notice_of_event", "will_see_notice"]


class Notice(Model):
    """A notice an action sent: its MessageId and Subject, the session (aggregate) and version
    it stands at, and the one subscription it was sent to (null: every one)."""

    message_id: str
    subject: str
    aggregate_type: str
    session_id: str
    version: int
    subscription: str | None

    @classmethod
    def of(cls, notice: OutboxMessage) -> Notice:
        target = notice.application_properties.get(TARGET_PROPERTY)
        return of_attributes(cls, notice, subscription=str(target) if target is not None else None)


class Versioned(Protocol):
    """What a discard notice names: an aggregate's version, and its event when known (a stored
    or quarantined event, a dead letter's, or only what an operator released)."""

    @property
    def aggregate_type(self) -> str | None: ...
    @property
    def aggregate_id(self) -> str | None: ...
    @property
    def version(self) -> int | None: ...
    @property
    def event_id(self) -> str | None: ...
    @property
    def action(self) -> str | None: ...
    @property
    def event_source(self) -> str: ...


@dataclass(frozen=True)
class Version:
    """A version an operator names (`Versioned`), with what is known of its event."""

    aggregate_type: str
    aggregate_id: str
    version: int
    event_id: str | None
    action: str | None
    event_source: str


def notice_of_event(
    event: Versioned,
    *,
    reason: str,
    by: str,
    at: datetime | None = None,
    target: str | None = None,
) -> OutboxMessage | None:
    """The discard notice of `event`'s version, in its session (`target`: to that subscription
    only); None when its aggregate or version cannot be read (there is no session, or no place
    in it, to tell)."""
    version = event.version
    if not event.aggregate_type or not event.aggregate_id or version is None or version < 1:
        return None
    return discard_notice(
        aggregate_type=event.aggregate_type,
        aggregate_id=event.aggregate_id,
        version=version,
        event_id=event.event_id,
        action=event.action,
        reason=reason,
        by=by,
        at=at or datetime.now(UTC),
        source=event.event_source,
        target=target,
    )


def will_see_notice(notice: OutboxMessage | None, *, why_none: str = "") -> str:
    """What subscribers will see of a discard notice (or of none)."""
    if notice is None:
        return (
            f"nothing: no {DISCARD_NOTICE_SUBJECT} notice could be sent ({why_none}); a "
            "subscriber holding later versions of it keeps holding them until an operator "
            "releases them there (cosmos-outbox subscribers release ...)"
        )
    where = (
        f"subscription {notice.application_properties[TARGET_PROPERTY]} only"
        if TARGET_PROPERTY in notice.application_properties
        else "every subscription"
    )
    return (
        f"{DISCARD_NOTICE_SUBJECT} for {notice.aggregate_type} {notice.session_id} version "
        f"{notice.version} in its session (MessageId {notice.message_id}), at {where}: the "
        "library's subscriber records an accepted gap for that version and applies the "
        "versions it held after it; another subscriber sees the notice where that version "
        "was, or would have been"
    )
