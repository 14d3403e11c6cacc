"""Failed messages as data: each watched dead-letter queue drained into the outbox's container,
one `failedMessage` record per failure (the mapper's form: `cosmos_outbox._mapper.failure`) and
one summary per group in the group's partition, written in one transactional batch (the
group's counts exact at any size). Whatever runs the relay drains them: the Functions app's
Service Bus trigger on each dead-letter path (`ingest_failures_*`, `_blueprints`), the same
receiver in `cosmos-outbox relay` (`_relay_process.failure_receiver`).

`Failures.ingest` is written **before** the dead letter is completed, and keyed so that a second
write of the same delivery changes nothing: a crash between the write and the complete gives the
dead letter again, and its second write finds its sequence number among the record's attempts.
A retried message that fails again is the same record (its event id at the same entity), one
more attempt; with another cause it moves to that cause's group (the new group's batch first,
then the old one's: a crash between the two is finished by the delivery given again).

A record is open (counted in its group's `open`), archived (hidden; who and why) or resolved
(retried and accepted); archived and resolved ones expire after `retention_seconds`
(OUTBOX_FAILURE_RETENTION_SECONDS), open ones never. A quarantine's record settled (resolved,
archived) is opened again by the event's next quarantine, one more attempt (`quarantined`)."""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from cosmos_outbox._mapper import RESUBMISSION_PROPERTY, headers_of
from cosmos_outbox._mapper.failure import (
    FAILED_MESSAGE_TYPE,
    GROUP_SUMMARY_ID,
    LATEST_OPEN_FAILURES,
    OPEN_FAILURE_FACTS,
    OPEN_FAILURES,
    SOME_OPEN_FAILURES,
    FailureGroupRecord,
    FailureNote,
    FailureRecord,
    FailureState,
    failure_document,
    failure_example,
    failure_id,
    failure_partition,
    failure_record,
    group_document,
    group_record,
)
from cosmos_outbox.errors import (
    AlreadyExistsError,
    InvalidQueryError,
    NotFoundError,
    PreconditionFailedError,
)
from cosmos_outbox.operations._failure_items import (
    QUARANTINE_ENTITY,
    Pending,
    Write,
    failure_key,
    group_of,
    letter_pending,
    quarantine_pending,
)
from cosmos_outbox.operations._failure_reads import _IDS_PER_QUERY, FailureReads, _number
from cosmos_outbox.ports import AsyncDocumentStore, BatchOperation, DeadLetter, DeadLetterEntity
from cosmos_outbox.settings._base import DEFAULT_FAILURE_RETENTION_SECONDS

if TYPE_CHECKING:
    from cosmos_outbox._quarantine import QuarantinedEvent


__all__ = [
    "DEFAULT_FAILURE_RETENTION_SECONDS",
    "Failures",
    "failure_key",
    "letter_of",
    "received",
    "record_key",
]


#: Writes tried before a conflict (another writer of the same group) is given up.
_TRIES = 50
#: The longest pause after a conflict, in seconds (a random one: writers spread out).
_CONFLICT_PAUSE = 0.05
#: The copies of up to `_IDS_PER_QUERY` records: `c.id IN (...)`, served from the id index (which
#: Azure always keeps) in every partition, whatever the container holds; not
#: `ARRAY_CONTAINS(@ids, c.id)`, which no index serves: it read every failure record kept, each
#: query slower as they accumulate (the ingest of 100,000 quadratic).
#: Records in one transactional batch: Cosmos DB's 100 operations, the group's summary the last.
_RECORDS_PER_BATCH = 99
_OF_TYPE = "SELECT * FROM c WHERE c.type = @type"
#: A group's open records' keys (`Failures.open_keys`), a page of `_KEYS_PAGE` at a time.
_OPEN_KEYS = "SELECT c.id, c.firstFailedAt FROM c WHERE c.type = @type AND c.state = @state"
_KEYS_PAGE = 1000
#: A page of a group's open records (`Failures.open_page`).
_FACTS_PAGE = 1000


