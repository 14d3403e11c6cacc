"""Failed messages as data (`cosmos_outbox.operations._failures`), on the test kit's store: one
record per failure, a second write of the same delivery changing nothing, a retried message that
fails again the same record with one more attempt, the group's summary exact in the same batch,
and the retention: an archived or resolved record expires, an open one never."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, cast

import pytest

from cosmos_outbox._mapper.failure import (
    FAILED_MESSAGE_TYPE,
    failure_document,
    failure_record,
)
from cosmos_outbox._sync_over_async import as_async
from cosmos_outbox.errors import NotFoundError, StoreUnavailableError
from cosmos_outbox.operations._dead_letters import PEEK_BATCH, DeadLetterOperators
from cosmos_outbox.operations._failures import Failures, letter_of
from cosmos_outbox.ports import AsyncDocumentStore, DeadLetter, DeadLetterEntity
from cosmos_outbox_testing import InMemoryStore

ENTITY = DeadLetterEntity("all-events")
RETENTION = 3 * 86_400


def letter(
    sequence_number: int,
    *,
    event_id: str = "e-1",
    reason: str = "HandlerRefused",
    description: str = "contact 42 refused: 'x' is not a phone",
    body: bytes = b'{"name": "Ada"}',
) -> DeadLetter:
    return DeadLetter(
        sequence_number=sequence_number,
        body=body,
        message_id=event_id,
        session_id="c-42",
        subject="ContactCreated",
        content_type="application/json",
        correlation_id=None,
        application_properties={
            "aggregateType": "contact",
            "contactId": "c-42",
            "action": "ContactCreated",
            "version": 3,
            "outboxFormat": 2,
        },
        reason=reason,
        description=description,
        delivery_count=10,
        enqueued_at=1_767_225_600.0,
    )


def kept(store: InMemoryStore) -> Failures:
    return Failures(as_async(store), retention_seconds=RETENTION)


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def records(store: InMemoryStore) -> list[dict[str, Any]]:
    return [d for d in store.query("SELECT * FROM c") if d.get("type") == FAILED_MESSAGE_TYPE]


def test_a_dead_letter_is_kept_as_one_open_record_in_its_group() -> None:
    store = InMemoryStore()
    failures = kept(store)
    record = run(failures.ingest(ENTITY, letter(7)))
    [group] = run(failures.groups())
    assert (record.state, record.attempt_count, record.event_id) == ("open", 1, "e-1")
    assert (record.aggregate_type, record.aggregate_id, record.version) == ("contact", "c-42", 3)
    assert record.cause == "HandlerRefused: contact <n> refused: '…' is not a phone"
    assert (group.group, group.open, group.archived, group.resolved) == (record.group, 1, 0, 0)
    # the group's summary names what its records share
    assert (group.entity, group.entity_kind, group.cause) == (
        "all-events",
        "subscription",
        record.cause,
    )
    assert (group.aggregate_type, group.action) == ("contact", "ContactCreated")
    [document] = records(store)
    assert "ttl" not in document  # open: never expires
    assert failure_record(document).body == b'{"name": "Ada"}'


def test_a_second_write_of_the_same_delivery_changes_nothing() -> None:
    store = InMemoryStore()
    failures = kept(store)
    first = run(failures.ingest(ENTITY, letter(7)))
    batches = store.batches
    again = run(failures.ingest(ENTITY, letter(7)))
    assert store.batches == batches  # nothing written
    assert again.attempt_count == first.attempt_count == 1
    assert len(records(store)) == 1
    [group] = run(failures.groups())
    assert group.open == 1


def test_a_retried_message_that_fails_again_is_the_same_record_with_one_more_attempt() -> None:
    store = InMemoryStore()
    failures = kept(store)
    run(failures.ingest(ENTITY, letter(7)))
    record = run(
        failures.ingest(ENTITY, letter(31, description="contact 42 refused: 'y' is not a phone"))
    )
    assert record.attempt_count == 2
    assert [a.sequence_number for a in record.attempts] == [7, 31]
    assert len(records(store)) == 1
    [group] = run(failures.groups())
    assert group.open == 1


def test_one_failing_again_of_another_cause_moves_to_that_group_the_counts_exact() -> None:
    store = InMemoryStore()
    failures = kept(store)
    first = run(failures.ingest(ENTITY, letter(7)))
    run(failures.ingest(ENTITY, letter(8, event_id="e-2")))
    moved = run(failures.ingest(ENTITY, letter(40, reason="TimeoutError", description="")))
    assert moved.group != first.group and moved.attempt_count == 2
    counts = {g.group: g.open for g in run(failures.groups()) if g.open}
    assert counts == {first.group: 1, moved.group: 1}
    assert len(records(store)) == 2


def test_a_store_that_fails_keeps_nothing_and_says_so() -> None:
    store = InMemoryStore()
    failures = kept(store)
    store.fail_next = StoreUnavailableError("down")
    with pytest.raises(StoreUnavailableError):
        run(failures.ingest(ENTITY, letter(7)))
    assert records(store) == [] and run(failures.groups()) == []


def test_archived_and_resolved_records_expire_open_ones_never_and_counts_return() -> None:
    store = InMemoryStore()
    failures = kept(store)
    for n in range(5):
        run(failures.ingest(ENTITY, letter(n + 1, event_id=f"e-{n}")))
    [group] = run(failures.groups())
    members = run(failures.members(group.group))
    archived = run(
        failures.settle(members[:3], "archived", what="archived", by="ada", note="known bug")
    )
    assert {r.ttl for r in archived} == {RETENTION}
    [group] = run(failures.groups())
    assert (group.open, group.archived) == (2, 3)
    assert len(run(failures.members(group.group))) == 2
    back = run(failures.settle(archived, "open", what="unarchived", by="ada"))
    assert {r.ttl for r in back} == {None}
    [group] = run(failures.groups())
    assert (group.open, group.archived) == (5, 0)
    stored = {d["id"]: d for d in records(store)}
    assert all("ttl" not in d for d in stored.values())
    assert [n.what for n in failure_record(stored[back[0].id]).history] == [
        "archived",
        "unarchived",
    ]


def test_the_stored_form_reads_back_as_written() -> None:
    store = InMemoryStore()
    record = run(kept(store).ingest(ENTITY, letter(7, body=b"\xff\xfe not utf-8")))
    document = failure_document(record)
    assert document["body"] is None and document["bodyBase64"]
    assert failure_record(document) == record


def test_a_dead_letter_as_the_ingest_trigger_hands_it_is_read_as_the_receiver_reads_one() -> None:
    from azure.functions.servicebus import ServiceBusMessage

    from cosmos_outbox._blueprints.relay_functions import dead_letter_of_trigger

    enqueued = datetime(2026, 1, 1, tzinfo=UTC)
    message = ServiceBusMessage(
        body=b'{"name": "Ada"}',
        message_id="e-1",
        session_id="c-42",
        label="ContactCreated",  # the trigger's older name of the subject
        content_type="application/json",
        correlation_id="corr-1",
        application_properties={
            "aggregateType": "contact",
            "version": 3,
            "DeadLetterReason": "HandlerRefused",  # the broker's, not the message's
            "DeadLetterErrorDescription": "refused",
        },
        user_properties={},
        dead_letter_reason="HandlerRefused",
        dead_letter_error_description="refused",
        delivery_count=10,
        enqueued_time_utc=enqueued,
        sequence_number=7,
    )
    assert dead_letter_of_trigger(message) == DeadLetter(
        sequence_number=7,
        body=b'{"name": "Ada"}',
        message_id="e-1",
        session_id="c-42",
        subject="ContactCreated",
        content_type="application/json",
        correlation_id="corr-1",
        application_properties={"aggregateType": "contact", "version": 3},
        reason="HandlerRefused",
        description="refused",
        delivery_count=10,
        enqueued_at=enqueued.timestamp(),
    )


def test_a_kept_dead_letter_keeps_its_headers_and_is_read_back_with_them() -> None:
    sent = replace(letter(7), correlation_id="corr-1")
    record = run(kept(InMemoryStore()).ingest(ENTITY, sent))
    headers = ("e-1", "c-42", "ContactCreated", "application/json", "corr-1")
    assert (
        record.message_id,
        record.session_id,
        record.subject,
        record.content_type,
        record.correlation_id,
    ) == headers
    back = letter_of(record)
    assert (
        back.message_id,
        back.session_id,
        back.subject,
        back.content_type,
        back.correlation_id,
    ) == headers


class Interleaved:
    """The test kit's store as an async port whose every call lets the others run first (as a
    container's round trip does): concurrent ingests meet between their reads and writes."""

    def __init__(self, store: InMemoryStore) -> None:
        self._inner = as_async(store)
        #: the transactional batches tried (written or refused)
        self.batches = 0

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._inner, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            await asyncio.sleep(0)
            self.batches += name == "execute_batch"
            return await method(*args, **kwargs)

        return call


