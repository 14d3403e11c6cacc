"""The test kit: what an app's tests need to test it without Azure, and to prove that what they
test holds on Azure too.

- `InMemory` (`in_memory()`): the services an `Outbox` runs on, on in-memory fakes (a store
  with atomic batches and etags, a size-limited publisher, the claim check's payload store, the
  quarantine, a backlog), each held to the same contract suite as the real adapter;
- `FunctionClient`: calls an app's indexed functions in-process as the Functions host would
  (routes matched as the host matches them, the invocation context, the relay's documents);
- `cosmos_outbox.testing._contracts`: the contract suites to subclass (unit of work,
  quarantine, payload store), for the fakes and for the Azure adapters or your own;
- `cosmos_outbox.testing._checks`: checks driven by an app's registered aggregates and declared
  routes (every event mapped to the document, the message and the OpenAPI document; every
  PATCH field accepted by the aggregate's change; text schemas equal to what they validate).

Needs pytest (`pip install cosmos-outbox[testing]`) for the contract suites.
"""

from __future__ import annotations

from dataclasses import dataclass

from cosmos_outbox._blueprints.outbox import OutboxDependencies
from cosmos_outbox._outbox import QUARANTINE_TOKEN_PURPOSE, Services
from cosmos_outbox._relay import Relay
from cosmos_outbox._relay.telemetry import RelayTelemetry
from cosmos_outbox.http._paging import TokenCodec, derive_key
from cosmos_outbox.settings import (
    DEFAULT_EVENT_TTL_SECONDS,
    DEFAULT_IDEMPOTENCY_TTL_SECONDS,
    DEFAULT_PAYLOAD_MAX_BYTES,
)
from cosmos_outbox.testing._fakes import (
    FakePublisher,
    FixedBacklog,
    InMemoryEventStore,
    InMemoryPayloadStore,
    InMemoryQuarantine,
    InMemoryStore,
    InMemoryUnitOfWork,
    SizeLimitedBatch,
    uow_factory,
)
from cosmos_outbox.testing._functions import FunctionClient, InvocationContext

__all__ = [
    "TEST_SECRET",
    "FakePublisher",
    "FixedBacklog",
    "FunctionClient",
    "InMemory",
    "InMemoryEventStore",
    "InMemoryPayloadStore",
    "InMemoryQuarantine",
    "InMemoryStore",
    "InMemoryUnitOfWork",
    "InvocationContext",
    "SizeLimitedBatch",
    "in_memory",
    "uow_factory",
]

#: What the in-memory services seal paging tokens with (tests only).
TEST_SECRET = "cosmos-outbox-tests"  # noqa: S105


@dataclass
class InMemory:
    """In-memory services and the fakes behind them, for a test to arrange and inspect."""

    store: InMemoryStore
    publisher: FakePublisher
    quarantine: InMemoryQuarantine
    backlog: FixedBacklog
    services: Services
    #: the claim check's payload store (bodies too large for the publisher's batches)
    payloads: InMemoryPayloadStore


def in_memory(*, event_ttl_seconds: int = DEFAULT_EVENT_TTL_SECONDS,
              idempotency_ttl_seconds: int = DEFAULT_IDEMPOTENCY_TTL_SECONDS,
              max_batch_bytes: int = 4096, topic: str = "test-events",
              max_payload_bytes: int = DEFAULT_PAYLOAD_MAX_BYTES) -> InMemory:
    """Services on fakes: pass `lambda: world.services` as an `Outbox`'s services. An event
    too large for `max_batch_bytes` is offloaded to `payloads` (the claim check), or
    quarantined when its body is above `max_payload_bytes` (0: no claim check). The store's
    time can be moved on (`store.elapse(seconds)`) to let TTLs run out."""
    store = InMemoryStore()
    publisher = FakePublisher(max_batch_bytes=max_batch_bytes)
    quarantine = InMemoryQuarantine(store)
    backlog = FixedBacklog()
    payloads = InMemoryPayloadStore()
    telemetry = RelayTelemetry(destination=topic)
    services = Services(
        unit_of_work=uow_factory(store, event_ttl_seconds=event_ttl_seconds,
                                 idempotency_ttl_seconds=idempotency_ttl_seconds),
        outbox=OutboxDependencies(
            relay_factory=lambda: Relay(publisher, quarantine, telemetry, payloads=payloads,
                                        max_payload_bytes=max_payload_bytes),
            quarantine=lambda: quarantine,
            events=lambda: InMemoryEventStore(store),
            backlog=lambda: backlog,
            tokens=TokenCodec(derive_key(TEST_SECRET, purpose=QUARANTINE_TOKEN_PURPOSE)),
            telemetry=telemetry,
            event_ttl_seconds=event_ttl_seconds,
        ),
        token_secret=TEST_SECRET,
    )
    return InMemory(store=store, publisher=publisher, quarantine=quarantine, backlog=backlog,
                    services=services, payloads=payloads)