class Failures(FailureReads):
    """The failed messages kept in `store` (see the module). `clock`: epoch seconds."""

    def __init__(
        self,
        store: AsyncDocumentStore,
        *,
        retention_seconds: int = DEFAULT_FAILURE_RETENTION_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self.retention_seconds = retention_seconds
        self._clock = clock

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self._clock(), UTC)

    # -- the ingest ------------------------------------------------------------------------

    async def ingest(self, entity: DeadLetterEntity, letter: DeadLetter) -> FailureRecord:
        """Keep the dead letter `letter` of `entity` (see the module): its record, as stored
        (`ingest_many` of one)."""
        [record] = await self.ingest_many(entity, [letter])
        return record

    async def ingest_many(
        self, entity: DeadLetterEntity, letters: Sequence[DeadLetter]
    ) -> list[FailureRecord]:
        """Keep the dead letters `letters` of `entity` (see the module), a received batch at
        once: their records, as stored, in the order of `letters`. The existing copies of all of
        them are read by one query (per 100), each group's summary once; each group's records
        are written with its summary in transactional batches of up to 99 records + the
        summary (Cosmos DB's 100 operations), the summary counted once per batch; moved records
        are dropped from their old groups after. A batch that met another writer is read again
        and tried again (its letters only). Two deliveries of one failure in `letters` are kept
        in turn (the second one more attempt of the first)."""
        now = self._now()
        return await self._keep(
            [letter_pending(i, entity, letter, now) for i, letter in enumerate(letters)], now
        )

    async def _keep(self, items: Sequence[Pending], now: datetime) -> list[FailureRecord]:
        """`items` kept (`ingest_many`), in waves of one delivery of each failure at most: their
        records, as stored, in the order of `items`."""
        waves: list[list[Pending]] = []
        turn: dict[str, int] = {}
        for item in items:
            n = turn.get(item.record_id, 0)
            turn[item.record_id] = n + 1
            if n == len(waves):
                waves.append([])
            waves[n].append(item)
        kept: dict[int, FailureRecord] = {}
        for wave in waves:
            kept.update(await self._ingest_wave(wave, now))
        return [kept[item.index] for item in items]

    # -- the quarantine's records -----------------------------------------------------------

    async def quarantined(self, *entries: QuarantinedEvent) -> list[FailureRecord]:
        """Keep quarantined events (`entries`: their quarantine records as they are about to be
        written) as records of the pseudo-entity `quarantine`, each in its cause's group, the
        group's summary counted in the same batch (the ingest's write path, `ingest_many`): one
        attempt per quarantine, numbered by the record's replays, so that writing the same
        quarantine again (the relay reading its lease again, a crash before the quarantine
        record was written) counts nothing twice, and a replay that fails again is one more
        attempt. A record settled already (resolved, archived) is opened again as one more
        attempt whatever its number, noted `quarantined again` (`quarantine_pending`): the
        event set aside after its replay was sent or it was discarded is a new failure. Their
        records, as stored, in the order of `entries`."""
        now = self._now()
        return await self._keep(
            [quarantine_pending(i, entry, now) for i, entry in enumerate(entries)], now
        )

    async def quarantine_adopted(
        self, *entries: QuarantinedEvent
    ) -> tuple[list[QuarantinedEvent], list[tuple[QuarantinedEvent, FailureRecord]]]:
        """Keep those of `entries` (quarantine records as stored, neither resolved nor
        discarded) that have no failure record yet (`quarantined`: set aside before the
        quarantine's records were kept), leaving each one that has one as it is: those kept
        now, and those whose failure record is settled already (resolved or archived: a replay
        or a discard stopped between its two writes, `cosmos_outbox._quarantine`), each with
        its record. Their copies read by one query (per 100): adopting the same records again
        keeps nothing new."""
        ids = [failure_id(QUARANTINE_ENTITY, entry.event_id) for entry in entries]
        copies = await self._copies_of(ids)
        fresh = [e for e, i in zip(entries, ids, strict=True) if not copies.get(i)]
        settled = [
            (e, current)
            for e, i in zip(entries, ids, strict=True)
            if copies.get(i)
            and (current := max(copies[i], key=lambda c: c.last_failed_at)).state != "open"
        ]
        if fresh:
            await self.quarantined(*fresh)
        return fresh, settled

    async def quarantine_settled(
        self, event_id: str, state: FailureState, *, what: str, by: str, note: str | None = None
    ) -> FailureRecord | None:
        """The quarantine's record of `event_id` put in `state` (`settle`: resolved by a replay
        that was sent, archived by a discard, with who and why); None when it has none (set
        aside before the quarantine's records were kept)."""
        copies = await self._copies(failure_id(QUARANTINE_ENTITY, event_id))
        if not copies:
            return None
        current = max(copies, key=lambda c: c.last_failed_at)
        if current.state == state:
            return current
        [settled] = await self.settle([current], state, what=what, by=by, note=note)
        return settled

    async def _ingest_wave(self, wave: list[Pending], now: datetime) -> dict[int, FailureRecord]:
        """`wave` (one delivery of each failure at most) kept: the records by the items' index."""
        done: dict[int, FailureRecord] = {}
        pending = wave
        for _ in range(_TRIES):
            copies = await self._copies_of([p.record_id for p in pending])
            writes: dict[str, list[Write]] = {}
            drops: list[FailureRecord] = []
            for item in pending:
                mine = copies.get(item.record_id, [])
                kept = next((c for c in mine if _holds(c, item)), None)
                if kept is not None:  # this delivery is written already: finish a move, if any
                    done[item.index] = kept
                    drops += [c for c in mine if c.group != kept.group]
                    continue
                current = max(mine, key=lambda c: c.last_failed_at) if mine else None
                if current is None:
                    write = Write(item, item.first_failure(), None, None)
                else:
                    record = current.with_attempt(item.attempt, group=item.group, cause=item.cause)
                    if item.again is not None and current.state != "open":  # a new failure
                        record = replace(record, history=(*record.history, item.again))
                    if current.group == item.group:
                        write = Write(item, record, current, None)
                    else:  # another cause: created in its group, then dropped from the old one
                        write = Write(item, replace(record, etag=None), None, current)
                writes.setdefault(item.group, []).append(write)
            retry: list[Pending] = []
            for group_writes in writes.values():
                stored = await self._summary(group_writes[0].item.summary)
                for start in range(0, len(group_writes), _RECORDS_PER_BATCH):
                    chunk = group_writes[start : start + _RECORDS_PER_BATCH]
                    try:
                        written, stored = await self._write(chunk, stored, now)
                    except (PreconditionFailedError, AlreadyExistsError, NotFoundError):
                        # another writer of these meanwhile (a record, or the summary created
                        # or gone): these read again, after
                        retry += [w.item for w in chunk]
                        stored = await self._summary(chunk[0].item.summary)
                        continue
                    for w, record in zip(chunk, written, strict=True):
                        done[w.item.index] = record
                        if w.moved_from is not None:
                            drops.append(w.moved_from)
            await self._drop_all(drops)
            if not retry:
                return done
            pending = retry
            await asyncio.sleep(random.uniform(0, _CONFLICT_PAUSE))
        raise PreconditionFailedError(
            f"{len(pending)} failure(s): the group changed under every one of {_TRIES} writes"
        )

    async def _copies_of(self, record_ids: Sequence[str]) -> dict[str, list[FailureRecord]]:
        """The stored copies of each of `record_ids` (one in its group; two while a move is
        unfinished), by one query a 100 ids."""
        found: dict[str, list[FailureRecord]] = {}
        for record in await self._by_ids(record_ids, None):
            found.setdefault(record.id, []).append(record)
        return found

    async def _by_ids(
        self, record_ids: Sequence[str], partition_key: str | None
    ) -> list[FailureRecord]:
        """The records of `record_ids` (in one partition, or across them: None), by queries of
        up to `_IDS_PER_QUERY` ids each (`c.id IN (...)`: the id index)."""
        found: list[FailureRecord] = []
        unique = list(dict.fromkeys(record_ids))
        for start in range(0, len(unique), _IDS_PER_QUERY):
            ids = unique[start : start + _IDS_PER_QUERY]
            names = [f"@id{i}" for i in range(len(ids))]
            documents = await self._store.query(
                # only parameters' names in the text: the ids are parameters
                f"SELECT * FROM c WHERE c.type = @type AND c.id IN ({', '.join(names)})",  # noqa: S608
                {"@type": FAILED_MESSAGE_TYPE, **dict(zip(names, ids, strict=True))},
                partition_key=partition_key,
            )
            found += [failure_record(d) for d in documents]
        return found

    async def _copies(self, record_id: str) -> list[FailureRecord]:
        return (await self._copies_of([record_id])).get(record_id, [])

    async def _summary(self, template: FailureGroupRecord) -> FailureGroupRecord | None:
        found = await self._store.read(template.partition, GROUP_SUMMARY_ID)
        return group_record(found) if found is not None else None

    async def _write(
        self, chunk: Sequence[Write], stored: FailureGroupRecord | None, now: datetime
    ) -> tuple[list[FailureRecord], FailureGroupRecord]:
        """`chunk` (records of one group) written over what each was (None: created), the
        group's summary (`stored`, None: not there yet) counted once with them, in one
        transactional batch: the records as stored, and the summary as stored."""
        summary = stored if stored is not None else chunk[0].item.summary
        operations: list[BatchOperation] = []
        for w in chunk:
            if w.before is not None:
                summary = summary.counted(w.before.state, -1)
            summary = summary.counted(w.record.state, +1)
            operations.append(
                BatchOperation("create", failure_document(w.record))
                if w.before is None
                else BatchOperation("replace", failure_document(w.record), if_match=w.before.etag)
            )
        summary = summary.seen(now)
        if stored is None:  # created with them (two creators: one meets AlreadyExists, reads again)
            operations.append(_summary_write(summary, None))
        else:  # counted by increments: concurrent ingests of one group do not meet on its etag
            operations.append(_summary_counts(stored, summary))
        etags = await self._store.execute_batch(summary.partition, operations)
        records = [replace(w.record, etag=e) for w, e in zip(chunk, etags, strict=False)]
        return records, replace(summary, etag=etags[-1])

    async def _drop_all(self, records: Sequence[FailureRecord]) -> None:
        """`records` removed from their groups (moved to others), each group's summary with
        them, a batch of up to 99 at a time; a batch that fails is done one by one."""
        by_group: dict[str, dict[str, FailureRecord]] = {}
        for record in records:
            by_group.setdefault(record.group, {})[record.id] = record
        for group_records in by_group.values():
            listed = list(group_records.values())
            for start in range(0, len(listed), _RECORDS_PER_BATCH):
                chunk = listed[start : start + _RECORDS_PER_BATCH]
                if len(chunk) == 1:
                    await self._drop(chunk[0])
                    continue
                stored = await self._summary(group_of(chunk[0]))
                operations = [BatchOperation("delete", id=r.id, if_match=r.etag) for r in chunk]
                if stored is not None:
                    summary = stored
                    for r in chunk:
                        summary = summary.counted(r.state, -1)
                    operations.append(_summary_write(summary, stored))
                try:
                    await self._store.execute_batch(chunk[0].partition, operations)
                except (NotFoundError, PreconditionFailedError):
                    for r in chunk:
                        await self._drop(r)

    async def _drop(self, record: FailureRecord) -> None:
        """`record` removed from its group (moved to another), its summary with it."""
        stored = await self._summary(group_of(record))
        operations = [BatchOperation("delete", id=record.id, if_match=record.etag)]
        if stored is not None:
            operations.append(_summary_write(stored.counted(record.state, -1), stored))
        # gone, or changed: the next delivery of it reads again
        with contextlib.suppress(NotFoundError, PreconditionFailedError):
            await self._store.execute_batch(record.partition, operations)

    # -- reads -----------------------------------------------------------------------------

    async def group(self, group: str) -> FailureGroupRecord:
        found = await self._store.read(failure_partition(group), GROUP_SUMMARY_ID)
        if found is None:
            raise NotFoundError("failure group", group)
        return group_record(found)

    async def open_keys(self, group: str) -> list[str]:
        """The keys (`record_key`) of the group's open records, in key order: their ids and
        first failures only, read a page (`_KEYS_PAGE`) at a time by continuation -- what an
        operation over a group of 100,000 walks, without holding their bodies."""
        keys: list[str] = []
        token: str | None = None
        while True:
            page = await self._store.query_page(
                _OPEN_KEYS,
                {"@type": FAILED_MESSAGE_TYPE, "@state": "open"},
                partition_key=failure_partition(group),
                page_size=_KEYS_PAGE,
                continuation=token,
            )
            keys += [_key_of(str(d["id"]), str(d["firstFailedAt"])) for d in page.items]
            if (token := page.continuation_token) is None:
                return sorted(keys)

    async def sample(self, group: str, size: int) -> list[FailureRecord]:
        """Up to `size` of the group's open records, a page at a time (a preview's sample:
        its count is the summary's)."""
        found: list[FailureRecord] = []
        token: str | None = None
        while len(found) < size:
            page = await self._store.query_page(
                _OF_TYPE,
                {"@type": FAILED_MESSAGE_TYPE},
                partition_key=failure_partition(group),
                page_size=max(size, 10),
                continuation=token,
            )
            found += [r for r in map(failure_record, page.items) if r.state == "open"]
            if (token := page.continuation_token) is None:
                break
        return found[:size]

    async def open_page(
        self, group: str, continuation: str | None, *, bodies: bool = False
    ) -> tuple[list[FailureRecord], str | None]:
        """A page (`_FACTS_PAGE`) of the group's open records, and the token of the next (None:
        the last): what a preview of the whole group reads, page after page, to say exactly
        what each subscription receives. Without `bodies`, each record's fields but its body,
        attempts and history (`OPEN_FAILURE_FACTS`: what its message's facts need, a few
        hundred bytes a record); with them, whole (a quarantined event's message is made from
        its stored event, its body)."""
        page = await self._store.query_page(
            OPEN_FAILURES if bodies else OPEN_FAILURE_FACTS,
            {"@type": FAILED_MESSAGE_TYPE, "@state": "open"},
            partition_key=failure_partition(group),
            page_size=_FACTS_PAGE,
            continuation=continuation,
        )
        return [failure_record(d) for d in page.items], page.continuation_token

    async def latest_open(self, group: str, count: int) -> list[tuple[str | None, int]]:
        """Up to `count` of the group's open records, the last dead-lettered first (the highest
        sequence numbers; a quarantine's records, the most replayed first): each one's event id
        and sequence number, by one query in the group's partition (`LATEST_OPEN_FAILURES`:
        TOP, served by the range index on `/sequenceNumber/?`). A container whose policy cannot
        serve that ORDER BY: `count` of them in no order (`SOME_OPEN_FAILURES`)."""
        parameters = {"@type": FAILED_MESSAGE_TYPE, "@state": "open", "@count": count}
        partition = failure_partition(group)
        try:
            documents = await self._store.query(
                LATEST_OPEN_FAILURES, parameters, partition_key=partition
            )
        except InvalidQueryError as refused:
            if "order" not in str(refused).casefold():
                raise
            documents = await self._store.query(
                SOME_OPEN_FAILURES, parameters, partition_key=partition
            )
        return [failure_example(d) for d in documents[:count]]

    async def read(self, group: str, record_id: str) -> FailureRecord | None:
        """The record of that id in `group` (None: not there: moved, or expired)."""
        found = await self._store.read(failure_partition(group), record_id)
        return failure_record(found) if found is not None else None

    async def read_many(self, group: str, record_ids: Sequence[str]) -> dict[str, FailureRecord]:
        """The records of those ids in `group`, by id (one not there is left out: moved, or
        expired): a query of up to `_IDS_PER_QUERY` ids in the group's partition."""
        found = await self._by_ids(record_ids, failure_partition(group))
        return {record.id: record for record in found}

    async def record(self, record_id: str) -> FailureRecord:
        copies = await self._copies(record_id)
        if not copies:
            raise NotFoundError("failed message", record_id)
        return max(copies, key=lambda c: c.last_failed_at)

    # -- changes of state ------------------------------------------------------------------

    async def settle(
        self,
        records: Sequence[FailureRecord],
        state: FailureState,
        *,
        what: str,
        by: str,
        operation: str | None = None,
        note: str | None = None,
    ) -> list[FailureRecord]:
        """`records` (of one group) put in `state` with a note of what was done, when, by whom,
        in which operation; their group's counts in the same batch (chunks of 99: a batch holds
        100 operations). An archived or resolved record expires after the retention, an open
        one never. Those changed meanwhile are read again and tried once more."""
        done: list[FailureRecord] = []
        pending = list(records)
        for _ in range(_TRIES):
            if not pending:
                break
            retry: list[FailureRecord] = []
            for start in range(0, len(pending), 99):
                chunk = pending[start : start + 99]
                try:
                    done += await self._settle_chunk(chunk, state, what, by, operation, note)
                except PreconditionFailedError:
                    retry += [await self.record(r.id) for r in chunk]
            pending = retry
        if pending:
            raise PreconditionFailedError(f"{len(pending)} failure(s) changed under every write")
        return done

    async def _settle_chunk(
        self,
        chunk: list[FailureRecord],
        state: FailureState,
        what: str,
        by: str,
        operation: str | None,
        note: str | None,
    ) -> list[FailureRecord]:
        if not chunk:
            return []
        [group] = {r.group for r in chunk}
        now = self._now()
        changed: list[FailureRecord] = []
        moved: dict[str, int] = {}
        for record in chunk:
            moved[record.state] = moved.get(record.state, 0) - 1
            moved[state] = moved.get(state, 0) + 1
            changed.append(
                replace(
                    record,
                    state=state,
                    ttl=None if state == "open" else self.retention_seconds,
                    history=(
                        *record.history,
                        FailureNote(at=now, what=what, by=by, operation=operation, note=note),
                    ),
                )
            )
        operations = [
            BatchOperation("replace", failure_document(r), if_match=r.etag) for r in changed
        ]
        # the group's counts moved by an increment in the same batch: nothing read first, and
        # no etag to meet (each record's own etag makes its move counted once)
        counts = [{"op": "incr", "path": f"/{k}", "value": n} for k, n in moved.items() if n]
        try:
            etags = await self._store.execute_batch(
                failure_partition(group),
                [*operations, BatchOperation("patch", id=GROUP_SUMMARY_ID, patch=counts)]
                if counts
                else operations,
            )
        except NotFoundError:  # no summary (or a record gone): the summary read and written
            stored = await self._summary(group_of(chunk[0]))
            summary = stored if stored is not None else group_of(chunk[0])
            for record in chunk:
                summary = summary.counted(record.state, -1).counted(state, +1)
            operations.append(_summary_write(summary, stored))
            etags = await self._store.execute_batch(failure_partition(group), operations)
        return [replace(r, etag=e) for r, e in zip(changed, etags, strict=False)]