def test_concurrent_ingests_of_one_group_are_each_written_once_without_meeting_on_its_summary() -> (
    None
):
    # 40 dead letters of one cause kept at once, one call each (as the Functions trigger does):
    # the summary is counted by increments, so they do not take turns on its etag
    store = InMemoryStore()
    interleaved = Interleaved(store)
    failures = Failures(cast(AsyncDocumentStore, interleaved), retention_seconds=RETENTION)

    async def all_at_once() -> None:
        await failures.ingest(ENTITY, letter(1, event_id="e-1"))  # the group's summary created
        await asyncio.gather(
            *(failures.ingest(ENTITY, letter(n, event_id=f"e-{n}")) for n in range(2, 42))
        )

    run(all_at_once())
    [group] = run(failures.groups())
    assert (group.open, len(records(store))) == (41, 41)
    assert interleaved.batches == 41  # each written by its first batch: none met another


class CountingStore(InMemoryStore):
    """The test kit's store counting the documents its reads give back (a read's cost)."""

    def __init__(self) -> None:
        super().__init__()
        self.read_items = 0

    def read(self, partition_key: str, document_id: str) -> dict[str, Any] | None:
        found = super().read(partition_key, document_id)
        self.read_items += found is not None
        return found

    def of_type(self, type_: str, *, partition_key: str | None = None) -> list[dict[str, Any]]:
        found = super().of_type(type_, partition_key=partition_key)
        self.read_items += len(found)
        return found

    def query(
        self, query: str, parameters: Any = None, *, partition_key: str | None = None
    ) -> list[Any]:
        found = super().query(query, parameters, partition_key=partition_key)
        self.read_items += len(found)
        return found

    def counted(self, work: Any) -> tuple[Any, int]:
        """`work`'s result, and how many documents it read."""
        before = self.read_items
        result = run(work)
        return result, self.read_items - before


