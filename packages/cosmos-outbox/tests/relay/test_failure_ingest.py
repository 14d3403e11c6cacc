"""The failures' ingest of `cosmos-outbox relay` (`_relay_process.failure_receiver`) on the local
stack: a subscription's dead letters drained into a Cosmos DB container, one record each, and
the ingest stopped between the write and the complete (its write's answer lost; the receiver
killed, its links gone with it) loses nothing and counts nothing twice: the dead letter comes
back, its second write changes nothing, it is completed then. The subscription `failing` of
topic `outbox-failures` (fixtures/funcstack.json: no sessions, a lock of 5 s) is this
module's."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

pytest.importorskip("funcstack", reason="the local Azure stack: pip install funcstack")

from azure.cosmos.aio import CosmosClient as AsyncCosmosClient
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient
from azure_stack import DATABASE, verified
from deadlines import SHORT

from cosmos_outbox._mapper.failure import FAILED_MESSAGE_TYPE, failure_record
from cosmos_outbox._relay_process.failure_receiver import FailureReceiver
from cosmos_outbox.cosmos.aio import CosmosDocumentStore as AsyncCosmosDocumentStore
from cosmos_outbox.operations._failures import Failures
from cosmos_outbox.ports import (
    AsyncDocumentStore,
    BatchOperation,
    DeadLetterEntity,
    Page,
    QueryParameters,
)
from funcstack import LocalStack

pytestmark = pytest.mark.integration

TOPIC, SUBSCRIPTION = "outbox-failures", "failing"
ENTITY = DeadLetterEntity(SUBSCRIPTION)
#: `failing`'s lock duration (fixtures/funcstack.json).
LOCK_SECONDS = 5


class Killed(BaseException):
    """The receiver's process dying: nothing after it runs (not an Exception: not handled)."""


class StoppedAfterWrite(AsyncDocumentStore):
    """The container, through which the first `writes` batches are written and then stop the
    ingest, as `stop` says: `"answer lost"` (the write done, its answer an error: the receiver
    abandons the dead letter) or `"killed"` (the write done, the receiver dead before its
    complete)."""

    def __init__(self, inner: AsyncDocumentStore, stop: str, writes: int = 1) -> None:
        self.inner, self.stop, self.left = inner, stop, writes
        self.stopped = 0
        #: the operations of each batch written
        self.batches: list[int] = []

    async def execute_batch(
        self, partition_key: str, operations: Sequence[BatchOperation]
    ) -> list[str | None]:
        etags = await self.inner.execute_batch(partition_key, operations)
        self.batches.append(len(operations))
        if self.left > 0:
            self.left -= 1
            self.stopped += 1
            if self.stop == "killed":
                raise Killed
            if self.stop == "lock lost":  # answered after the dead letters' locks ran out
                await asyncio.sleep(LOCK_SECONDS + 2)
                return etags
            raise ConnectionResetError("the write's answer was lost")
        return etags

    async def read(self, partition_key: str, document_id: str) -> dict[str, Any] | None:
        return await self.inner.read(partition_key, document_id)

    async def ping(self) -> None:
        await self.inner.ping()

    async def upsert(self, document: Mapping[str, Any]) -> dict[str, Any]:
        return await self.inner.upsert(document)

    async def replace(
        self, document: Mapping[str, Any], *, if_match: str | None = None
    ) -> dict[str, Any]:
        return await self.inner.replace(document, if_match=if_match)

    async def delete(self, partition_key: str, document_id: str) -> None:
        await self.inner.delete(partition_key, document_id)

    async def find(self, type_: str, document_id: str) -> dict[str, Any] | None:
        return await self.inner.find(type_, document_id)

    async def of_type(
        self, type_: str, *, partition_key: str | None = None
    ) -> list[dict[str, Any]]:
        return await self.inner.of_type(type_, partition_key=partition_key)

    async def page_of_type(
        self, type_: str, *, page_size: int, continuation: str | None
    ) -> Page[dict[str, Any]]:
        return await self.inner.page_of_type(type_, page_size=page_size, continuation=continuation)

    async def query(
        self, query: str, parameters: QueryParameters = None, *, partition_key: str | None = None
    ) -> list[Any]:
        return await self.inner.query(query, parameters, partition_key=partition_key)

    async def query_page(
        self,
        query: str,
        parameters: QueryParameters = None,
        *,
        partition_key: str | None = None,
        page_size: int,
        continuation: str | None = None,
    ) -> Page[Any]:
        return await self.inner.query_page(
            query,
            parameters,
            partition_key=partition_key,
            page_size=page_size,
            continuation=continuation,
        )


