"""What a bulk operation acts on, by where its items are (`Items`): a subscription's (or queue's)
dead letters (`LetterItems`: resubmitted or discarded through the dead letters' use cases), or
quarantined events (`QuarantineItems`: replayed or discarded through the quarantine's). Each
counts its items when the operation begins (and fixes its limit: items that come later are not
the operation's), picks the next batch after a cursor, acts on a batch (each item's effect
idempotent: acted on again after a worker died, it sends what the first attempt sent, under the
same MessageId, which the topic's duplicate detection drops), and, for a canary, looks for its
items failed again (back as dead letters, found by their MessageIds after the watermark each
dead-letter queue had when the canary was sent) or applied (by a subscriber whose projection
container the app knows)."""

from __future__ import annotations

import abc
import bisect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from cosmos_outbox._mapper import CanaryItem, OperationCounts, to_message
from cosmos_outbox._mapper.failure import FailureRecord
from cosmos_outbox._quarantine import Quarantine, QuarantinedEvent
from cosmos_outbox._records import OutboxRecord
from cosmos_outbox.errors import (
    DependencyUnavailableError,
    NotFoundError,
    PublishFailedError,
    TransientStoreError,
)
from cosmos_outbox.operations._dead_letters import (
    DeadLetterOperators,
    discard_of,
    letters_will_see,
    resubmission,
)
from cosmos_outbox.operations._failures import Failures, letter_of, record_key
from cosmos_outbox.operations._letters import Described, describe
from cosmos_outbox.operations._quarantined import (
    QuarantineOperators,
    notice_of,
    quarantine_will_see,
)
from cosmos_outbox.ports import AsyncDocumentStore, DeadLetterEntity, Outgoing
from cosmos_outbox.subscriber._bookkeeping import inbox_id, last_version
from cosmos_outbox.telemetry import error_type

__all__ = ["ItemOutcome", "Items", "LetterItems", "Picked", "QuarantineItems", "RecordItems"]

#: How old a group's list of open records' keys may be at an operation's count and end before
#: it is read again (between them its steps walk the list read once).
READ_AGAIN_SECONDS = 30.0
#: The operations whose lists of keys the operators keep (the last ones).
LISTS_KEPT = 4
#: A failure records' operation's batch: one transactional batch with their group's summary.
RECORDS_PER_BATCH = 99
#: Errors that leave an item for the next attempt (a dependency that did not answer).
PASSING = (DependencyUnavailableError, PublishFailedError, TransientStoreError)


@dataclass(frozen=True)
class Picked:
    """An item of the next batch: its key, and what its canary looks for (a retry's)."""

    key: str
    canary: CanaryItem | None = None


@dataclass(frozen=True)
class ItemOutcome:
    """What acting on an item did: done (`sent`: a message went out for it), failed (`why`),
    gone (not there any more; `sent`: had it been done, a message went out for it), or later
    (not now: locked by another receiver, a dependency that did not answer; tried again at the
    next tick)."""

    key: str
    state: Literal["done", "failed", "gone", "later"]
    sent: bool = False
    why: str | None = None


class Items(abc.ABC):
    """An operation's items (see the module)."""

    #: Items acted on per batch (None: the worker's `BATCH`).
    batch: int | None = None

    @abc.abstractmethod
    async def count(self) -> tuple[int, str | None]:
        """How many items the operation holds now, and its limit (the key of the last one;
        None: none)."""

    @abc.abstractmethod
    async def next(
        self, cursor: str | None, limit: str | None, size: int
    ) -> tuple[list[Picked], str | None]:
        """Up to `size` items after `cursor` (None: from the first), none beyond `limit`; and
        the cursor after them. No item: none left."""

    @abc.abstractmethod
    async def act(self, keys: Sequence[str]) -> list[ItemOutcome]:
        """Act on the items `keys` names (each one's outcome)."""

    @abc.abstractmethod
    def will_see(self, counts: OperationCounts) -> str:
        """What subscribers will see of what the operation did (its counts)."""

    async def watermarks(self) -> dict[str, int]:
        """Per dead-letter queue a canary's failures come back to, its last sequence number."""
        return {}

    async def failed_again(
        self, canary: Sequence[CanaryItem], watermarks: Mapping[str, int]
    ) -> list[str]:
        """The canary's items back as dead letters since `watermarks` (each said)."""
        return []

    async def applied(self, canary: Sequence[CanaryItem]) -> tuple[int, str] | None:
        """How many of the canary's items a subscriber the app knows applied, and which
        subscriber (None: none it knows receives them)."""
        return None


