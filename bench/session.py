"""The transactional session against its floor: a commit of one document of the app's own and
one published event (`Outbox.session`, sync; `cosmos_outbox.aio.Outbox.session`) beside the bare
SDK's transactional batch of the same two documents, on the same Cosmos DB endpoint, one at a
time, calls alternated (so both see the same machine).

Each commit is on a partition of its own (a new customer, as a create is): the session's batch
creates the document, the event and the session's sequence document (the third operation of
its one round trip). The floor's batch writes the two documents the session wrote, as it wrote
them (new ids each time); its clients are the session's own (`cosmos_outbox.cosmos`' options),
so the ratio is what the session adds: staging, the event document, the sequence, the batch's
limits checked, the answer read. A second floor writes the three documents the session's batch
writes (the sequence document too): the session beside it is what it adds beyond its design's
third write.

The ratio is the session's median ÷ the floor's. Beside it, the median of each round's own ratio
(session ÷ floor, the calls of one round a few milliseconds apart): on a machine whose speed
drifts from second to second (two shared cores) it is not moved by the drift, but a ratio's
spread is skewed upwards, so it reads a little higher.

`cpu()` measures the session's own CPU without I/O: its commits against a store that answers
at once, beside the same three documents written by hand (a new id, the time, three dicts) to
the same store.
"""

from __future__ import annotations

import asyncio
import secrets
import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

from bench.stats import percentile
from cosmos_outbox import Outbox, Services
from cosmos_outbox.aio import Outbox as AsyncOutbox
from cosmos_outbox.cosmos import CosmosDocumentStore, cosmos_client
from cosmos_outbox.cosmos.aio import CosmosDocumentStore as AsyncCosmosDocumentStore
from cosmos_outbox.cosmos.aio import cosmos_client as async_cosmos_client
from cosmos_outbox.ports import MessagePublisher
from tools.provision import create_contacts_container
from tools.stack import Stack

CONTAINER = "session-bench"


def _no_publisher() -> MessagePublisher:
    raise AssertionError("the benchmark relays nothing")


def _booking(customer: str) -> dict[str, Any]:
    return {
        "id": f"booking-{uuid.uuid4()}",
        "partitionKey": customer,
        "type": "booking",
        "seats": 2,
        "show": "Hamlet",
        "customer": customer,
    }


def _services(store: Any) -> Services:
    return Services(store=store, publisher=_no_publisher, token_secret=secrets.token_hex(16))


async def _aio_commit(outbox: AsyncOutbox) -> None:
    """The benchmark's commit, `aio`: a new customer's booking and the event of it."""
    customer = f"customer-{uuid.uuid4()}"
    async with outbox.transaction(customer, entity="booking") as tx:
        booking = _booking(customer)
        tx.create(booking)
        tx.publish("BookingConfirmed", {"reference": booking["id"], "seats": 2})
        await tx.commit()


def _floor_batch(
    written: list[dict[str, Any]], *, with_sequence: bool = False
) -> Callable[[], tuple[str, list[Any]]]:
    """The session's document and event as it wrote them (and its sequence document, when
    `with_sequence`), with new ids and partition."""
    booking, event, sequence = (
        {k: v for k, v in d.items() if not k.startswith("_")} for d in written
    )

    def batch() -> tuple[str, list[Any]]:
        customer = f"customer-{uuid.uuid4()}"
        operations: list[Any] = [
            ("create", ({**booking, "id": f"booking-{uuid.uuid4()}", "partitionKey": customer},)),
            (
                "create",
                (
                    {
                        **event,
                        "id": str(uuid.uuid4()),
                        "partitionKey": customer,
                        "aggregateId": customer,
                    },
                ),
            ),
        ]
        if with_sequence:
            operations.append(
                (
                    "create",
                    ({**sequence, "id": f"sequence-{uuid.uuid4()}", "partitionKey": customer},),
                )
            )
        return customer, operations

    return batch


def _alternated(calls: list[Callable[[], None]], n: int, warmup: int = 20) -> list[list[float]]:
    for _ in range(warmup):
        for fn in calls:
            fn()
    samples: list[list[float]] = [[] for _ in calls]
    for _ in range(n):
        for fn, out in zip(calls, samples, strict=True):
            start = time.perf_counter()
            fn()
            out.append((time.perf_counter() - start) * 1000)
    return samples


def _row(samples: list[float]) -> dict[str, float]:
    return {
        "n": len(samples),
        "median_ms": statistics.median(samples),
        "p99_ms": percentile(samples, 99),
    }


def _paired(samples: list[float], floor: list[float]) -> float:
    """The median of the rounds' ratios (see the module)."""
    return statistics.median(a / b for a, b in zip(samples, floor, strict=True))


