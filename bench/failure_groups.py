"""The failure groups' reads on the failure records (OUTBOX_FAILURE_INGEST), on funcstack's local
Cosmos DB endpoint with the app's indexing policy (deploy/indexing-policy.json): what the list of
groups (`GET groups`) and a group's preview (`POST groups/{id}/preview`) cost, in request units
(every response's `x-ms-request-charge`, counted by azure-core's ``raw_response_hook`` on the
store's client), requests and seconds (medians of ROUNDS).

- The list, for G groups (G causes at one subscription, 3 failures each): the summaries read
  once, then each group's examples (`Failures.latest_open`: one TOP 3 query in its partition,
  ORDER BY the indexed `sequenceNumber`); beside it what the list read before its examples (the
  summaries and the quarantine's COUNT, read directly), so the difference is theirs.
- The preview of one group of N failures (a retry, two subscriptions): every open record read
  a page of 1,000 at a time without its body, attempts and history (`Failures.open_page`), what
  each subscription receives counted for all N; beside it the sample of 100 the preview read
  before (`Failures.sample`: its records whole).

The outbox runs in-process on the test kit's fakes but for its store (the sync SDK's container,
as the Functions app's routes run it). Figures, not assertions. ``python -m bench.failure_groups``
prints them (``--groups 7 100 --n 2100``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from azure.cosmos import CosmosClient, PartitionKey

from cosmos_outbox import Outbox
from cosmos_outbox.cosmos import CosmosDocumentStore
from cosmos_outbox.ports import DeadLetter, DeadLetterEntity
from cosmos_outbox_testing import in_memory, run_sync
from funcstack.services import LocalServices

POLICY = Path(__file__).parents[1] / "deploy" / "indexing-policy.json"
SUBSCRIPTION, OTHER = "handler", "audit"
DATABASE = "bench"
ROUNDS = 5


class Charges:
    """Every response's request charge and count, since the last `reset`."""

    def __init__(self) -> None:
        self.units = 0.0
        self.requests = 0

    def hook(self, response: Any) -> None:
        self.units += float(response.http_response.headers.get("x-ms-request-charge") or 0)
        self.requests += 1

    def reset(self) -> None:
        self.units, self.requests = 0.0, 0


def _letters(count: int, kind: int, first: int) -> list[DeadLetter]:
    """`count` dead letters of one group: its event type (an action of its own: `kind` in
    letters, as a group's key keeps it)."""
    action = "Contact" + "".join(chr(97 + int(d)) for d in str(kind))
    return [
        DeadLetter(
            sequence_number=first + i,
            body=json.dumps({"contactId": f"c-{i}", "phone": "x" * 200}).encode(),
            message_id=str(uuid.uuid4()),
            session_id=f"c-{i}",
            subject=action,
            content_type="application/json",
            correlation_id=None,
            application_properties={
                "aggregateType": "contact",
                "contactId": f"c-{i}",
                "action": action,
                "version": 1,
                "outboxFormat": 2,
                "cloudEvents_id": str(uuid.uuid4()),
            },
            reason="HandlerRefused",
            description="KeyError: 'phone'",
            delivery_count=10,
            enqueued_at=time.time(),
        )
        for i in range(count)
    ]


def _timed(charges: Charges, work: Callable[[], Any]) -> dict[str, float]:
    """`work` ROUNDS times: the median seconds, request units and requests of one."""
    seconds, units, requests = [], [], []
    for _ in range(ROUNDS):
        charges.reset()
        started = time.perf_counter()
        work()
        seconds.append(time.perf_counter() - started)
        units.append(charges.units)
        requests.append(charges.requests)
    return {
        "s": statistics.median(seconds),
        "ru": statistics.median(units),
        "requests": statistics.median(requests),
    }


def _outbox(client: CosmosClient, name: str) -> Outbox:
    database = client.create_database_if_not_exists(DATABASE)
    container = database.create_container(
        name,
        partition_key=PartitionKey(path="/partitionKey"),
        indexing_policy=json.loads(POLICY.read_text()),
        default_ttl=-1,
    )
    memory = in_memory(subscriptions={SUBSCRIPTION: None, OTHER: None})
    services = dataclasses.replace(
        memory.services, store=CosmosDocumentStore(container), failure_ingest=True
    )
    return Outbox(services=lambda: services)


def _list(client: CosmosClient, charges: Charges, groups: int) -> dict[str, Any]:
    outbox = _outbox(client, f"list-{groups}")
    failures = outbox.wiring().failures
    assert failures is not None
    for g in range(groups):
        run_sync(failures.ingest_many(DeadLetterEntity(SUBSCRIPTION), _letters(3, g, g * 3)))
    operations = outbox.operations()
    listed = run_sync(operations.groups.groups())
    assert len(listed.groups) == groups and all(len(g.examples) == 3 for g in listed.groups)
    after = _timed(charges, lambda: run_sync(operations.groups.groups()))

    quarantine = outbox.wiring().quarantine

    async def without() -> None:
        # what the list read before its examples: the summaries and the quarantine's COUNT
        await failures.groups()
        await quarantine.count()

    before = _timed(charges, lambda: run_sync(without()))
    return {"groups": groups, "with_examples": after, "without_examples": before}


def _preview(client: CosmosClient, charges: Charges, n: int) -> dict[str, Any]:
    outbox = _outbox(client, f"preview-{n}")
    failures = outbox.wiring().failures
    assert failures is not None
    entity = DeadLetterEntity(SUBSCRIPTION)
    for first in range(0, n, 500):
        run_sync(failures.ingest_many(entity, _letters(min(500, n - first), 0, first)))
    operations = outbox.operations()
    [group] = run_sync(operations.groups.groups()).groups
    answer = run_sync(operations.groups.preview(group.id, "retry"))
    assert answer.matching == n and sum(d.receives for d in answer.deliveries) >= n
    whole = _timed(charges, lambda: run_sync(operations.groups.preview(group.id, "retry")))
    sample = _timed(charges, lambda: run_sync(failures.sample(group.id, 100)))
    return {"n": n, "preview": whole, "sample_of_100_before": sample}


def measure(groups: list[int], n: int, base: Path | None = None) -> dict[str, Any]:
    logging.getLogger("cosmos_outbox").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory() as tmp:
        services = LocalServices(workdir=base if base is not None else Path(tmp))
        try:
            services.run_cosmos()
            cosmos = services.cosmos
            assert cosmos is not None
            charges = Charges()
            client = CosmosClient(
                cosmos.endpoint,
                cosmos.key,
                raw_response_hook=charges.hook,
                **cosmos.client_options(),
            )
            lists = [_list(client, charges, g) for g in groups]
            return {"lists": lists, "preview": _preview(client, charges, n)}
        finally:
            services.stop()


def report(found: dict[str, Any]) -> str:
    def line(figures: dict[str, float]) -> str:
        return (
            f"{figures['s'] * 1000:.0f} ms, {figures['ru']:.1f} RU, "
            f"{figures['requests']:.0f} requests"
        )

    lines = []
    for listed in found["lists"]:
        lines.append(
            f"GET groups, {listed['groups']} groups: {line(listed['with_examples'])} "
            f"(without examples: {line(listed['without_examples'])})"
        )
    preview = found["preview"]
    lines.append(
        f"preview of a group of {preview['n']}: {line(preview['preview'])} "
        f"(the sample of 100 read before: {line(preview['sample_of_100_before'])})"
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, nargs="+", default=[7, 100])
    parser.add_argument("--n", type=int, default=2100, help="the previewed group's failures")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    print(report(measure(args.groups, args.n)), flush=True)


if __name__ == "__main__":
    main()