def received(letter: DeadLetter) -> DeadLetter:
    """A dead letter as the ingest received it from its queue (peek-lock: that receive counted
    in its delivery count, as Service Bus counts every lock): the deliveries it had when it was
    dead-lettered, as a peek says them (a dead letter given again after an unfinished ingest
    counts each receive before; its first kept write keeps the count)."""
    return replace(letter, delivery_count=max(0, letter.delivery_count - 1))


def letter_of(record: FailureRecord) -> DeadLetter:
    """A kept failure as the dead letter it was last (its last attempt's sequence number, reason
    and delivery count; enqueued: its first failure): what the dead letters' use cases read.
    Its resubmissions counted with each attempt after the first (the record keeps its first
    dead letter's properties): a failure retried, failed again and retried again is sent with
    a resubmission number, so a MessageId, of its own each time (the same one would be
    dropped by the topic's duplicate detection)."""
    last = record.attempts[-1] if record.attempts else None
    properties = dict(record.properties)
    before = properties.get(RESUBMISSION_PROPERTY)
    before = before if type(before) is int else 0
    if record.attempt_count > 1:
        properties[RESUBMISSION_PROPERTY] = before + record.attempt_count - 1
    return DeadLetter(
        sequence_number=_number(record),
        body=record.body,
        **headers_of(record),
        application_properties=properties,
        reason=record.reason,
        description=record.description,
        delivery_count=last.delivery_count if last is not None else 0,
        enqueued_at=record.first_failed_at.timestamp(),
    )