def dead_letter(stack: LocalStack, count: int) -> list[str]:
    """`count` messages sent to the topic, received at `failing` and dead-lettered: their ids."""
    ids = [str(uuid.uuid4()) for _ in range(count)]
    with ServiceBusClient.from_connection_string(stack.servicebus_connection_string) as client:
        with client.get_topic_sender(TOPIC) as sender:
            sender.send_messages(
                [
                    ServiceBusMessage(
                        b'{"name": "Ada"}',
                        message_id=i,
                        session_id="c-1",
                        application_properties={
                            "aggregateType": "contact",
                            "contactId": "c-1",
                            "action": "ContactCreated",
                            "version": n + 1,
                            "outboxFormat": 2,
                        },
                    )
                    for n, i in enumerate(ids)
                ]
            )
        with client.get_subscription_receiver(TOPIC, SUBSCRIPTION) as receiver:
            left = set(ids)
            deadline = time.monotonic() + SHORT
            while left and time.monotonic() < deadline:
                for message in receiver.receive_messages(max_message_count=50, max_wait_time=1):
                    if message.message_id in left:
                        left.discard(str(message.message_id))
                        receiver.dead_letter_message(
                            message,
                            reason="HandlerRefused",
                            error_description=f"contact {message.message_id} refused",
                        )
                    else:
                        receiver.complete_message(message)
            assert not left, f"not dead-lettered: {left}"
    return ids


def dead_letters_left(stack: LocalStack) -> int:
    with (
        ServiceBusClient.from_connection_string(stack.servicebus_connection_string) as client,
        client.get_subscription_receiver(
            TOPIC, SUBSCRIPTION, sub_queue=ServiceBusSubQueue.DEAD_LETTER
        ) as receiver,
    ):
        return len(receiver.peek_messages(max_message_count=100))


async def until(condition: Any, what: str) -> None:
    try:
        async with asyncio.timeout(SHORT * 2):
            while not await condition():  # noqa: ASYNC110 - polls what the stack holds
                await asyncio.sleep(0.2)
    except TimeoutError:
        raise AssertionError(f"not within {SHORT * 2:g}s: {what}") from None


@pytest.mark.parametrize("stop", ["answer lost", "killed"])
def test_an_ingest_stopped_between_write_and_complete_loses_nothing_and_counts_nothing_twice(
    funcstack_services: LocalStack, fresh: str, stop: str
) -> None:
    ids = dead_letter(funcstack_services, 3)

    async def run() -> None:
        client = AsyncCosmosClient.from_connection_string(
            funcstack_services.cosmos_connection_string, **verified(funcstack_services)
        )
        async with client:
            container = client.get_database_client(DATABASE).get_container_client(fresh)
            real = AsyncCosmosDocumentStore(container)
            stopping = StoppedAfterWrite(real, stop)

            def connect() -> AsyncServiceBusClient:
                return AsyncServiceBusClient.from_connection_string(
                    funcstack_services.servicebus_connection_string
                )

            first = FailureReceiver(connect, TOPIC, ENTITY, Failures(stopping))
            first.start()
            await until(lambda: _true(stopping.stopped == 1), "the first write, then the stop")
            if stop == "killed":  # the process died: a new one takes over
                await first.stop()
                receiver = FailureReceiver(connect, TOPIC, ENTITY, Failures(real))
                receiver.start()
            else:
                receiver = first
            try:
                failures = Failures(real)

                async def all_kept() -> bool:
                    found = await real.of_type(FAILED_MESSAGE_TYPE)
                    return (
                        len(found) == len(ids)
                        and await asyncio.to_thread(dead_letters_left, funcstack_services) == 0
                    )

                await until(all_kept, "every dead letter kept and completed")
                records = [failure_record(d) for d in await real.of_type(FAILED_MESSAGE_TYPE)]
                assert sorted(r.event_id or "" for r in records) == sorted(ids)
                assert [r.attempt_count for r in records] == [1, 1, 1]  # not doubled
                groups = [g for g in await failures.groups() if g.open]
                assert sum(g.open for g in groups) == len(ids)
            finally:
                await receiver.stop()

    asyncio.run(run())