async def _first_page(operators: DeadLetterOperators, after: int) -> list[Any]:
    async for page in operators.pages(ENTITY, after):
        return page
    return []


def test_an_entitys_dead_letters_are_read_a_page_or_one_at_a_time_not_every_record() -> None:
    """With 1,200 open records (two groups; another entity's and settled ones beside them), a
    peek reads the one record it names and a page the PEEK_BATCH it lists (and the groups'
    summaries), in sequence-number order across the groups, as the list of all of them
    says."""
    store = CountingStore()
    failures = kept(store)
    causes = ("HandlerRefused", "Timeout")
    run(
        failures.ingest_many(
            ENTITY,
            [letter(n, event_id=f"e-{n}", reason=causes[n % 2]) for n in range(1, 1201)],
        )
    )
    run(
        failures.ingest_many(
            DeadLetterEntity("audit"), [letter(n, event_id=f"a-{n}") for n in range(1, 51)]
        )
    )
    settled = [r for r in run(failures.open_at(ENTITY.name)) if r.event_id in ("e-3", "e-150")]
    for record in settled:
        run(failures.settle([record], "archived", what="archived", by="ada"))
    operators = DeadLetterOperators(lambda: None, [ENTITY], failures=failures)
    summaries = len(run(failures.groups()))  # 3: two of the entity's, one of the other's

    letter_, read = store.counted(operators.peek(ENTITY, 700))
    assert (letter_.sequence_number, letter_.failure.attempt_count) == (700, 1)
    assert read <= summaries + 1
    with pytest.raises(NotFoundError):
        run(operators.peek(ENTITY, 150))  # archived: not a dead letter any more

    page, read = store.counted(_first_page(operators, 0))
    assert [d.letter.sequence_number for d in page] == [n for n in range(1, 102) if n != 3]
    assert read <= summaries + PEEK_BATCH
    page, read = store.counted(_first_page(operators, 1150))
    assert [d.letter.sequence_number for d in page] == list(range(1151, 1201))
    assert read <= summaries + 50

    everything, more = run(operators.scan(ENTITY, limit=10_000))
    assert not more
    assert [d.letter.sequence_number for d in everything] == [
        n for n in range(1, 1201) if n not in (3, 150)
    ]


