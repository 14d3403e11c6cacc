"""The quarantine: stored events that cannot become messages, kept in the outbox's container as
`quarantinedEvent` documents (no TTL) in the event's own partition, which the relay skips;
listed, replayed and discarded by the operators (a discarded record is kept, `discarded`, with
who discarded it and why, until it expires: the journey of its event shows it). Everything a
quarantine record is, and how it is kept, is here: its document, the record read back
(`QuarantinedEvent`) and the store's use of it (the async API's, over
`cosmos_outbox.ports.AsyncDocumentStore`; the sync API runs it).

With the failure records kept (OUTBOX_FAILURE_INGEST `true` or `elsewhere`), each quarantine is
also a `failedMessage` record of the pseudo-entity `quarantine` (`QuarantineFailures`, the
failures' own write path: `cosmos_outbox.operations._failures`), in its cause's group with the
group's summary counted in the same batch: the failure groups count the quarantine exactly. The
failure record is written first, then the quarantine record: a crash between the two leaves the
event for the relay to set aside again, and that second write of the same quarantine (the same
attempt: the record's replays) counts nothing twice. A replay or a discard writes the other way
round: the failure record settled (resolved, archived), then the quarantine record; a crash
between the two leaves a quarantine record its failure record no longer counts open, which the
quarantine's adoption (`Operations.quarantine.adopt`) brings to its failure record's state
(`Quarantine.settled_as`). A replay or a discard that found no failure record to settle (one set
aside before they were kept) looks for it once more after its quarantine record is written: an
adoption that ran meanwhile may have kept it, open (the adoption reads the quarantine record
again after its write for the same reason: between them, each write is seen by one side).

The relay's write of a quarantine record, a replay's and a discard's are made over the record
as each read it (its etag): one that another wrote meanwhile is read again and written again,
its failure record kept or settled again first. An event set aside again over a settled
failure record (resolved, archived: the relay racing a replay, or a replay or a discard
stopped between its two writes) opens that record again, one more attempt
(`Failures.quarantined`): whichever writes the quarantine record last, the two agree."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from cosmos_outbox._mapper import outbox_record, parse_time, unreadable, without_system_keys
from cosmos_outbox._mapper.failure import FailureRecord, FailureState
from cosmos_outbox._records import LegacyEvents, OutboxRecord, PoisonEventError, Unreadable
from cosmos_outbox._sync_over_async import as_async
from cosmos_outbox.errors import NotFoundError, PreconditionFailedError, StoreUnavailableError
from cosmos_outbox.ports import AsyncDocumentStore, DocumentStore, Page

QUARANTINE_TYPE = "quarantinedEvent"
#: The records not resolved, counted by the store: the quarantine's records selected by the
#: indexed `type` (nothing else is read), those without a status (written before the admin
#: API) counted as quarantined.
_UNRESOLVED = (
    "SELECT VALUE COUNT(1) FROM c WHERE c.type = @type "
    "AND (NOT IS_DEFINED(c.status) OR NOT (c.status IN ('resolved', 'discarded')))"
)
#: The records not resolved whose event id sorts after @after (a bulk operation's next batch).
_UNRESOLVED_AFTER = (
    "SELECT * FROM c WHERE c.type = @type AND c.eventId > @after "
    "AND (NOT IS_DEFINED(c.status) OR NOT (c.status IN ('resolved', 'discarded')))"
)
#: The kind named in a 404 for a quarantine record ("no such quarantined event").
QUARANTINED_EVENT = "quarantined event"
#: Writes of a quarantine record tried over one written meanwhile before one gives up.
WRITES = 10


@dataclass(frozen=True)
class QuarantinedEvent:
    """A quarantine record: the event set aside (parsed as the relay parses it: `event` is what
    a replay sends again), why, when, how often it was replayed, and whether it is resolved."""

    event_id: str
    aggregate_type: str | None
    #: the event's aggregate: its session id (its partition's key when unreadable)
    aggregate_id: str
    action: str | None
    version: int | None
    reason: str
    quarantined_at: datetime | None
    replays: int
    resolved_at: datetime | None
    event: OutboxRecord | Unreadable = field(repr=False)
    #: when an operator gave it up (the record is kept until it expires), who, and why
    discarded_at: datetime | None = None
    discarded_by: str | None = None
    discard_reason: str | None = None
    #: the partition the record (and its event) is kept in: the aggregate's own, or the
    #: transaction's that published it with a session id of its own
    partition_key: str = ""

    @property
    def resolved(self) -> bool:
        return self.resolved_at is not None

    @property
    def discarded(self) -> bool:
        return self.discarded_at is not None

    @property
    def status(self) -> str:
        """`quarantined`, `resolved` (replayed and sent) or `discarded` (given up)."""
        if self.discarded:
            return "discarded"
        return "resolved" if self.resolved else "quarantined"


def quarantine_document(
    document: Mapping[str, Any],
    *,
    reason: str,
    now: datetime | None = None,
    previous: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A copy of a poison event kept (no TTL) with the reason, in the event's own partition.
    The relay skips it: it is not a `domainEvent`. Set aside again (a relay retry, a re-drive
    of an event that still fails) over an existing record (`previous`), it keeps that record's
    first quarantine time and replay count, and is quarantined (again) with the new reason."""
    source_id = str(document.get("id", "unknown"))
    partition = document.get("partitionKey")
    kept: dict[str, Any] = {}
    if previous is not None:
        if isinstance(previous.get("quarantinedAt"), str):
            kept["quarantinedAt"] = previous["quarantinedAt"]
        if isinstance(previous.get("replays"), int):
            kept["replays"] = previous["replays"]
    return {
        "id": quarantine_id(source_id),
        "partitionKey": partition if isinstance(partition, str) else "quarantine",
        "type": QUARANTINE_TYPE,
        "eventId": source_id,
        "reason": reason,
        "status": "quarantined",
        "quarantinedAt": (now or datetime.now(UTC)).isoformat(),
        "replays": 0,
        "data": without_system_keys(document),
        "ttl": -1,
        **kept,
        # where the aggregate's documents are found (cosmos_outbox.operations.partitions_of)
        **(
            {"aggregateId": document["aggregateId"]}
            if isinstance(document.get("aggregateId"), str)
            else {}
        ),
    }


