"""The test kit: what an app's tests need to test it without Azure, and to prove that what they
test holds on Azure too.

- `in_memory(outbox)`: the outbox's services on in-memory fakes (a store with atomic batches,
  etags and TTLs, a size-limited publisher, the claim check's payload store, a backlog, the
  schedule queue), for the block of a `with`: `with in_memory(outbox) as world: ...`; `world` is
  there to arrange and inspect (`world.events()`: what was committed, as a subscriber will read
  it; `world.scheduled()`: the scheduled events, their due times, released or cancelled) and to
  move time on (`world.clock.advance(timedelta(minutes=15))`: what is due is released);
- `FunctionClient`: calls an app's indexed functions in-process as the Functions host would
  (routes matched as the host matches them, the invocation context, `async def` functions on an
  event loop of its own, the relay's documents);
- `event_fields(document)`: what a stored event document says (its envelope, and `data`: what
  the app published), whatever format it was stored in;
- trigger inputs for the functions of an app's own (`service_bus_message`, `queue_message`,
  `timer_request`), and a relayed message as a subscriber receives it (`delivered`: one of
  `FakePublisher.messages`, ready for a `Dispatcher`; `dispatch_all`);
- checks driven by an app's aggregates and routes (`check_event_mappings`, `check_commands`,
  `check_fields`, `check_openapi_events`, `check_text_schemas`): a mapping left out fails by name;
- `cosmos_outbox_testing.contracts`: the contract suites to subclass, for the fakes and for the
  Azure adapters or your own.

On cosmos-outbox's public names only (the repository's tests/repository/test_distributions.py
holds it).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from cosmos_outbox import Outbox, clock
from cosmos_outbox import aio as outbox_aio
from cosmos_outbox.aggregates import EVENTS
from cosmos_outbox.bridge import as_async, run_sync
from cosmos_outbox.documents import EVENT_TYPE, EventFields, event_fields, read_feed
from cosmos_outbox.ports import DeadLetterEntity, OutboxMessage
from cosmos_outbox.relay import ReleaseOutcome
from cosmos_outbox.services import Services, leaves
from cosmos_outbox.settings import (
    DEFAULT_EVENT_TTL_SECONDS,
    DEFAULT_IDEMPOTENCY_TTL_SECONDS,
    DEFAULT_PAYLOAD_MAX_BYTES,
)
from cosmos_outbox.subscriber import IncomingEvent
from cosmos_outbox_testing._checks import (
    check_commands,
    check_event_mappings,
    check_fields,
    check_openapi_events,
    check_text_schemas,
)
from cosmos_outbox_testing._committed import (
    ScheduledEvent,
    changed_since,
    committed_events,
    scheduled_events,
)
from cosmos_outbox_testing._dead_letters import InMemoryDeadLetters
from cosmos_outbox_testing._delivery import delivered, dispatch_all
from cosmos_outbox_testing._fakes import (
    FakePublisher,
    FixedBacklog,
    InMemoryBacklogEstimator,
    InMemoryPayloadStore,
    InMemoryScheduleQueue,
    InMemoryStore,
    SizeLimitedBatch,
)
from cosmos_outbox_testing._functions import FunctionClient, InvocationContext
from cosmos_outbox_testing._kit_clock import KitClock
from cosmos_outbox_testing._target_rules import FakeTargetRules
from cosmos_outbox_testing._triggers import queue_message, service_bus_message, timer_request

__all__ = [
    "EVENTS",
    "EventFields",
    "FakePublisher",
    "FakeTargetRules",
    "FixedBacklog",
    "FunctionClient",
    "InMemory",
    "InMemoryBacklogEstimator",
    "InMemoryDeadLetters",
    "InMemoryPayloadStore",
    "InMemoryScheduleQueue",
    "InMemoryStore",
    "InvocationContext",
    "KitClock",
    "ScheduledEvent",
    "SizeLimitedBatch",
    "as_async",
    "check_commands",
    "check_event_mappings",
    "check_fields",
    "check_openapi_events",
    "check_text_schemas",
    "delivered",
    "dispatch_all",
    "event_fields",
    "in_memory",
    "queue_message",
    "run_sync",
    "service_bus_message",
    "timer_request",
]

#: What the in-memory services seal paging tokens with (tests only).
TEST_SECRET = "cosmos-outbox-tests"  # noqa: S105


@dataclass
class InMemory:
    """In-memory services and the fakes behind them, for a test to arrange and inspect. Used as
    `with in_memory(outbox) as world:`, the outbox runs on them inside the block."""

    store: InMemoryStore
    publisher: FakePublisher
    backlog: FixedBacklog
    #: the claim check's payload store (bodies too large for the publisher's batches)
    payloads: InMemoryPayloadStore
    services: Services
    #: the dead-letter queues of the watched subscriptions (`subscriptions=`): a test
    #: dead-letters what the publisher sent there (`dead_letter_message`)
    dead_letters: InMemoryDeadLetters = field(default_factory=InMemoryDeadLetters)
    outbox: Outbox | outbox_aio.Outbox | None = None
    #: the schedule queue: the releases the relay scheduled, each with its time
    schedule: InMemoryScheduleQueue = field(default_factory=InMemoryScheduleQueue)
    #: the topic's subscriptions and their targeted-delivery rules (the operators' status
    #: reads them): `target_rules.lacking("plain")` to see a subscription named
    target_rules: FakeTargetRules = field(default_factory=FakeTargetRules)
    #: the outbox's time inside the block: `clock.advance(...)` moves it on, and what comes due
    #: meanwhile is released (`release_due`); the store's TTLs run by it
    clock: KitClock = field(default_factory=KitClock)
    _stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack, repr=False)
    #: the documents (and versions) `relay` handed over already
    _relayed: set[Any] = field(default_factory=set, repr=False)

    def __post_init__(self) -> None:
        self.clock.on_advance(self._moved)

    def __enter__(self) -> InMemory:
        self._stack.enter_context(clock.using(self.clock.now))
        if self.outbox is not None:
            self._stack.enter_context(self.outbox.override(self.services))
        return self

    def _moved(self, step: timedelta) -> None:
        self.store.elapse(step.total_seconds())
        self.release_due()

    def release_due(self) -> list[str]:
        """Hand back the releases whose time has come by the kit's clock (as the schedule queue
        does), each run as the relay's `release_due_events` runs it; the ids of the events
        released (sent by the relay's next run). `clock.advance` calls it."""
        releases = self._wiring().releases()
        done = []
        while due := self.schedule.due(self.clock.now()):
            for release in due:
                if run_sync(releases.release(release)) is ReleaseOutcome.RELEASED:
                    done.append(release.event_id)
        return done

    def _wiring(self) -> Any:
        """What the outbox built from its services (its relay, its releases): `outbox`'s, else
        an outbox's on these services."""
        outbox = self.outbox if self.outbox is not None else Outbox(services=lambda: self.services)
        return outbox.wiring()

    def scheduled(self, partition_key: str | None = None) -> list[ScheduledEvent]:
        """The scheduled events committed (of one partition, when given), soonest due first."""
        return scheduled_events(self.store.of_type(EVENT_TYPE, partition_key=partition_key))

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def of_type(self, type_: str) -> list[dict[str, Any]]:
        """The stored documents of a type (`domainEvent`, `quarantinedEvent`, ...)."""
        return self.store.of_type(type_)

    def relay(self) -> list[OutboxMessage]:
        """Relay what was written since the last call, as the change-feed trigger hands it to
        the relay (the outbox's own relay: `outbox`'s, else one on these services); the
        messages it sent (`FakePublisher.messages`' new ones: notices included), each ready for
        a subscriber's `Dispatcher` (`delivered`, `dispatch_all`). A scheduled event is not
        sent: its release is scheduled (`schedule`), and it is sent by the `relay()` after the
        kit's clock came to its due time (`clock.advance`); one due already is released and sent
        now, as the relay and its `release_due_events` would."""
        wiring = self._wiring()
        before = len(self.publisher.messages)
        while True:
            with self.store._lock:
                changed = changed_since(self._relayed, self.store._all())
            run_sync(wiring.relay().relay(read_feed(changed, legacy=wiring.legacy)))
            if not self.release_due():  # a scheduled event due already: released, relayed
                return self.publisher.messages[before:]

    def events(self, partition_key: str | None = None) -> list[IncomingEvent]:
        """The events committed so far (of one partition, when given), each as a subscriber
        reads its message (`cosmos_outbox.subscriber.IncomingEvent`: its `type`, `version`,
        `aggregate_id`, `data` -- what the app published -- ...), per session in the order of
        its sequence. Whether they were relayed yet does not matter: they are what the relay
        will send."""
        return committed_events(self.store, partition_key)


def _leaves_on(fakes: Mapping[str, object]) -> dict[str, Any]:
    """The services' leaf adapters (`cosmos_outbox.services.leaves()`, each declared once in
    the core) on the kit's fakes, by name: a leaf the kit has no fake for fails here, naming it
    (an adapter added to the core needs its fake here, and nowhere else in the kit)."""
    missing = [leaf for leaf in leaves() if leaf not in fakes]
    if missing:
        raise LookupError(f"the test kit has no fake for the services' {', '.join(missing)}")
    return {leaf: (lambda fake=fakes[leaf]: fake) for leaf in leaves()}


def in_memory(
    outbox: Outbox | outbox_aio.Outbox | None = None,
    *,
    event_ttl_seconds: int = DEFAULT_EVENT_TTL_SECONDS,
    idempotency_ttl_seconds: int = DEFAULT_IDEMPOTENCY_TTL_SECONDS,
    max_batch_bytes: int = 4096,
    topic: str = "test-events",
    max_payload_bytes: int = DEFAULT_PAYLOAD_MAX_BYTES,
    subscriptions: Mapping[str, InMemoryStore | None] | None = None,
    queues: tuple[str, ...] = (),
) -> InMemory:
    """Services on fakes (`world.services`), which `outbox` runs on inside `with in_memory(
    outbox) as world:`. An event too large for `max_batch_bytes` is offloaded to `payloads`
    (the claim check), or quarantined when its body is above `max_payload_bytes` (0: no claim
    check). The store's time can be moved on (`store.elapse(seconds)`) to let TTLs run out, as
    the kit's clock moves it (`world.clock.advance`).
    `subscriptions`: the watched subscriptions (OUTBOX_SUBSCRIPTIONS), each with the store of
    its subscriber's projections when the test has one; `queues`: watched queues; their
    dead-letter queues are `world.dead_letters`."""
    store = InMemoryStore()
    watched = dict(subscriptions or {})
    projections = {name: s for name, s in watched.items() if s is not None}
    fakes: dict[str, Any] = {
        "publisher": FakePublisher(max_batch_bytes=max_batch_bytes),
        "payloads": InMemoryPayloadStore(),
        "backlog": FixedBacklog(),
        "schedule": InMemoryScheduleQueue(),
        "dead_letters": InMemoryDeadLetters(),
        # the watched subscriptions, each carrying the targeted-delivery rule
        "target_rules": FakeTargetRules(topic, dict.fromkeys(watched, ())),
    }
    services = Services(
        store=store,
        **_leaves_on(fakes),
        token_secret=TEST_SECRET,
        topic=topic,
        event_ttl_seconds=event_ttl_seconds,
        idempotency_ttl_seconds=idempotency_ttl_seconds,
        max_payload_bytes=max_payload_bytes,
        watched=tuple(DeadLetterEntity(name) for name in watched)
        + tuple(DeadLetterEntity(name, "queue") for name in queues),
        subscriber_stores=lambda: projections,
    )
    return InMemory(store=store, services=services, outbox=outbox, **fakes)