def _canary_item(
    key: str, message_id: str | None, event: Described | FailureRecord | QuarantinedEvent
) -> CanaryItem:
    """An item of a canary, as sent: its key, the MessageId it is sent with, and the event it
    carries (its id, aggregate and version, as a dead letter's description, a failure record or
    a quarantine record names them)."""
    return CanaryItem(
        key=key,
        message_id=message_id,
        event_id=event.event_id,
        aggregate_type=event.aggregate_type,
        aggregate_id=event.aggregate_id,
        version=event.version,
    )


class _Watching:
    """Where a canary's failures come back: dead-letter queues, peeked after a watermark."""

    def __init__(self, letters: DeadLetterOperators, entities: Sequence[DeadLetterEntity]):
        self._letters = letters
        self._watched = tuple(entities)

    async def watermarks(self) -> dict[str, int]:
        marks = {}
        for entity in self._watched:
            last = 0
            async for page in self._letters.pages(entity, 0):
                last = max([last, *(d.letter.sequence_number for d in page)])
            marks[entity.name] = last
        return marks

    async def failed_again(
        self, canary: Sequence[CanaryItem], watermarks: Mapping[str, int]
    ) -> list[str]:
        wanted = {c.message_id for c in canary if c.message_id}
        # a failure record that failed again is its first dead letter with one more attempt
        # (its MessageId the first's): known by its event id, open again after the watermark
        records = self._letters.keeps_records
        events = {c.event_id for c in canary if c.event_id} if records else set()
        found = []
        for entity in self._watched:
            async for page in self._letters.pages(entity, watermarks.get(entity.name, 0)):
                found += [
                    f"{d.event_id or d.letter.message_id} at {entity.name}: "
                    f"{d.letter.reason or '-'}: {d.letter.description or '-'}"
                    for d in page
                    if d.letter.message_id in wanted or d.event_id in events
                ]
        return found


class LetterItems(_Watching, Items):
    """The dead letters of `entity` that `matches` holds true of, resubmitted or discarded
    (with `reason`); keys are their sequence numbers. `subscribers()`: the projection
    containers of the subscribers the app knows, by subscription (a canary seen applied)."""

    def __init__(
        self,
        letters: DeadLetterOperators,
        entity: DeadLetterEntity,
        action: Literal["resubmit", "discard"],
        matches: Callable[[Described], bool],
        *,
        reason: str | None,
        subscribers: Callable[[], Mapping[str, AsyncDocumentStore]],
        operation: str | None = None,
    ) -> None:
        super().__init__(letters, [entity])
        self._entity, self._action, self._matches = entity, action, matches
        self._reason, self._subscribers = reason, subscribers
        self._operation = operation

    async def count(self) -> tuple[int, str | None]:
        count, last = 0, 0
        async for page in self._letters.pages(self._entity, 0):
            count += sum(1 for d in page if self._matches(d))
            last = max([last, *(d.letter.sequence_number for d in page)])
        return count, str(last) if last else None

    async def next(
        self, cursor: str | None, limit: str | None, size: int
    ) -> tuple[list[Picked], str | None]:
        after, upper = int(cursor or 0), int(limit or 0)
        picked: list[Picked] = []
        async for page in self._letters.pages(self._entity, after):
            for described in page:
                number = described.letter.sequence_number
                if number > upper:
                    return picked, str(after)
                after = number
                if self._matches(described):
                    picked.append(Picked(str(number), self._canary(described)))
                    if len(picked) == size:
                        return picked, str(after)
        return picked, str(after)

    def _canary(self, described: Described) -> CanaryItem | None:
        if self._action != "resubmit":
            return None
        message_id = resubmission(described, self._entity).message_id
        return _canary_item(str(described.letter.sequence_number), message_id, described)

    async def act(self, keys: Sequence[str]) -> list[ItemOutcome]:
        numbers = sorted(int(k) for k in keys)
        if not numbers:
            return []
        span = numbers[-1] - numbers[0] + 1
        letters, _ = await self._letters.scan(self._entity, after=numbers[0] - 1, limit=span)
        wanted = set(numbers)
        present = {
            d.letter.sequence_number: d for d in letters if d.letter.sequence_number in wanted
        }
        # one gone from its queue was moved by an attempt that died (when it was in flight):
        # a resubmit always sent its resubmission first
        resubmits = self._action == "resubmit"
        outcomes = [
            ItemOutcome(str(n), "gone", sent=resubmits) for n in numbers if n not in present
        ]
        if not present:
            return outcomes
        try:
            report = await self._letters.act_on(
                self._action,
                self._entity,
                [present[n] for n in sorted(present)],
                reason=self._reason,
                budget=None,
                operation=self._operation,
            )
        except PASSING as exc:
            why = f"{error_type(exc)}: {exc!s:.200}"
            return outcomes + [ItemOutcome(str(n), "later", why=why) for n in sorted(present)]
        for handled in report.handled:
            key, failure = str(handled.sequence_number), handled.failure
            if failure is None:
                sent = handled.sent_message_id is not None
                outcomes.append(ItemOutcome(key, "done", sent=sent))
            elif failure.startswith("not found"):  # locked by a receiver (a worker that died)
                outcomes.append(ItemOutcome(key, "later", why=failure))
            else:
                outcomes.append(ItemOutcome(key, "failed", why=f"#{key}: {failure}"))
        return outcomes

    def will_see(self, counts: OperationCounts) -> str:
        return letters_will_see(self._action, self._entity, done=counts.done, notices=counts.sent)

    async def applied(self, canary: Sequence[CanaryItem]) -> tuple[int, str] | None:
        store = self._subscribers().get(self._entity.name)
        if store is None:
            return None
        return await applied_in(store, canary), self._entity.name