def quarantine_id(event_id: str) -> str:
    return f"quarantine-{event_id}"


def quarantined_event(
    document: Mapping[str, Any], *, legacy: LegacyEvents | None = None
) -> QuarantinedEvent:
    """A stored quarantine record, typed; the event it holds parsed as the relay parses it.
    Records written before the admin API (no status, time or replays) read as quarantined,
    quarantined at the document's `_ts`."""
    stored = document.get("data")
    stored = stored if isinstance(stored, Mapping) else {}
    event_id = str(
        document.get("eventId")
        or stored.get("id")
        or str(document.get("id", "")).removeprefix("quarantine-")
    )
    try:
        event: OutboxRecord | Unreadable = outbox_record(stored, legacy=legacy)
    except PoisonEventError as exc:
        event = unreadable(stored, str(exc), legacy=legacy)
    at = parse_time(document.get("quarantinedAt"))
    if at is None and isinstance(document.get("_ts"), int | float):
        at = datetime.fromtimestamp(float(document["_ts"]), UTC)
    replays = document.get("replays")
    partition = document.get("partitionKey")
    partition = partition if isinstance(partition, str) else "quarantine"
    return QuarantinedEvent(
        event_id=event_id,
        aggregate_type=event.aggregate_type,
        aggregate_id=event.aggregate_id or partition,
        action=event.action,
        version=event.version,
        reason=str(document.get("reason", "")),
        quarantined_at=at,
        replays=replays if type(replays) is int else 0,
        resolved_at=parse_time(document.get("resolvedAt")),
        event=event,
        discarded_at=parse_time(document.get("discardedAt")),
        discarded_by=_text_or_none(document.get("discardedBy")),
        discard_reason=_text_or_none(document.get("discardReason")),
        partition_key=partition,
    )


def quarantined_of_failure(
    record: FailureRecord, *, legacy: LegacyEvents | None = None
) -> QuarantinedEvent:
    """The quarantine record a quarantine's failure record (entity `quarantine`) stands for, as
    far as it says: its event (the stored document, its body), where it is kept, its reason,
    when it was first set aside and how often replayed (its last attempt's number)."""
    try:
        data = json.loads(record.body)
    except ValueError:
        data = {}
    partition = record.properties.get("partitionKey")
    return quarantined_event(
        {
            "id": quarantine_id(record.event_id or ""),
            "eventId": record.event_id,
            "partitionKey": partition if isinstance(partition, str) else "quarantine",
            "reason": record.reason or "",
            "status": "quarantined",
            "quarantinedAt": record.first_failed_at.isoformat(),
            "replays": record.attempts[-1].sequence_number if record.attempts else 0,
            "data": data if isinstance(data, dict) else {},
        },
        legacy=legacy,
    )