def test_a_batch_whose_complete_fails_after_its_write_comes_back_and_counts_nothing_twice(
    funcstack_services: LocalStack, fresh: str
) -> None:
    """150 dead letters: received up to 100 at a time, kept in transactional batches of up to
    99 records + the group's summary; the first batch's write answers only after the locks of
    its dead letters ran out, so their completes fail (for real: the broker refuses them) and
    the queue gives them again. Each is still one record, one attempt, the group's count exact."""
    ids = dead_letter(funcstack_services, 150)

    async def run() -> None:
        client = AsyncCosmosClient.from_connection_string(
            funcstack_services.cosmos_connection_string, **verified(funcstack_services)
        )
        async with client:
            container = client.get_database_client(DATABASE).get_container_client(fresh)
            real = AsyncCosmosDocumentStore(container)
            slowed = StoppedAfterWrite(real, "lock lost")

            def connect() -> AsyncServiceBusClient:
                return AsyncServiceBusClient.from_connection_string(
                    funcstack_services.servicebus_connection_string
                )

            receiver = FailureReceiver(connect, TOPIC, ENTITY, Failures(slowed))
            receiver.start()
            try:
                failures = Failures(real)

                async def all_kept() -> bool:
                    found = await real.of_type(FAILED_MESSAGE_TYPE)
                    return (
                        len(found) == len(ids)
                        and await asyncio.to_thread(dead_letters_left, funcstack_services) == 0
                    )

                await until(all_kept, "every dead letter kept and completed")
                assert slowed.stopped == 1
                # never past Cosmos DB's 100 operations (99 records + the summary: how many
                # the broker gives in one receive is its timing, the split a unit test's)
                assert max(slowed.batches) <= 100
                records = [failure_record(d) for d in await real.of_type(FAILED_MESSAGE_TYPE)]
                assert sorted(r.event_id or "" for r in records) == sorted(ids)
                assert {r.attempt_count for r in records} == {1}  # not doubled
                assert {len(r.attempts) for r in records} == {1}
                [group] = [g for g in await failures.groups() if g.open]
                assert group.open == len(ids)
            finally:
                await receiver.stop()

    asyncio.run(run())


async def _true(value: bool) -> bool:
    return value


@pytest.mark.parametrize(
    "indexed",
    [
        pytest.param(["/type/?", "/sequenceNumber/?"], id="sequenceNumber indexed"),
        pytest.param(["/type/?"], id="type only"),
    ],
)
def test_an_entitys_open_records_are_read_in_sequence_number_order_a_page_or_a_number_at_a_time(
    funcstack_services: LocalStack,
    admin_database: Any,
    indexed: list[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The store's queries of an entity's dead letters on Cosmos DB (funcstack, which applies
    the indexing policy as the service does): across its groups' partitions, the next ones
    after a sequence number in order (a cross-partition ORDER BY, TOP), and those of given
    numbers. A container that does not index `/sequenceNumber/?` refuses the ORDER BY: every
    open record is read instead, the same answer, a warning naming the index."""
    from azure.cosmos import PartitionKey

    from cosmos_outbox.ports import DeadLetter

    name = f"outbox-{uuid.uuid4().hex[:12]}"
    admin_database.create_container(
        id=name,
        partition_key=PartitionKey(path="/partitionKey"),
        default_ttl=-1,
        indexing_policy={
            "indexingMode": "consistent",
            "includedPaths": [{"path": p} for p in indexed],
            "excludedPaths": [{"path": "/*"}],
        },
    )

    def letter(n: int) -> DeadLetter:
        return DeadLetter(
            sequence_number=n,
            body=b"{}",
            message_id=f"e-{n}",
            session_id="c-1",
            subject="ContactCreated",
            content_type="application/json",
            correlation_id=None,
            application_properties={"aggregateType": "contact", "outboxFormat": 2},
            reason=("HandlerRefused", "Timeout")[n % 2],
            description="refused",
            delivery_count=10,
            enqueued_at=None,
        )

    async def run() -> None:
        client = AsyncCosmosClient.from_connection_string(
            funcstack_services.cosmos_connection_string, **verified(funcstack_services)
        )
        async with client:
            container = client.get_database_client(DATABASE).get_container_client(name)
            failures = Failures(AsyncCosmosDocumentStore(container))
            await failures.ingest_many(ENTITY, [letter(n) for n in range(1, 251)])
            await failures.ingest_many(DeadLetterEntity("other"), [letter(n) for n in (5, 300)])

            def numbers(records: Sequence[Any]) -> list[int]:
                return [r.attempts[-1].sequence_number for r in records]

            pages = [numbers(p) async for p in failures.open_after(ENTITY.name, 0, 100)]
            assert pages == [list(range(1, 101)), list(range(101, 201)), list(range(201, 251))]
            pages = [numbers(p) async for p in failures.open_after(ENTITY.name, 150, 100)]
            assert pages == [list(range(151, 251))]
            found = await failures.open_numbered(ENTITY.name, [7, 240, 400])
            assert sorted(numbers(found)) == [7, 240]

    try:
        asyncio.run(run())
    finally:
        admin_database.delete_container(name)
    refused = [r for r in caplog.records if "/sequenceNumber/?" in r.getMessage()]
    assert bool(refused) == ("/sequenceNumber/?" not in indexed)