class RecordItems(Items):
    """The open failure records of `group` (OUTBOX_FAILURE_INGEST) at `entity`, retried (each
    one's message sent again as a dead letter's resubmission is, its number its attempts', so
    that one sent again after a worker died has the same MessageId) or discarded (its discard
    notice sent; archived, with `reason`); each then marked resolved or archived with what was
    done, when, by whom and in which operation. Keys: `record_key`. A canary fails again when
    one of its records is open again, failed after the canary was sent.

    A batch is `RECORDS_PER_BATCH` records: read by one query, resent in one send, settled in
    one transactional batch with their group's summary (Cosmos DB's 100 operations)."""

    batch = RECORDS_PER_BATCH

    def __init__(
        self,
        failures: Failures,
        letters: DeadLetterOperators,
        entity: DeadLetterEntity,
        group: str,
        action: Literal["resubmit", "discard"],
        *,
        operation: str,
        by: str,
        reason: str | None,
        subscribers: Callable[[], Mapping[str, AsyncDocumentStore]],
        clock: Callable[[], float],
        listed: dict[str, tuple[float, list[str]]] | None = None,
        picks_canary: bool = True,
    ) -> None:
        self._failures, self._letters, self._entity = failures, letters, entity
        self._group, self._action, self._operation = group, action, operation
        self._by, self._reason, self._subscribers = by, reason, subscribers
        self._clock = clock
        self._listed = listed if listed is not None else {}
        self._picks_canary = picks_canary

    async def _open(self, *, fresh: bool = False) -> list[str]:
        """The keys of the group's open records, in order (`Failures.open_keys`: ids and first
        failures only, paged): read once for the operation and kept between its steps
        (`listed`, by its operators; the last `LISTS_KEPT` operations'), so that a step picks
        after its cursor by bisection, not by reading the group again -- an operation over
        100,000 is linear. `act` reads each record again before it acts, so a list read
        earlier picks the same items a fresh one would (those that came later are past the
        operation's limit); `fresh`: read again if older than READ_AGAIN_SECONDS (the
        operation's end: one moved into the group meanwhile is not missed)."""
        at, keys = self._listed.get(self._operation, (float("-inf"), []))
        stale = self._clock() - at > READ_AGAIN_SECONDS
        if self._operation not in self._listed or (fresh and stale):
            keys = await self._failures.open_keys(self._group)
            self._listed.pop(self._operation, None)
            while len(self._listed) >= LISTS_KEPT:
                del self._listed[next(iter(self._listed))]  # the oldest list
            self._listed[self._operation] = (self._clock(), keys)
        return keys

    async def count(self) -> tuple[int, str | None]:
        keys = await self._open(fresh=True)
        return len(keys), keys[-1] if keys else None

    async def next(
        self, cursor: str | None, limit: str | None, size: int
    ) -> tuple[list[Picked], str | None]:
        after, upper = cursor or "", limit or ""
        keys = _after(await self._open(), after, upper, size)
        if not keys:  # the end of the list: once more, read again
            keys = _after(await self._open(fresh=True), after, upper, size)
        if not keys:
            return [], cursor
        if not (self._picks_canary and self._action == "resubmit"):
            return [Picked(k) for k in keys], keys[-1]
        records = await self._failures.read_many(self._group, [_record_id(k) for k in keys])
        return [
            Picked(k, self._canary(records[_record_id(k)]) if _record_id(k) in records else None)
            for k in keys
        ], keys[-1]

    def _canary(self, record: FailureRecord) -> CanaryItem | None:
        if self._action != "resubmit":
            return None
        described = describe(letter_of(record))
        message_id = resubmission(described, self._entity).message_id
        return _canary_item(record_key(record), message_id, record)

    async def act(self, keys: Sequence[str]) -> list[ItemOutcome]:
        outcomes: list[ItemOutcome] = []
        present: list[FailureRecord] = []
        resubmits = self._action == "resubmit"
        stored = await self._failures.read_many(self._group, [_record_id(k) for k in keys])
        for key in keys:
            record = stored.get(_record_id(key))
            if record is None or record.state != "open":
                # settled already (by an attempt that died after it), or gone
                outcomes.append(ItemOutcome(key, "gone", sent=resubmits))
            else:
                present.append(record)
        if not present:
            return outcomes
        described = [describe(letter_of(r)) for r in present]
        if resubmits:
            sent: list[Outgoing | None] = [resubmission(d, self._entity) for d in described]
        else:
            sent = [
                discard_of(d, self._entity, reason=self._reason or "", by=self._by)
                for d in described
            ]
        try:
            await self._letters.send(self._entity, [m for m in sent if m is not None])
            await self._failures.settle(
                present,
                "resolved" if resubmits else "archived",
                what="retried" if resubmits else "archived",
                by=self._by,
                operation=self._operation,
                note=self._reason,
            )
        except PASSING as exc:
            why = f"{error_type(exc)}: {exc!s:.200}"
            return outcomes + [ItemOutcome(record_key(r), "later", why=why) for r in present]
        except Exception as exc:
            why = f"{error_type(exc)}: {exc!s:.200}"
            return outcomes + [ItemOutcome(record_key(r), "failed", why=why) for r in present]
        return outcomes + [
            ItemOutcome(record_key(r), "done", sent=m is not None)
            for r, m in zip(present, sent, strict=True)
        ]

    def will_see(self, counts: OperationCounts) -> str:
        return letters_will_see(self._action, self._entity, done=counts.done, notices=counts.sent)

    async def watermarks(self) -> dict[str, int]:
        return {"failedAfter": int(self._clock())}

    async def failed_again(
        self, canary: Sequence[CanaryItem], watermarks: Mapping[str, int]
    ) -> list[str]:
        since = watermarks.get("failedAfter", 0)
        found = []
        for item in canary:
            record = await self._failures.read(self._group, item.key.rpartition("|")[2])
            if record is None:  # failed again of another cause: moved to its group
                record = await self._moved(item.key.rpartition("|")[2])
            if (
                record is not None
                and record.state == "open"
                and record.last_failed_at.timestamp() >= since
            ):
                found.append(
                    f"{record.event_id or record.message_id} at {self._entity.name}: "
                    f"{record.reason or '-'}: {record.description or '-'}"
                )
        return found

    async def _moved(self, record_id: str) -> FailureRecord | None:
        try:
            return await self._failures.record(record_id)
        except NotFoundError:
            return None

    async def applied(self, canary: Sequence[CanaryItem]) -> tuple[int, str] | None:
        store = self._subscribers().get(self._entity.name)
        if store is None:
            return None
        return await applied_in(store, canary), self._entity.name