def measure(stack: Stack, *, n: int = 600) -> dict[str, Any]:
    """Session commit and floor batch, sync then aio: medians, p99s and the ratios."""
    assert stack.cosmos is not None
    connection = stack.cosmos.connection_string
    database = stack.settings()["COSMOS_DATABASE"]
    sync_client = cosmos_client(connection_string=connection)
    container = create_contacts_container(sync_client.get_database_client(database), CONTAINER)
    results: dict[str, Any] = {}

    # -- sync: the session as the sync API runs it, the floor on the sync client
    outbox = Outbox((), services=lambda: _services(CosmosDocumentStore(container)))

    def written_by(customer: str) -> list[dict[str, Any]]:
        """The booking, the event and the sequence document, in that order."""
        order = {"booking": 0, "outboxSequence": 2}
        found = list(container.query_items("SELECT * FROM c", partition_key=customer))
        assert len(found) == 3, [d["type"] for d in found]
        return sorted(found, key=lambda d: order.get(d["type"], 1))

    def sync_session() -> None:
        customer = f"customer-{uuid.uuid4()}"
        with outbox.transaction(customer, entity="booking") as tx:
            booking = _booking(customer)
            tx.create(booking)
            tx.publish("BookingConfirmed", {"reference": booking["id"], "seats": 2})
            tx.commit()

    first = f"customer-{uuid.uuid4()}"
    with outbox.transaction(first, entity="booking") as tx:
        tx.create(_booking(first))
        tx.publish("BookingConfirmed", {"reference": "b", "seats": 2})
        tx.commit()
    batch = _floor_batch(written_by(first))
    batch3 = _floor_batch(written_by(first), with_sequence=True)

    def sync_floor(make: Callable[[], tuple[str, list[Any]]]) -> Callable[[], None]:
        def run() -> None:
            customer, operations = make()
            container.execute_item_batch(batch_operations=operations, partition_key=customer)

        return run

    plain, floor, floor3 = _alternated([sync_session, sync_floor(batch), sync_floor(batch3)], n)
    results["sync"] = {
        "session": _row(plain),
        "floor": _row(floor),
        "floor3": _row(floor3),
        "paired_ratio": _paired(plain, floor),
    }

    # -- aio: the session awaited on an event loop, the floor on the aio client
    loop = asyncio.new_event_loop()

    async def connect() -> Any:
        return async_cosmos_client(connection_string=connection)

    aio = loop.run_until_complete(connect())
    aio_container = aio.get_database_client(database).get_container_client(CONTAINER)
    aio_outbox = AsyncOutbox(
        (), services=lambda: _services(AsyncCosmosDocumentStore(aio_container))
    )

    async def floor_batch(make: Callable[[], tuple[str, list[Any]]]) -> None:
        customer, operations = make()
        await aio_container.execute_item_batch(batch_operations=operations, partition_key=customer)

    plain, floor, floor3 = _alternated(
        [
            lambda: loop.run_until_complete(_aio_commit(aio_outbox)),
            lambda: loop.run_until_complete(floor_batch(batch)),
            lambda: loop.run_until_complete(floor_batch(batch3)),
        ],
        n,
    )
    results["aio"] = {
        "session": _row(plain),
        "floor": _row(floor),
        "floor3": _row(floor3),
        "paired_ratio": _paired(plain, floor),
    }
    loop.run_until_complete(aio.close())
    loop.close()
    for flavour in ("sync", "aio"):
        r = results[flavour]
        r["ratio"] = r["session"]["median_ms"] / r["floor"]["median_ms"]
        r["ratio_to_three"] = r["session"]["median_ms"] / r["floor3"]["median_ms"]
    return results


class _AtOnce:
    """A container that answers a batch at once (as the SDK reads the service's answer)."""

    id = "at-once"

    async def execute_item_batch(
        self, batch_operations: list[Any], partition_key: str
    ) -> list[dict[str, Any]]:
        return [{"statusCode": 201, "eTag": '"1"'} for _ in batch_operations]


def cpu(*, n: int = 5000, rounds: int = 7) -> dict[str, float]:
    """The aio session's CPU per commit of one document and one event against a store that
    answers at once, beside writing the same three documents by hand: microseconds, best of
    `rounds` (see the module)."""
    from cosmos_outbox.documents import new_id, utc_text

    container = _AtOnce()
    outbox = AsyncOutbox(
        (),
        services=lambda: _services(
            AsyncCosmosDocumentStore(container, partition_key_path="/partitionKey")  # type: ignore[arg-type]
        ),
    )

    async def by_hand() -> None:
        customer = f"customer-{uuid.uuid4()}"
        booking = _booking(customer)
        event_id, now = new_id(), utc_text()
        await container.execute_item_batch(
            batch_operations=[
                ("create", (booking,)),
                (
                    "create",
                    (
                        {
                            "id": f"outbox-sequence-booking-{customer}",
                            "partitionKey": customer,
                            "type": "outboxSequence",
                            "entity": "booking",
                            "sessionId": customer,
                            "next": 2,
                            "ttl": -1,
                        },
                    ),
                ),
                (
                    "create",
                    (
                        {
                            "id": event_id,
                            "partitionKey": customer,
                            "type": "outboxEvent",
                            "aggregateType": "booking",
                            "source": "/bookings",
                            "data": {
                                "id": event_id,
                                "bookingId": customer,
                                "version": 1,
                                "createdAt": now,
                                "traceparent": None,
                                "action": "BookingConfirmed",
                                "reference": booking["id"],
                                "seats": 2,
                            },
                            "ttl": 3600,
                        },
                    ),
                ),
            ],
            partition_key=customer,
        )

    async def many(fn: Callable[[], Any]) -> None:
        for _ in range(n):
            await fn()

    loop = asyncio.new_event_loop()
    best = {"session": float("inf"), "by_hand": float("inf")}
    try:
        for _ in range(rounds):
            for name, fn in (("session", lambda: _aio_commit(outbox)), ("by_hand", by_hand)):
                start = time.thread_time()
                loop.run_until_complete(many(fn))
                best[name] = min(best[name], (time.thread_time() - start) / n * 1e6)
    finally:
        loop.close()
    return {
        "session_us": best["session"],
        "by_hand_us": best["by_hand"],
        "added_us": best["session"] - best["by_hand"],
    }