def discarded_event_ids(documents: Iterable[Mapping[str, Any]]) -> set[str]:
    """The ids of the events whose quarantine records say they were discarded."""
    return {str(d.get("eventId")) for d in documents if d.get("status") == "discarded"}


def _text_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


def replayed_document(
    document: Mapping[str, Any],
    entry: QuarantinedEvent,
    *,
    resolved: bool,
    reason: str,
    ttl_seconds: int,
    now: datetime,
) -> dict[str, Any]:
    """The record after a replay: resolved (kept for audit, expiring after `ttl_seconds`), or
    still quarantined with the new reason; either way one more replay counted."""
    updated = without_system_keys(document)
    updated.update(
        {
            "eventId": entry.event_id,
            "replays": entry.replays + 1,
            "quarantinedAt": (entry.quarantined_at or now).isoformat(),
            "lastReplayAt": now.isoformat(),
        }
    )
    if resolved:
        updated.update({"status": "resolved", "resolvedAt": now.isoformat(), "ttl": ttl_seconds})
    else:
        updated.update({"status": "quarantined", "reason": reason, "ttl": -1})
        updated.pop("resolvedAt", None)
    return updated


def discarded_document(
    document: Mapping[str, Any],
    event_id: str,
    *,
    by: str,
    reason: str,
    ttl_seconds: int,
    now: datetime,
) -> dict[str, Any]:
    """The record after a discard by `by` for `reason`: kept (no longer counted, never
    replayed) until it expires after `ttl_seconds`."""
    updated = without_system_keys(document)
    updated.update(
        {
            "eventId": event_id,
            "status": "discarded",
            "discardedAt": now.isoformat(),
            "discardedBy": by,
            "discardReason": reason,
            "ttl": ttl_seconds,
        }
    )
    return updated


#: Answers in a row that may make no progress (empty, with the token asked with) before the
#: quarantine's listing gives up with StoreUnavailableError.
STALLED_ANSWERS = 50


def _stalled(page: Page[dict[str, Any]], asked_with: str | None, stalled: int) -> int:
    """How many answers in a row made no progress, this one counted."""
    if page.items or page.continuation_token is None or page.continuation_token != asked_with:
        return 0
    if stalled + 1 >= STALLED_ANSWERS:
        raise StoreUnavailableError(
            f"the store answered the quarantine's listing {STALLED_ANSWERS} times in a row "
            "with no record and the same continuation token: try again later"
        )
    return stalled + 1


class QuarantineFailures(Protocol):
    """Where each quarantine is kept as a failure record too (`Failures`: see the module)."""

    async def quarantined(self, *entries: QuarantinedEvent) -> object:
        """Keep `entries` (as they are about to be written), each as one attempt numbered by
        its replays (the same quarantine written again: nothing counted twice)."""
        ...

    async def quarantine_settled(
        self,
        event_id: str,
        state: FailureState,
        *,
        what: str,
        by: str,
        note: str | None = None,
    ) -> object:
        """The event's record `resolved` (replayed and sent) or `archived` (discarded)."""
        ...