def test_records_kept_before_they_held_their_sequence_number_are_still_read() -> None:
    """A record written without `sequenceNumber` (before it was kept) is listed in its place
    and peeked, from its last attempt; written again, it holds it."""
    store = InMemoryStore()
    failures = kept(store)
    run(failures.ingest_many(ENTITY, [letter(n, event_id=f"e-{n}") for n in range(1, 6)]))
    for document in records(store):
        if document["eventId"] in ("e-2", "e-5"):
            store.put({k: v for k, v in document.items() if k != "sequenceNumber"})
    assert sum("sequenceNumber" in d for d in records(store)) == 3
    operators = DeadLetterOperators(lambda: None, [ENTITY], failures=failures)
    letters, _ = run(operators.scan(ENTITY))
    assert [d.letter.sequence_number for d in letters] == [1, 2, 3, 4, 5]
    assert run(operators.peek(ENTITY, 5)).sequence_number == 5
    [old] = [r for r in run(failures.open_at(ENTITY.name)) if r.event_id == "e-2"]
    run(failures.settle([old], "archived", what="archived", by="ada"))
    assert all("sequenceNumber" in d for d in records(store) if d["eventId"] == "e-2")


def test_dead_letters_are_moved_a_chunk_at_a_time_and_the_rest_left_once_the_time_is_up() -> None:
    from cosmos_outbox.operations._dead_letters import _budgeted

    numbers = list(range(1, 26))
    assert list(_budgeted(numbers, 10, None)) == [
        (numbers[:10], False),
        (numbers[10:20], False),
        (numbers[20:], False),
    ]
    # a budget already spent: the first chunk still acted on, the rest reported at once
    assert list(_budgeted(numbers, 10, -1.0)) == [(numbers[:10], False), (numbers[10:], True)]


def test_a_received_batch_of_one_group_is_written_99_records_and_its_summary_at_a_time() -> None:
    """150 dead letters of one group kept at once: transactional batches of 99 records and the
    group's summary (Cosmos DB's limit is 100 operations), then the 51 left and the summary;
    each kept once, the group's count exact."""
    sizes: list[int] = []

    class Counted(InMemoryStore):
        def execute_batch(self, partition_key: str, operations: Any) -> list[str | None]:
            sizes.append(len(operations))
            return super().execute_batch(partition_key, operations)

    store = Counted()
    failures = kept(store)
    run(failures.ingest_many(ENTITY, [letter(n, event_id=f"e-{n}") for n in range(1, 151)]))
    assert sizes == [100, 52]
    assert len(records(store)) == 150
    [group] = run(failures.groups())
    assert group.open == 150
