"""The claim check's cost per MB: the relay offloading events of 1 MB (a real Service Bus
publisher on the local endpoint, 256 KB messages; the bodies uploaded to Azurite through
azure-storage-blob; then the claim-check messages sent), beside its floor: the bare SDK
uploading the same bodies to the same container, one `upload_blob` each, nothing of ours.

Wall time and the process's CPU time, per MB of body; best of alternating rounds (other
processes on the same cores only ever add). The endpoints run in their own processes, so the
CPU is what the relay's process spends (encoding, the SDK's HTTP client, our mapping)."""

from __future__ import annotations

import logging
import time
import uuid
from pathlib import Path
from typing import Any

from azure.storage.blob import BlobServiceClient, ContentSettings

from cosmos_outbox import Outbox
from cosmos_outbox.blob import BlobPayloadStore
from cosmos_outbox.documents import EVENT_TYPE, read_feed
from cosmos_outbox.relay import Quarantine, Relay, RelayTelemetry
from cosmos_outbox.servicebus import ServiceBusPublisher
from cosmos_outbox_testing import InMemoryStore, in_memory, run_sync
from funcstack.services import LocalServices
from tools.stack import SERVICEBUS_CONFIG

#: The relay's telemetry (the global providers: a no-op here).
TELEMETRY = RelayTelemetry(destination="bench-events")

MB = 1024 * 1024


def documents(n: int, size: int = MB) -> list[dict[str, Any]]:
    """`n` event documents of one aggregate, each with a body of about `size` bytes, as the
    library stores them (a session's commit each, on an in-memory store)."""
    aggregate = str(uuid.uuid4())
    with in_memory() as world:
        outbox = Outbox(services=lambda: world.services)
        for _ in range(n):
            with outbox.transaction(aggregate, entity="manuscript") as tx:
                tx.publish("ManuscriptRevised", {"text": "x" * (size - 250)})
                tx.commit()
        return list(world.store.of_type(EVENT_TYPE))


def measure(base: Path, events: int = 10, rounds: int = 3) -> dict[str, Any]:
    logging.getLogger("cosmos_outbox.relay").setLevel(logging.WARNING)
    logging.getLogger("cosmos_outbox").setLevel(logging.WARNING)
    services = LocalServices(workdir=base)
    try:
        azurite = services.run_azurite()
        servicebus = services.run_servicebus(config=SERVICEBUS_CONFIG)
        connection = azurite.connection_string
        with BlobServiceClient.from_connection_string(connection) as service:
            service.create_container("outbox-payloads")
        publisher = ServiceBusPublisher.from_connection_string(
            servicebus.connection_string, "contact-events"
        )
        store = BlobPayloadStore.from_connection_string(connection, "outbox-payloads")
        # The relay as the sync API runs it (over sync adapters, to its end in this thread).
        relay = Relay(publisher, Quarantine(InMemoryStore()), TELEMETRY, payloads=store)
        floor_container = BlobServiceClient.from_connection_string(connection).get_container_client(
            "outbox-payloads"
        )
        run_sync(relay.relay(read_feed(documents(1))))  # links opened, clients warm
        results: dict[str, list[tuple[float, float]]] = {"relay": [], "floor": []}
        megabytes = 0.0
        for _ in range(rounds):
            docs = documents(events)
            feed = list(read_feed(docs))
            bodies = [
                (f"floor/{d['id']}", r.body)
                for d, r in zip(docs, feed, strict=True)
                if hasattr(r, "body")
            ]
            megabytes = sum(len(b) for _, b in bodies) / MB
            wall, cpu = time.perf_counter(), time.process_time()
            report = run_sync(relay.relay(feed))
            results["relay"].append((time.perf_counter() - wall, time.process_time() - cpu))
            assert report.offloaded == events, report
            wall, cpu = time.perf_counter(), time.process_time()
            for name, body in bodies:
                floor_container.upload_blob(
                    name,
                    body,
                    overwrite=True,
                    content_settings=ContentSettings(content_type="application/json"),
                )
            results["floor"].append((time.perf_counter() - wall, time.process_time() - cpu))
        publisher.close()
        floor_container.close()
    finally:
        services.stop()
    best = {k: (min(w for w, _ in v), min(c for _, c in v)) for k, v in results.items()}
    per_mb = {k: (w / megabytes * 1000, c / megabytes * 1000) for k, (w, c) in best.items()}
    return {
        "events": events,
        "megabytes_per_round": megabytes,
        "rounds": rounds,
        "relay_ms_per_mb": per_mb["relay"][0],
        "relay_cpu_ms_per_mb": per_mb["relay"][1],
        "floor_ms_per_mb": per_mb["floor"][0],
        "floor_cpu_ms_per_mb": per_mb["floor"][1],
        "wall_ratio": per_mb["relay"][0] / per_mb["floor"][0],
        "cpu_ratio": per_mb["relay"][1] / per_mb["floor"][1],
    }


if __name__ == "__main__":
    import json
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        print(json.dumps(measure(Path(tmp)), indent=2))
