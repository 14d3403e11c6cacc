"""The failures' ingest at rate (issue 95 item 8): N dead letters drained into Cosmos DB by the
receiver `cosmos-outbox relay` runs (`_relay_process.failure_receiver.FailureReceiver`: 100
received at a time, kept by `Failures.ingest_many`, then completed), on funcstack's local
Service Bus and Cosmos DB endpoints.

The N messages (about 300 bytes and the outbox's properties each, one cause: a handler's
refusal of the same kind) are sent to a topic in batches and expire into the dead-letter queue
of its subscription (`DeadLetteringOnMessageExpiration`, a time to live of a second); the
receiver then starts and is timed until it has kept and completed all N (failures a second).
The floor: the broker's own batch send of the same N messages (`ServiceBusMessageBatch`, the
SDK's aio sender) to a queue: messages a second. The ratio = ingest ÷ send.

Then the operation over them (item 8's "and operations"): the one group's retry, as an operator
starts it (`groups.retry`, no canary), worked by the operations' worker (`OperationWorker`, the
relay's hosts' tick) over the group's records (`RecordItems`): each stored message resent to the
topic (in sends of a batch, `BATCH` a step), its record marked resolved; timed from its start
until done (failures a second; ratio to the same floor).

Figures, not assertions. ``measure(n)`` returns them; ``python -m bench.failure_ingest``
prints them (``--n 100000`` for more).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

from azure.cosmos import PartitionKey
from azure.cosmos.aio import CosmosClient
from azure.servicebus import ServiceBusMessage
from azure.servicebus.aio import ServiceBusClient, ServiceBusSender

from cosmos_outbox._mapper import OperationRecord, OperationScope
from cosmos_outbox._relay_process.failure_receiver import FailureReceiver
from cosmos_outbox.cosmos.aio import CosmosDocumentStore
from cosmos_outbox.documents import FAILURE_GROUP_TYPE
from cosmos_outbox.operations import Actor
from cosmos_outbox.operations._bulk._items import RecordItems
from cosmos_outbox.operations._bulk._operation import OperationStore, new_record
from cosmos_outbox.operations._bulk._worker import OperationWorker
from cosmos_outbox.operations._dead_letters import DeadLetterOperators
from cosmos_outbox.operations._failures import Failures
from cosmos_outbox.ports import DeadLetterEntity
from cosmos_outbox.servicebus.aio import ServiceBusDeadLetters
from funcstack.services import LocalServices

TOPIC, SUBSCRIPTION, FLOOR_QUEUE = "failures", "handler", "floor"
DATABASE, CONTAINER = "bench", "outbox"
#: The dead letters' time to live on the topic: they expire into the dead-letter queue.
TTL_SECONDS = 1
#: A batch's size: under the 256 KB link limit by a margin (funcstack's broker counts a full
#: SDK batch 11 bytes over it and refuses it).
BATCH_BYTES = 250_000
#: The longest wait for the N dead letters to be kept (a generous bound, not a figure).
DEADLINE_SECONDS = 3600


def _config(base: Path) -> Path:
    path = base / "Config.json"
    subscription = {
        "Name": SUBSCRIPTION,
        "Properties": {"LockDuration": "PT1M", "DeadLetteringOnMessageExpiration": True},
    }
    path.write_text(
        json.dumps(
            {
                "UserConfig": {
                    "Namespaces": [
                        {
                            "Name": "sbemulatorns",
                            "Topics": [{"Name": TOPIC, "Subscriptions": [subscription]}],
                            "Queues": [{"Name": FLOOR_QUEUE, "Properties": {}}],
                        }
                    ],
                    "Logging": {"Type": "File"},
                }
            }
        )
    )
    return path


def _messages(n: int, ttl: timedelta | None) -> list[ServiceBusMessage]:
    return [
        ServiceBusMessage(
            json.dumps({"contactId": f"c-{i}", "name": "Ada Lovelace", "phone": "x" * 200}),
            message_id=str(uuid.uuid4()),
            session_id=f"c-{i}",
            content_type="application/json",
            time_to_live=ttl,
            application_properties={
                "aggregateType": "contact",
                "contactId": f"c-{i}",
                "action": "ContactCreated",
                "version": 1,
                "outboxFormat": 2,
            },
        )
        for i in range(n)
    ]


async def _send_batched(sender: ServiceBusSender, messages: list[ServiceBusMessage]) -> float:
    """`messages` sent in full `ServiceBusMessageBatch`es, one after the other: seconds."""
    started = time.perf_counter()
    batch = await sender.create_message_batch(max_size_in_bytes=BATCH_BYTES)
    for message in messages:
        try:
            batch.add_message(message)
        except ValueError:  # full
            await sender.send_messages(batch)
            batch = await sender.create_message_batch(max_size_in_bytes=BATCH_BYTES)
            batch.add_message(message)
    if len(batch):
        await sender.send_messages(batch)
    return time.perf_counter() - started


async def _run(services: LocalServices, n: int) -> dict[str, Any]:
    assert services.servicebus is not None and services.cosmos is not None
    sb = services.servicebus.connection_string
    cosmos = services.cosmos
    async with ServiceBusClient.from_connection_string(sb) as client:
        async with client.get_queue_sender(FLOOR_QUEUE) as sender:
            await _send_batched(sender, _messages(10, None))  # link open, warm
            floor_s = await _send_batched(sender, _messages(n, None))
        async with client.get_topic_sender(TOPIC) as sender:
            dead_s = await _send_batched(sender, _messages(n, timedelta(seconds=TTL_SECONDS)))
    await asyncio.sleep(TTL_SECONDS + 5)  # expired: into the dead-letter queue

    async with CosmosClient(
        cosmos.endpoint, cosmos.key, **cosmos.client_options()
    ) as cosmos_client:
        database = await cosmos_client.create_database_if_not_exists(DATABASE)
        container = await database.create_container_if_not_exists(
            CONTAINER, partition_key=PartitionKey(path="/partitionKey"), default_ttl=-1
        )
        store = CosmosDocumentStore(container)
        receiver = FailureReceiver(
            lambda: ServiceBusClient.from_connection_string(sb),
            TOPIC,
            DeadLetterEntity(SUBSCRIPTION),
            Failures(store),
        )
        load_before = os.getloadavg()
        started = time.perf_counter()
        cpu = time.process_time()
        receiver.start()
        try:
            deadline = started + DEADLINE_SECONDS
            # polls the receiver's count (it keeps no event to wait on)
            while receiver.ingested < n and time.perf_counter() < deadline:  # noqa: ASYNC110
                await asyncio.sleep(0.05)
            ingest_s = time.perf_counter() - started
            cpu_s = time.process_time() - cpu
        finally:
            await receiver.stop()
        load_after = os.getloadavg()
        summaries = await store.of_type(FAILURE_GROUP_TYPE)  # the stored form's `open`
        operation = await _operation(sb, store, [str(d["group"]) for d in summaries])
        left = await store.of_type(FAILURE_GROUP_TYPE)
    per_s = receiver.ingested / ingest_s
    floor_per_s = n / floor_s
    return operation | {
        "group_open_after_operation": sum(int(d["open"]) for d in left),
        "operation_ratio_to_batch_send": operation["operation_per_s"] / floor_per_s,
        "n": n,
        "ingested": receiver.ingested,
        "group_open": sum(int(d["open"]) for d in summaries),
        "ingest_s": ingest_s,
        "ingest_per_s": per_s,
        "ingest_cpu_us_per_failure": cpu_s / max(receiver.ingested, 1) * 1e6,
        "floor_send_s": floor_s,
        "floor_send_per_s": floor_per_s,
        "dead_letter_send_s": dead_s,
        "ratio_to_batch_send": per_s / floor_per_s,
        "load_before": load_before,
        "load_after": load_after,
        "cores": os.cpu_count(),
    }


async def _operation(sb: str, store: CosmosDocumentStore, groups: list[str]) -> dict[str, Any]:
    """The group's retry (no canary) worked to its end by the operations' worker: timed."""
    [group] = groups  # one cause, one entity: one group
    entity = DeadLetterEntity(SUBSCRIPTION)
    operations = OperationStore(store)
    record = await operations.create(
        new_record(
            "groups.retry",
            OperationScope(group=group, source="dead letters", entity=SUBSCRIPTION),
            who=Actor("command line", name="bench"),
            reason=None,
            canary=0,
            canary_wait_seconds=0.0,
        ),
        holds=f"group:{group}",
    )
    async with ServiceBusClient.from_connection_string(sb) as client:
        queues = ServiceBusDeadLetters(client, TOPIC)
        letters = DeadLetterOperators(lambda: queues, [entity])
        failures = Failures(store)
        listed: dict[str, tuple[float, list[str]]] = {}

        def items_of(current: OperationRecord) -> RecordItems:
            return RecordItems(
                failures,
                letters,
                entity,
                group,
                "resubmit",
                operation=current.id,
                by="bench",
                reason=None,
                subscribers=dict,
                clock=time.time,
                listed=listed,
                picks_canary=current.state == "canary",
            )

        worker = OperationWorker(operations, items_of, owner="bench")
        load_before = os.getloadavg()
        started = time.perf_counter()
        try:
            deadline = started + DEADLINE_SECONDS
            while record.state != "done" and time.perf_counter() < deadline:
                await worker.tick(budget_seconds=25.0)
                record = await operations.get(record.id)
            operation_s = time.perf_counter() - started
        finally:
            await queues.close()
        load_after = os.getloadavg()
    counts = record.counts
    return {
        "operation_state": record.state,
        "operation_items": counts.items,
        "operation_done": counts.done,
        "operation_sent": counts.sent,
        "operation_failed": counts.failed,
        "operation_s": operation_s,
        "operation_per_s": counts.done / operation_s,
        "operation_load_before": load_before,
        "operation_load_after": load_after,
    }


def measure(n: int = 10_000, base: Path | None = None) -> dict[str, Any]:
    logging.getLogger("cosmos_outbox").setLevel(logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = base if base is not None else Path(tmp)
        services = LocalServices(workdir=workdir)
        try:
            services.run_cosmos()
            services.run_servicebus(config=_config(workdir))
            return asyncio.run(_run(services, n))
        finally:
            services.stop()


def report(r: dict[str, Any]) -> str:
    return "\n".join(
        [
            f"  {r['ingested']:,} of {r['n']:,} dead letters kept and completed in "
            f"{r['ingest_s']:.1f} s: {r['ingest_per_s']:.0f} failures/s "
            f"({r['ingest_cpu_us_per_failure']:.0f} us CPU each in the receiver's process); "
            f"the group's open count {r['group_open']:,}",
            f"  the broker's own batch send of the same {r['n']:,} messages: "
            f"{r['floor_send_s']:.1f} s, {r['floor_send_per_s']:.0f} messages/s; ingest ÷ send "
            f"{r['ratio_to_batch_send']:.2f}x",
            f"  load average before {r['load_before'][0]:.2f}, after {r['load_after'][0]:.2f} "
            f"({r['cores']} cores)",
            f"  the group's retry operation: {r['operation_state']}, {r['operation_done']:,} of "
            f"{r['operation_items']:,} done ({r['operation_sent']:,} resent, "
            f"{r['operation_failed']:,} failed) in {r['operation_s']:.1f} s: "
            f"{r['operation_per_s']:.0f} failures/s; ÷ send "
            f"{r['operation_ratio_to_batch_send']:.2f}x; "
            f"open left {r['group_open_after_operation']:,}",
            f"  load average before {r['operation_load_before'][0]:.2f}, after "
            f"{r['operation_load_after'][0]:.2f}",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000, help="dead letters (default 10,000)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    print(f"The failures' ingest: {args.n:,} dead letters ...", flush=True)
    print(report(measure(args.n)))


if __name__ == "__main__":
    main()