async def applied_in(store: AsyncDocumentStore, canary: Sequence[CanaryItem]) -> int:
    """How many of the canary's items the subscriber's projection container shows applied
    (its version at or below the projection's; one without a version: its inbox record)."""
    seen = 0
    for item in canary:
        if not item.aggregate_id:
            continue
        if item.version is None or item.version < 1:
            found = item.event_id and await store.read(item.aggregate_id, inbox_id(item.event_id))
            seen += 1 if found else 0
            continue
        projection = await store.read(item.aggregate_id, item.aggregate_id)
        seen += 1 if item.version <= last_version(projection) else 0
    return seen


class QuarantineItems(_Watching, Items):
    """The quarantined events (neither resolved nor discarded) that `matches` holds true of,
    quarantined by the operation's count (its limit is that time), replayed or discarded (with
    `reason`); keys are their event ids, taken in their order. A replay's canary fails again
    when it is set aside again, or comes back as a dead letter at a watched subscription."""

    def __init__(
        self,
        quarantine: Quarantine,
        operators: QuarantineOperators,
        action: Literal["retry", "discard"],
        matches: Callable[[QuarantinedEvent], bool],
        *,
        reason: str | None,
        letters: DeadLetterOperators,
        clock: Callable[[], datetime],
    ) -> None:
        watched = [e for e in letters.watched if e.kind == "subscription"]
        super().__init__(letters, watched if action == "retry" else [])
        self._quarantine, self._operators = quarantine, operators
        self._action, self._matches, self._reason = action, matches, reason
        self._clock = clock

    async def _open(self, after: str, limit: str | None) -> list[QuarantinedEvent]:
        cutoff = datetime.fromisoformat(limit) if limit else self._clock()
        return [
            r
            for r in await self._quarantine.unresolved_after(after)
            if self._matches(r) and (r.quarantined_at is None or r.quarantined_at <= cutoff)
        ]

    async def count(self) -> tuple[int, str | None]:
        now = self._clock()
        return len(await self._open("", now.isoformat())), now.isoformat()

    async def next(
        self, cursor: str | None, limit: str | None, size: int
    ) -> tuple[list[Picked], str | None]:
        found = (await self._open(cursor or "", limit))[:size]
        picked = [Picked(r.event_id, self._canary(r)) for r in found]
        return picked, found[-1].event_id if found else cursor

    def _canary(self, record: QuarantinedEvent) -> CanaryItem | None:
        if self._action != "retry" or not isinstance(record.event, OutboxRecord):
            return None
        return _canary_item(record.event_id, to_message(record.event).message_id, record)

    async def act(self, keys: Sequence[str]) -> list[ItemOutcome]:
        return [await self._one(key) for key in keys]

    async def _one(self, event_id: str) -> ItemOutcome:
        try:
            record = await self._operators.get(event_id)
            if self._action == "discard":
                if not record.discarded:  # discarded already: by an earlier attempt
                    await self._operators.discard(event_id, self._reason or "")
                sent = notice_of(record, reason="", by="") is not None
                return ItemOutcome(event_id, "done", sent=sent)
            if record.discarded:
                return ItemOutcome(event_id, "failed", why=f"{event_id}: discarded, not sent")
            result = await self._operators.replay(event_id)
        except NotFoundError:
            return ItemOutcome(event_id, "gone")
        except PASSING as exc:
            return ItemOutcome(event_id, "later", why=f"{error_type(exc)}: {exc!s:.200}")
        if result.resolved:
            return ItemOutcome(event_id, "done", sent=True)
        return ItemOutcome(
            event_id, "failed", why=f"{event_id}: still quarantined: {result.reason}"
        )

    def will_see(self, counts: OperationCounts) -> str:
        return quarantine_will_see(self._action, done=counts.done, notices=counts.sent)


def _record_id(key: str) -> str:
    """The record id in a `record_key`."""
    return key.rpartition("|")[2]


def _after(keys: list[str], after: str, upper: str, size: int) -> list[str]:
    """Up to `size` of the sorted `keys` after `after`, none beyond `upper`."""
    start = bisect.bisect_right(keys, after)
    return [k for k in keys[start : start + size] if k <= upper]