class Quarantine:
    """The quarantine records of one container: found by event id (a query on the indexed
    `type`, few documents), then read and written by point operations in their partition;
    each kept as a failure record too when `failures` is given (see the module)."""

    def __init__(
        self,
        store: AsyncDocumentStore | DocumentStore,
        *,
        legacy: LegacyEvents | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        failures: QuarantineFailures | None = None,
    ) -> None:
        self._store = as_async(store)
        self._legacy = legacy
        self._clock = clock
        self.failures = failures

    async def put(self, event: OutboxRecord | Unreadable, *, reason: str) -> None:
        """Keep the event with the reason (idempotent: the same event is one record; set aside
        again, it keeps its history and is quarantined again with the new reason; a discarded
        one stays discarded). Written over the record as read (its etag): one written meanwhile
        (a replay or a discard between the read and the write) is read again and the event set
        aside over it, up to `WRITES` times (PreconditionFailedError after)."""
        for _ in range(WRITES):
            fresh = quarantine_document(event.document, reason=reason, now=self._clock())
            previous = await self._store.read(fresh["partitionKey"], fresh["id"])
            if previous is not None and previous.get("status") == "discarded":
                return  # given up: it stays so (a re-drive or a lease read again sees it again)
            if previous is not None:
                fresh = quarantine_document(
                    event.document, reason=reason, now=self._clock(), previous=previous
                )
            if self.failures is not None:  # first: a crash before the write is set aside again
                await self.failures.quarantined(quarantined_event(fresh, legacy=self._legacy))
            try:
                if previous is None:
                    await self._store.upsert(fresh)
                else:
                    await self._store.replace(fresh, if_match=previous.get("_etag"))
            except (PreconditionFailedError, NotFoundError):
                continue  # written (or expired) meanwhile: read again
            return
        raise PreconditionFailedError(
            f"the quarantine record of event {event.event_id} changed under {WRITES} writes"
        )

    async def _document(self, event_id: str) -> dict[str, Any]:
        found = await self._store.find(QUARANTINE_TYPE, quarantine_id(event_id))
        if found is None:
            raise NotFoundError(QUARANTINED_EVENT, event_id)
        return found

    async def get(self, event_id: str) -> QuarantinedEvent:
        """The record of an event, resolved or not. Raises NotFoundError."""
        return quarantined_event(await self._document(event_id), legacy=self._legacy)

    async def list_page(
        self, *, page_size: int, continuation: str | None
    ) -> Page[QuarantinedEvent]:
        """One page of records (resolved and discarded ones too, until they expire), and the
        next token: None when no record follows. Cosmos DB may answer a page with fewer
        items than asked and a token (a cross-partition query moves on range by range), and a
        full page with a token whose page is empty: the page is filled from the pages after,
        and a token is given only when a record follows it (read once more, one item). An
        answer may also be empty with the token it was asked with (the store made no progress
        yet: an index still building when the query's time ran out): it is asked again, up to
        STALLED_ANSWERS times in a row, then StoreUnavailableError (never a shorter listing)."""
        documents: list[dict[str, Any]] = []
        token = continuation
        stalled = 0
        while len(documents) < page_size:
            page = await self._store.page_of_type(
                QUARANTINE_TYPE, page_size=page_size - len(documents), continuation=token
            )
            documents += page.items
            stalled = _stalled(page, token, stalled)
            token = page.continuation_token
            if token is None:
                break
        probe = token
        stalled = 0
        while probe is not None:
            ahead = await self._store.page_of_type(QUARANTINE_TYPE, page_size=1, continuation=probe)
            if ahead.items:
                break
            stalled = _stalled(ahead, probe, stalled)
            probe = ahead.continuation_token
        return Page(
            [quarantined_event(d, legacy=self._legacy) for d in documents],
            token if probe is not None else None,
        )

    async def count(self) -> int:
        """How many records are neither resolved nor discarded: one COUNT query, answered by the
        store (no record is sent back), which reads the quarantine's records only."""
        found = await self._store.query(_UNRESOLVED, {"@type": QUARANTINE_TYPE})
        return int(found[0]) if found else 0

    async def unresolved_after(self, event_id: str) -> list[QuarantinedEvent]:
        """The records neither resolved nor discarded whose event id sorts after `event_id`
        ("": every one), in event id order: one query, which reads the quarantine's records
        only (a bulk operation's items, `cosmos_outbox.operations._bulk._items`)."""
        found = await self._store.query(
            _UNRESOLVED_AFTER, {"@type": QUARANTINE_TYPE, "@after": event_id}
        )
        records = [quarantined_event(d, legacy=self._legacy) for d in found]
        return sorted(records, key=lambda r: r.event_id)

    async def replayed(
        self,
        entry: QuarantinedEvent,
        *,
        resolved: bool,
        reason: str,
        ttl_seconds: int,
        by: str = "an operator",
    ) -> QuarantinedEvent:
        """Record a replay of `entry` (as read before the replay) by `by`: resolved (kept,
        expiring after `ttl_seconds`) or still quarantined with the new reason; replays + 1.
        Its failure record first (see the module): resolved, or one more attempt."""

        def updated(current: dict[str, Any]) -> dict[str, Any]:
            return replayed_document(
                current,
                entry,
                resolved=resolved,
                reason=reason,
                ttl_seconds=ttl_seconds,
                now=self._clock(),
            )

        async def settle(document: dict[str, Any]) -> object:
            assert self.failures is not None
            if resolved:
                return await self.failures.quarantine_settled(
                    entry.event_id, "resolved", what="replayed", by=by
                )
            # failed again: one more attempt (found: nothing to look for again after)
            await self.failures.quarantined(quarantined_event(document, legacy=self._legacy))
            return True

        return await self._settled_then_written(entry, updated, settle)

    async def discard(
        self, entry: QuarantinedEvent, *, by: str, reason: str, ttl_seconds: int
    ) -> QuarantinedEvent:
        """Mark the record discarded by `by` for `reason`: kept (no longer counted, never
        replayed) until it expires after `ttl_seconds`. Raises NotFoundError when it is gone."""

        def updated(current: dict[str, Any]) -> dict[str, Any]:
            return discarded_document(
                current,
                entry.event_id,
                by=by,
                reason=reason,
                ttl_seconds=ttl_seconds,
                now=self._clock(),
            )

        async def settle(_: dict[str, Any]) -> object:
            assert self.failures is not None
            return await self.failures.quarantine_settled(
                entry.event_id, "archived", what="discarded", by=by, note=reason
            )

        return await self._settled_then_written(entry, updated, settle)

    async def _settled_then_written(
        self,
        entry: QuarantinedEvent,
        updated: Callable[[dict[str, Any]], dict[str, Any]],
        settle: Callable[[dict[str, Any]], Awaitable[object]],
    ) -> QuarantinedEvent:
        """A replay's or a discard's two writes (see the module): the record of `entry` read,
        `updated`, its failure record settled (`settle(updated document)`: None when it found
        no failure record), then the record written over the one read (its etag), read and
        settled again when another wrote it meanwhile; a failure record not found is looked
        for once more after the write (an adoption may have kept it meanwhile). Raises
        NotFoundError when the record is gone."""
        key = quarantine_id(entry.event_id)
        for _ in range(WRITES):
            current = await self._store.read(entry.partition_key, key)
            if current is None:
                raise NotFoundError(QUARANTINED_EVENT, entry.event_id)
            document = updated(current)
            settled = await settle(document) if self.failures is not None else True
            try:
                written = await self._store.replace(document, if_match=current.get("_etag"))
            except PreconditionFailedError:
                continue  # written meanwhile (the relay set it aside again): settled again
            if settled is None:  # adopted meanwhile? (the module)
                await settle(document)
            return quarantined_event(written, legacy=self._legacy)
        raise PreconditionFailedError(
            f"the quarantine record of event {entry.event_id} changed under {WRITES} writes"
        )

    async def read_again(self, entry: QuarantinedEvent) -> QuarantinedEvent | None:
        """The record of `entry` as it is now (a point read in its partition; None: gone)."""
        found = await self._store.read(entry.partition_key, quarantine_id(entry.event_id))
        return quarantined_event(found, legacy=self._legacy) if found is not None else None

    async def settled_as(
        self, entry: QuarantinedEvent, record: FailureRecord, *, ttl_seconds: int
    ) -> bool:
        """Bring the record of `entry`, still neither resolved nor discarded, to the state of
        its failure record `record`, settled already (a replay or a discard whose process
        stopped between its two writes: see the module): `resolved` -> resolved (its replay was
        sent: one more replay counted), `archived` -> discarded (its discard notice was sent),
        who, when and why from the record's last note; written only over the record as read
        here (its etag). Whether it was written (False: resolved or discarded already, gone,
        the record open, or changed meanwhile: adopting again reads it again)."""
        if record.state == "open":
            return False
        found = await self._store.read(entry.partition_key, quarantine_id(entry.event_id))
        if found is None:
            return False
        current = quarantined_event(found, legacy=self._legacy)
        if current.resolved or current.discarded:
            return False
        note = record.history[-1] if record.history else None
        at = note.at if note is not None else self._clock()
        if record.state == "resolved":
            updated = replayed_document(
                found, current, resolved=True, reason="", ttl_seconds=ttl_seconds, now=at
            )
        else:
            updated = discarded_document(
                found,
                current.event_id,
                by=note.by if note is not None else "an operator",
                reason=(note.note if note is not None else None) or "",
                ttl_seconds=ttl_seconds,
                now=at,
            )
        try:
            await self._store.replace(updated, if_match=found.get("_etag"))
        except (PreconditionFailedError, NotFoundError):
            return False
        return True
