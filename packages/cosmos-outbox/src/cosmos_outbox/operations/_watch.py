"""No dead letter leaves without a word: the dead letters of the watched subscriptions whose
subscriber the app knows (OUTBOX_SUBSCRIPTIONS `name=container`), remembered (one
`outboxDeadLetterWatch` record per dead letter and its fate, in a partition of their own), so
that one that leaves its dead-letter queue without being applied is said, with its recovery
(docs/operating-the-outbox.md, "Never resend a dead letter with its own MessageId", says when).
`DeadLetterWatch.sweep` runs each backlog timer tick; the operators' own resubmissions and
discards are recorded before they happen (`handled`). Resolved records expire after
KEPT_SECONDS; a vanished one is kept until it is resolved."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any, Literal

from cosmos_outbox._mapper import EVENT_TYPE, created_at_of
from cosmos_outbox._model import Model, of_attributes
from cosmos_outbox.operations._dependencies import COSMOS_DB, SERVICE_BUS, answered
from cosmos_outbox.operations._letters import Described, enqueued
from cosmos_outbox.operations._parts import Parts
from cosmos_outbox.ports import AsyncDocumentStore, DeadLetterEntity
from cosmos_outbox.subscriber._status import event_fate

__all__ = ["WATCH_PARTITION", "WATCH_TYPE", "DeadLetterWatch", "VanishedLetter", "WatchRecord"]

WATCH_TYPE = "outboxDeadLetterWatch"
WATCH_PARTITION = "outbox-dead-letter-watch"
#: How long a dead letter that left may take to be applied before it is said to have vanished.
GRACE_SECONDS = 20.0
#: How long a resolved record is kept (the journey's history of the dead letter).
KEPT_SECONDS = 7 * 86_400
Fate = Literal[
    "dead-lettered", "left", "vanished", "resubmitted", "discarded", "applied", "given up"
]
#: The fates an operator need not act on.
SETTLED = ("resubmitted", "discarded", "applied", "given up")


class WatchRecord(Model):
    """One dead letter the watch saw (or an operators' action handled) and its fate."""

    subscription: str
    event_id: str
    sequence_number: int
    message_id: str | None
    aggregate_type: str | None
    aggregate_id: str | None
    action: str | None
    version: int | None
    #: when the watch (or an action) first saw it, and its enqueued time
    seen_at: datetime
    dead_lettered_at: datetime | None
    reason: str | None
    fate: Fate
    #: when it reached this fate, and who took the action (resubmitted, discarded)
    fate_at: datetime
    by: str | None = None

    @classmethod
    def of(
        cls,
        subscription: str,
        described: Described,
        fate: Fate,
        at: datetime,
        by: str | None = None,
    ) -> WatchRecord:
        """The record of a dead letter of `subscription`, seen (or handled) `at`."""
        letter = described.letter
        return of_attributes(
            cls,
            described,
            subscription=subscription,
            sequence_number=letter.sequence_number,
            message_id=letter.message_id,
            seen_at=at,
            dead_lettered_at=enqueued(letter),
            reason=letter.reason,
            fate=fate,
            fate_at=at,
            by=by,
        )


class VanishedLetter(WatchRecord):
    """A dead letter that left its queue without being applied by its subscriber (its record,
    fate `vanished`), and what recovers it (see the module)."""

    #: when it was found gone
    left_at: datetime
    #: whether its event is still stored (a re-drive can send it again)
    stored: bool
    #: when the event was created (the re-drive's `since`), when stored
    created_at: datetime | None
    #: the action that recovers it, in words (the console offers it as a button)
    recover: str


def _record_id(subscription: str, event_id: str) -> str:
    digest = hashlib.sha256(f"{subscription}\n{event_id}".encode()).hexdigest()[:32]
    return f"watch-{digest}"


class DeadLetterWatch:
    """The watch over the outbox's store (see the module)."""

    def __init__(self, parts: Parts) -> None:
        self._parts = parts

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self._parts.clock(), UTC)

    async def records(self) -> list[WatchRecord]:
        """Every record kept (one partition)."""
        documents = await answered(
            COSMOS_DB, self._parts.store.of_type(WATCH_TYPE, partition_key=WATCH_PARTITION)
        )
        return [WatchRecord.model_validate(d["record"]) for d in documents if "record" in d]

    async def _keep(self, record: WatchRecord) -> None:
        settled = record.fate in SETTLED
        await answered(
            COSMOS_DB,
            self._parts.store.upsert(
                {
                    "id": _record_id(record.subscription, record.event_id),
                    "partitionKey": WATCH_PARTITION,
                    "type": WATCH_TYPE,
                    "record": record.model_dump(mode="json"),
                    "ttl": KEPT_SECONDS if settled else -1,
                }
            ),
        )

    async def handled(
        self,
        entity: DeadLetterEntity,
        letters: list[Described],
        *,
        fate: Literal["resubmitted", "discarded"],
        by: str,
    ) -> None:
        """An operators' action took these dead letters out of `entity`'s queue. Recorded
        before the watch can take them for gone (failures logged by the caller's audit, never
        raised here: the action is done)."""
        if entity.kind != "subscription":
            return
        now = self._now()
        for described in letters:
            if described.event_id and described.is_outbox_message:
                await self._keep(WatchRecord.of(entity.name, described, fate, now, by))

    async def sweep(self, scan: Any) -> list[VanishedLetter]:
        """One look at each watched subscription whose subscriber the app knows (`scan`:
        `DeadLetterOperators.scan`); the vanished dead letters after it."""
        stores = self._parts.subscribers()
        kept = {(r.subscription, r.event_id): r for r in await self.records()}
        now = self._now()
        for entity in self._parts.watched:
            store = stores.get(entity.name)
            if entity.kind != "subscription" or store is None:
                continue
            letters, more = await answered(SERVICE_BUS, scan(entity))
            present = {d.event_id: d for d in letters if d.event_id and d.is_outbox_message}
            last_read = letters[-1].letter.sequence_number if letters else 0
            for event_id, described in present.items():
                known = kept.get((entity.name, event_id))
                if known is None or known.fate not in ("dead-lettered", "left", "vanished"):
                    await self._keep(WatchRecord.of(entity.name, described, "dead-lettered", now))
            for (name, event_id), record in kept.items():
                if name != entity.name or event_id in present:
                    continue
                if record.fate not in ("dead-lettered", "left", "vanished", "resubmitted"):
                    continue
                if record.fate == "dead-lettered" and more and record.sequence_number > last_read:
                    continue  # beyond what was read: not known to be gone
                fate = await self._fate_at(store, record)
                if fate is not None:
                    await self._keep(record.model_copy(update={"fate": fate, "fate_at": now}))
                elif record.fate == "dead-lettered":
                    await self._keep(record.model_copy(update={"fate": "left", "fate_at": now}))
                elif (
                    record.fate == "left"
                    and (now - record.fate_at).total_seconds() >= GRACE_SECONDS
                ):  # its fate's time stays when it was found gone ("gone 33 s ago", not "just now")
                    await self._keep(record.model_copy(update={"fate": "vanished"}))
        return await self.vanished()

    async def _fate_at(self, store: AsyncDocumentStore, record: WatchRecord) -> Fate | None:
        """`applied` (received: applied, or held behind a gap) or `given up` when the
        subscriber says so; None while it does not."""
        if not record.aggregate_id:
            return None
        fate = await answered(
            COSMOS_DB,
            event_fate(
                store, record.event_id, aggregate_id=record.aggregate_id, version=record.version
            ),
        )
        return {"not received": None, "given up": "given up"}.get(fate.state, "applied")

    async def vanished(self) -> list[VanishedLetter]:
        """The dead letters that vanished, unresolved, each with what recovers it."""
        found = []
        for record in await self.records():
            if record.fate != "vanished":
                continue
            document = await answered(
                COSMOS_DB, self._parts.store.find(EVENT_TYPE, record.event_id)
            )
            created = created_at_of(document) if document else None
            found.append(
                of_attributes(
                    VanishedLetter,
                    record,
                    left_at=record.fate_at,
                    stored=document is not None,
                    created_at=created,
                    recover=_recover(record, stored=document is not None, created=created),
                )
            )
        return sorted(found, key=lambda v: (v.subscription, v.left_at))


def _recover(record: WatchRecord, *, stored: bool, created: datetime | None) -> str:
    what = f"{record.aggregate_type} {record.aggregate_id} version {record.version}"
    if stored and created is not None and record.aggregate_type and record.aggregate_id:
        return (
            f"re-drive {record.aggregate_type} {record.aggregate_id} since "
            f"{created.isoformat()} to subscription {record.subscription} only: its subscriber "
            f"applies {what} (a MessageId of its own: never dropped as a duplicate) and what it "
            f"held after it, and drops what it has (cosmos-outbox redrive --since "
            f"{created.isoformat()} --aggregate-type {record.aggregate_type} --aggregate-id "
            f"{record.aggregate_id} --subscription {record.subscription})"
        )
    return (
        f"its event is no longer stored: give {what} up at {record.subscription} (cosmos-outbox "
        f"subscribers release {record.subscription} ...): its subscriber records an accepted "
        "gap and applies what it held after it"
    )