def record_key(record: FailureRecord) -> str:
    """A record's key as an operation's item: its first failure, then its id (in the order of
    its failures; one that came after an operation began sorts after its limit)."""
    return f"{record.first_failed_at.astimezone(UTC).isoformat()}|{record.id}"


def _key_of(record_id: str, first_failed_at: str) -> str:
    """`record_key` of a record's stored id and first failure."""
    return f"{datetime.fromisoformat(first_failed_at).astimezone(UTC).isoformat()}|{record_id}"


def _holds(record: FailureRecord, item: Pending) -> bool:
    """Whether `record` (a copy of the item's) holds the item's failure already: its attempt's
    number among its attempts, and, for a failure that opens a settled record again as a new
    one (`Pending.again`: a quarantine), the record open."""
    delivered = record.delivered(item.letter.sequence_number)
    return delivered and (item.again is None or record.state == "open")


def _summary_counts(stored: FailureGroupRecord, counted: FailureGroupRecord) -> BatchOperation:
    """The patch that moves the stored summary's counts as `counted` moved them from `stored`
    (increments: nothing to meet, each record's own write counted once) and its last failure
    (set: two writers at once may leave the earlier of their two times, by milliseconds)."""
    patch: list[dict[str, Any]] = [
        {"op": "incr", "path": f"/{name}", "value": after - before}
        for name, before, after in (
            ("open", stored.open, counted.open),
            ("archived", stored.archived, counted.archived),
            ("resolved", stored.resolved, counted.resolved),
        )
        if after != before
    ]
    patch.append(
        {"op": "set", "path": "/lastFailedAt", "value": group_document(counted)["lastFailedAt"]}
    )
    return BatchOperation("patch", id=GROUP_SUMMARY_ID, patch=patch)


def _summary_write(summary: FailureGroupRecord, stored: FailureGroupRecord | None) -> Any:
    document = group_document(summary)
    if stored is None:
        return BatchOperation("create", document)
    return BatchOperation("replace", document, if_match=stored.etag)
