"""The subscribers, as the publishing app's operators see them: per watched subscription, its dead
letters and, when the app knows the subscriber's projection container, what it holds and why
(`cosmos_outbox.subscriber.subscriber_status`); `release` gives a version up at one subscription
when nothing else will bring it (docs/operating.md, "A subscriber holds versions")."""

from __future__ import annotations

from datetime import datetime

from cosmos_outbox._mapper import EVENT_TYPE, read_feed
from cosmos_outbox._model import Model
from cosmos_outbox._quarantine import QUARANTINE_TYPE, quarantined_event
from cosmos_outbox._records import OutboxRecord
from cosmos_outbox.errors import NotFoundError, PublishFailedError
from cosmos_outbox.operations._actor import current_actor
from cosmos_outbox.operations._audit import audit
from cosmos_outbox.operations._dead_letters import WATCHED, DeadLetterOperators
from cosmos_outbox.operations._dependencies import (
    COSMOS_DB,
    SERVICE_BUS,
    Unanswered,
    answered,
    unanswered,
)
from cosmos_outbox.operations._giving_up import Notice, Version, notice_of_event, will_see_notice
from cosmos_outbox.operations._letters import EntityCount
from cosmos_outbox.operations._parts import Parts
from cosmos_outbox.operations._stored import of_aggregate
from cosmos_outbox.subscriber._status import (
    AcceptedGap,
    HeldAggregate,
    SubscriberStatus,
    subscriber_status,
)
from cosmos_outbox.telemetry import error_type

__all__ = ["Released", "SubscriberOperators", "SubscriberView", "Subscribers"]


class SubscriberView(Model):
    """One watched subscription: its dead letters and, where the app knows the subscriber's
    projection container (OUTBOX_SUBSCRIPTIONS), what it holds, why, and the gaps it accepted."""

    subscription: str
    dead_letters: int | None
    dead_letters_at_least: bool
    dead_letters_error: str | None
    #: whether the app knows this subscriber's projection container (OUTBOX_SUBSCRIPTIONS)
    known: bool
    held_events: int | None
    held: list[HeldAggregate]
    accepted_gaps: list[AcceptedGap]

    #: when the dead letters were counted (with `dead_letters_error`: the last count known)
    dead_letters_counted_at: datetime | None = None
    #: why what the subscriber holds could not be read now (its container did not answer)
    status_error: str | None = None

    @classmethod
    def of(
        cls,
        count: EntityCount,
        status: SubscriberStatus | None,
        *,
        known: bool | None = None,
        status_error: str | None = None,
    ) -> SubscriberView:
        return cls(
            subscription=count.name,
            dead_letters=count.dead_letters,
            dead_letters_at_least=count.at_least,
            dead_letters_error=count.error,
            dead_letters_counted_at=count.counted_at,
            status_error=status_error,
            known=status is not None if known is None else known,
            held_events=status.held_events if status is not None else None,
            held=status.held if status is not None else [],
            accepted_gaps=status.accepted_gaps if status is not None else [],
        )


class Subscribers(Model):
    """The watched subscriptions, as the publishing app's operators see their subscribers;
    `unanswered`: the parts that could not be read (each view says which of its own)."""

    subscribers: list[SubscriberView]
    unanswered: list[Unanswered] = []


class Released(Model):
    """A version given up at one subscription: its discard notice, and what subscribers will
    see."""

    subscription: str
    notice: Notice
    subscribers_will_see: str


class SubscriberOperators:
    def __init__(self, parts: Parts, dead_letters: DeadLetterOperators) -> None:
        self._parts = parts
        self._letters = dead_letters

    async def status(self) -> Subscribers:
        """Per watched subscription, its dead letters (Service Bus) and what its subscriber
        holds (its projection container, Cosmos DB), each read apart: one that does not answer
        is named, the rest shown (the dead letters' last count known, with when it was read)."""
        stores = self._parts.subscribers()
        views, missing = [], []
        for entity in self._letters.watched:
            if entity.kind != "subscription":
                continue
            store = stores.get(entity.name)
            status, why = None, None
            if store is not None:
                try:
                    status = await answered(COSMOS_DB, subscriber_status(store))
                except Exception as exc:
                    gap = unanswered(COSMOS_DB, f"what {entity.name}'s subscriber holds", exc)
                    missing.append(gap)
                    why = gap.error
            count = await self._letters.count(entity)
            if count.error is not None:
                missing.append(
                    Unanswered(
                        dependency=SERVICE_BUS,
                        part=f"the dead letters at {entity.name}",
                        error=count.error,
                    )
                )
            views.append(
                SubscriberView.of(count, status, known=store is not None, status_error=why)
            )
        return Subscribers(subscribers=views, unanswered=missing)

    async def release(
        self,
        subscription: str,
        *,
        aggregate_type: str,
        aggregate_id: str,
        version: int,
        reason: str,
    ) -> Released:
        """Give `version` of the aggregate up at `subscription` (a watched one): its discard
        notice, to that subscription only, naming who gave it up (the current actor)."""
        entity = self._letters.entity(subscription)
        if entity.kind != "subscription":
            raise NotFoundError(WATCHED, f"{subscription} (a queue: nothing to release there)")
        known = await self._known(aggregate_type, aggregate_id, version)
        notice = notice_of_event(known, reason=reason, by=str(current_actor()), target=entity.name)
        if notice is None:
            raise ValueError(f"version {version}: a version to give up is 1 or more")
        event_id = known.event_id
        try:
            await answered(SERVICE_BUS, self._parts.relay().send([notice]))
        except Exception as exc:
            raise PublishFailedError(f"the release failed to send: {error_type(exc)}") from exc
        will_see = will_see_notice(notice)
        audit(
            "subscribers.release",
            f"{aggregate_type} {aggregate_id} version {version} given up at {entity.name} "
            f"(event {event_id or 'unknown'}): {reason}",
            will_see=will_see,
            subscription=entity.name,
            aggregate_type=aggregate_type,
            aggregate_id=aggregate_id,
            version=version,
            event_id=event_id,
            reason=reason,
            message_id=notice.message_id,
        )
        return Released(
            subscription=entity.name, notice=Notice.of(notice), subscribers_will_see=will_see
        )

    async def _known(self, aggregate_type: str, aggregate_id: str, version: int) -> Version:
        """The aggregate's `version`, with its event's id, action and source from its stored
        event or its quarantine record when the outbox still has one."""
        given = (aggregate_type, aggregate_id, version)
        documents = await answered(
            COSMOS_DB, of_aggregate(self._parts.store, EVENT_TYPE, aggregate_id)
        )
        for item in read_feed(documents, legacy=self._parts.legacy):
            if not isinstance(item, OutboxRecord):
                continue
            if (item.aggregate_type, item.aggregate_id, item.version) == given:
                return Version(*given, item.event_id, item.action, item.event_source)
        for document in await answered(
            COSMOS_DB, of_aggregate(self._parts.store, QUARANTINE_TYPE, aggregate_id)
        ):
            entry = quarantined_event(document, legacy=self._parts.legacy)
            if entry.version == version and entry.aggregate_type in (aggregate_type, None):
                return Version(*given, entry.event_id, entry.action, entry.event.event_source)
        return Version(*given, None, None, f"/{aggregate_type}s")
