"""The scheduled events' suite: what an app and its subscribers are promised about an event
published with a due time (`Transaction.publish(..., deliver_at=...)` or `deliver_after=`), over
a world with the outbox's store, the relay running as it runs on Azure (the change-feed trigger
and the releases from the schedule queue), the topic, and the library's subscriber (`Projector`):

- it arrives no earlier than its due time, and once;
- a cancel committed before its due time means the library's subscriber never applies it (no
  message of it reaches the topic at all) -- whether the relay had read the event or not, and
  with the relay killed between scheduling its release and the cancel, its due time passing
  while no relay runs;
- a cancel after its release is refused (`TooLateToCancelError`), nothing of the transaction
  written;
- a due time in the past is delivered at once;
- an event published after it, in the same transaction or later, is applied without waiting for
  it (it takes no place in its aggregate's order), and it is applied when it comes, the
  projection keeping its version.

A world schedules `delay` ahead: minutes on the test kit's clock (moved on, not waited for), a
second or two on a real broker (waited for). `cosmos_outbox._relay.scheduled` says how it works."""

from __future__ import annotations

import abc
import contextlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pytest

from cosmos_outbox import clock
from cosmos_outbox.bridge import as_async, run_sync
from cosmos_outbox.documents import EVENT_TYPE, read_feed
from cosmos_outbox.errors import TooLateToCancelError
from cosmos_outbox.ports import OutboxMessage, Release
from cosmos_outbox.relay import Quarantine, Relay, Releases
from cosmos_outbox.subscriber import IncomingEvent, Outcome, Projection
from cosmos_outbox.subscriber.aio import Projector as AsyncProjector
from cosmos_outbox.telemetry import RelayTelemetry
from cosmos_outbox_testing._committed import changed_since, incoming, scheduled_events
from cosmos_outbox_testing._fakes import FakePublisher, InMemoryScheduleQueue, InMemoryStore
from cosmos_outbox_testing._kit_clock import KitClock
from cosmos_outbox_testing.contracts._worlds import InMemoryStoreWorld, StoreWorld, Suite, unique

__all__ = [
    "Delivery",
    "InMemoryScheduleWorld",
    "ScheduleWorld",
    "ScheduledEventsContract",
]


@dataclass(frozen=True)
class Delivery:
    """A message that reached the topic, as the library's subscriber reads it, and when it
    arrived there (the world's time: a broker's enqueued time)."""

    event: IncomingEvent
    message_id: str
    at: datetime


class ScheduleWorld(abc.ABC):
    """What the scheduled events' suite needs: the outbox's store (`store`, whose transactions
    the suite commits: sync, or async on an event loop), the relay over it as it runs on Azure
    (`run_relay`), a way to kill it (`kill_relay`), what reached the topic (`delivered`), and
    time (`now`, `wait`). Entered for a test (`with world:`)."""

    store: StoreWorld
    #: how far ahead the suite schedules
    delay: timedelta

    def __enter__(self) -> ScheduleWorld:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill_relay()

    @abc.abstractmethod
    def now(self) -> datetime:
        """The world's time (UTC)."""

    @abc.abstractmethod
    def run_relay(self, until: datetime) -> None:
        """The relay runs until `until` (once at least, when that is past): the change-feed
        trigger relays what was written since its last run (each document at its latest
        version, as the change feed hands it over), and each release the schedule queue hands
        back is run (`release_due_events`), the change feed relaying what it wrote. A relay
        killed before starts anew."""

    @abc.abstractmethod
    def kill_relay(self) -> None:
        """The relay stops: its clients closed, whatever it held in memory gone."""

    @abc.abstractmethod
    def wait(self, until: datetime) -> None:
        """Time passes until `until`, no relay running (what comes due waits for one)."""

    @abc.abstractmethod
    def delivered(self, sessions: Iterable[str]) -> list[Delivery]:
        """The messages of `sessions` that reached the topic since the last call, in the order
        they arrived (a broker's: read until none more comes for a moment)."""


class _Applied(Projection):
    """The library's subscriber's projection in the suite: it handles every action and keeps
    the ids of the events it applied, in order."""

    def handles(self, action: str) -> bool:
        return True

    def apply(self, projection: Mapping[str, Any] | None, event: IncomingEvent) -> dict[str, Any]:
        applied = list(projection["applied"]) if projection is not None else []
        return {
            "id": event.aggregate_id,
            "partitionKey": event.aggregate_id,
            "version": event.version,
            "applied": [*applied, event.event_id],
        }


class Subscriber:
    """The library's subscriber (`AsyncProjector`) over a projection store of its own: what each
    delivery did, and what the projection holds."""

    def __init__(self) -> None:
        self.store = InMemoryStore()
        self._projector = AsyncProjector(self.store, _Applied(), inbox_ttl_seconds=3600)

    def take(self, deliveries: Iterable[Delivery]) -> list[Outcome]:
        return [run_sync(self._projector.handle(d.event)).outcome for d in deliveries]

    def projection(self, session: str) -> dict[str, Any]:
        found = self.store.read(session, session)
        assert found is not None, f"nothing of {session} was applied"
        return found


class ScheduledEventsContract(Suite[ScheduleWorld]):
    """A `world` (`ScheduleWorld`): the outbox's store, relay, schedule queue and topic."""

    @pytest.fixture
    def entered(self, world: ScheduleWorld) -> Iterator[ScheduleWorld]:
        with world:
            yield world

    def test_a_scheduled_event_arrives_no_earlier_than_its_due_time_and_once(
        self, entered: ScheduleWorld
    ) -> None:
        world, session = entered, unique("reservation")
        with world.store.transaction(session, entity="reservation") as tx:
            tx.create({"id": "r", "type": "reservation", "status": "held"})
            expiry = tx.publish("ReservationExpired", {}, deliver_after=world.delay)
            tx.commit()
        due = _due(world, session)
        world.run_relay(until=due + world.delay / 2)
        [delivery] = world.delivered([session])
        assert delivery.message_id == expiry
        assert delivery.at >= due, f"arrived at {delivery.at}, due at {due}"  # not before
        assert delivery.event.scheduled and delivery.event.deliver_at == due
        world.run_relay(until=world.now() + world.delay / 2)
        assert world.delivered([session]) == []  # once

    def test_a_cancel_committed_before_its_due_time_means_it_is_never_applied(
        self, entered: ScheduleWorld
    ) -> None:
        world, session, subscriber = entered, unique("reservation"), Subscriber()
        with world.store.transaction(session, entity="reservation") as tx:
            tx.publish("ReservationHeld", {})
            expiry = tx.publish("ReservationExpired", {}, deliver_after=world.delay)
            tx.commit()
        world.run_relay(until=world.now() + world.delay / 3)  # its release is scheduled
        with world.store.transaction(session, entity="reservation") as tx:
            tx.cancel(expiry)
            tx.publish("ReservationPaid", {})
            tx.commit()
        due = _due(world, session)
        world.run_relay(until=due + world.delay / 2)
        delivered = world.delivered([session])
        assert [d.event.type for d in delivered] == ["ReservationHeld", "ReservationPaid"]
        assert subscriber.take(delivered) == [Outcome.APPLIED, Outcome.APPLIED]
        assert expiry not in subscriber.projection(session)["applied"]
        assert [e.state for e in scheduled_events(world.store.documents(session))] == ["cancelled"]

    def test_a_cancel_before_the_relay_read_the_event_schedules_nothing(
        self, entered: ScheduleWorld
    ) -> None:
        """The change feed hands the relay the event's latest version only: the cancelled one."""
        world, session = entered, unique("reservation")
        with world.store.transaction(session, entity="reservation") as tx:
            expiry = tx.publish("ReservationExpired", {}, deliver_after=world.delay)
            tx.commit()
        with world.store.transaction(session, entity="reservation") as tx:
            tx.cancel(expiry)
            tx.commit()
        due = _due(world, session)
        world.run_relay(until=due + world.delay / 2)
        assert world.delivered([session]) == []

    def test_a_cancel_holds_with_the_relay_killed_between_schedule_and_cancel(
        self, entered: ScheduleWorld
    ) -> None:
        """The release was scheduled, then the relay killed; the cancel commits, and the due time
        passes with no relay running (the release waits on the queue); the relay started anew
        finds the event cancelled. Never sent, never applied."""
        world, session, subscriber = entered, unique("reservation"), Subscriber()
        with world.store.transaction(session, entity="reservation") as tx:
            expiry = tx.publish("ReservationExpired", {}, deliver_after=world.delay)
            held = tx.publish("ReservationHeld", {})
            tx.commit()
        world.run_relay(until=world.now() + world.delay / 3)
        world.kill_relay()
        with world.store.transaction(session, entity="reservation") as tx:
            tx.cancel(expiry)
            tx.commit()
        due = _due(world, session)
        world.wait(until=due + world.delay / 3)  # due, and no relay running
        world.run_relay(until=world.now() + world.delay / 2)
        delivered = world.delivered([session])
        assert [d.message_id for d in delivered] == [held]
        assert subscriber.take(delivered) == [Outcome.APPLIED]

    def test_a_cancel_after_the_release_is_too_late_and_writes_nothing(
        self, entered: ScheduleWorld
    ) -> None:
        world, session = entered, unique("reservation")
        with world.store.transaction(session, entity="reservation") as tx:
            expiry = tx.publish("ReservationExpired", {}, deliver_at=world.now() - world.delay)
            tx.commit()
        world.run_relay(until=world.now() + world.delay / 2)
        [delivery] = world.delivered([session])  # due in the past: delivered at once
        assert delivery.message_id == expiry
        with (
            pytest.raises(TooLateToCancelError),
            world.store.transaction(session, entity="reservation") as tx,
        ):
            tx.create({"id": "payment", "type": "payment"})
            tx.cancel(expiry)
            tx.commit()
        assert "payment" not in {d["id"] for d in world.store.documents(session)}
        assert [e.state for e in scheduled_events(world.store.documents(session))] == ["released"]

    def test_an_event_after_a_scheduled_one_is_not_held_behind_it(
        self, entered: ScheduleWorld
    ) -> None:
        """A reminder due later never holds the events after it at the subscriber: they are
        applied as they come, in their order; the reminder is applied when it comes, the
        projection keeping its version."""
        world, session, subscriber = entered, unique("reservation"), Subscriber()
        with world.store.transaction(session, entity="reservation") as tx:
            held = tx.publish("ReservationHeld", {})
            reminder = tx.publish("PaymentReminder", {}, deliver_after=world.delay)
            extended = tx.publish("ReservationExtended", {})
            tx.commit()
        with world.store.transaction(session, entity="reservation") as tx:
            paid = tx.publish("ReservationPaid", {})
            tx.commit()
        world.run_relay(until=world.now() + world.delay / 3)
        delivered = world.delivered([session])
        assert [d.message_id for d in delivered] == [held, extended, paid]
        assert [d.event.version for d in delivered] == [1, 2, 3]
        assert subscriber.take(delivered) == [Outcome.APPLIED] * 3  # none held
        due = _due(world, session)
        world.run_relay(until=due + world.delay / 2)
        [late] = world.delivered([session])
        assert (late.message_id, late.event.version) == (reminder, 0)
        assert subscriber.take([late]) == [Outcome.APPLIED]
        projection = subscriber.projection(session)
        assert projection["applied"] == [held, extended, paid, reminder]
        assert projection["version"] == 3  # the reminder took no place in the order
        assert subscriber.take([late]) == [Outcome.DUPLICATE]  # a redelivery: once


def _due(world: ScheduleWorld, session: str) -> datetime:
    """When the one scheduled event stored in `session` is due."""
    [event] = scheduled_events(world.store.documents(session))
    return event.deliver_at


# -- the test kit's world ------------------------------------------------------------------------


class RelayingWorld(ScheduleWorld):
    """A world whose relay is the outbox's own (`Relay` and `Releases`, over the world's store)
    on a publisher and a schedule queue of the world's: what is left to a world is where its
    event documents are read (`documents`), its adapters, and how releases come back and time
    passes."""

    def __init__(self) -> None:
        self._seen: set[tuple[str, str, object]] = set()
        self._relay: Relay | None = None
        self._releases: Releases | None = None

    @abc.abstractmethod
    def documents(self) -> list[dict[str, Any]]:
        """The event documents stored now (each at its latest version, with its `_etag`)."""

    @abc.abstractmethod
    def adapters(self) -> tuple[Any, Any]:
        """A new publisher and schedule queue (sync, or async ones for an async store)."""

    def relay(self) -> Relay:
        if self._relay is None:
            publisher, schedule = self.adapters()
            self._relay = Relay(
                publisher,
                Quarantine(self.store.async_store),
                RelayTelemetry(destination="scheduled-events"),
                schedule=schedule,
            )
            self._releases = Releases(
                self.store.async_store,
                as_async(schedule),
                event_ttl_seconds=self.store.event_ttl_seconds,
            )
        return self._relay

    def release(self, release: Release) -> None:
        self.relay()
        assert self._releases is not None
        self.store.run(self._releases.release(release))

    def relay_changes(self) -> None:
        """What was written since the last run, as the change-feed trigger hands it over."""
        changed = changed_since(self._seen, self.documents())
        if changed:
            self.store.run(self.relay().relay(read_feed(changed)))

    def kill_relay(self) -> None:
        self._relay = self._releases = None


class InMemoryScheduleWorld(RelayingWorld):
    """The test kit's fakes: the in-memory store (`store`: sync, or an async world of it), the
    fake publisher and schedule queue, and the kit's clock, moved on rather than waited for."""

    delay = timedelta(minutes=15)

    def __init__(self, store: InMemoryStoreWorld | None = None) -> None:
        super().__init__()
        self.store = store if store is not None else InMemoryStoreWorld()
        self.memory = self.store.memory
        self.clock = KitClock()
        self.publisher = FakePublisher()
        self.queue = InMemoryScheduleQueue()
        self._arrived: list[tuple[OutboxMessage, datetime]] = []
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> InMemoryScheduleWorld:
        self._stack.enter_context(clock.using(self.clock.now))
        return self

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)
        self._stack.close()

    def now(self) -> datetime:
        return self.clock.now()

    def documents(self) -> list[dict[str, Any]]:
        return self.memory.of_type(EVENT_TYPE)

    def adapters(self) -> tuple[Any, Any]:
        return self.publisher, self.queue

    def relay_changes(self) -> None:
        before = len(self.publisher.messages)
        super().relay_changes()
        now = self.now()
        self._arrived += [(m, now) for m in self.publisher.messages[before:]]

    def run_relay(self, until: datetime) -> None:
        self.relay_changes()
        while (at := self.queue.next_at()) is not None and at <= until:
            self.clock.to(at)
            for release in self.queue.due(self.now()):
                self.release(release)
            self.relay_changes()
        self.clock.to(until)

    def wait(self, until: datetime) -> None:
        self.clock.to(until)

    def delivered(self, sessions: Iterable[str]) -> list[Delivery]:
        wanted = set(sessions)
        taken = [(m, at) for m, at in self._arrived if m.session_id in wanted]
        self._arrived = [(m, at) for m, at in self._arrived if m.session_id not in wanted]
        return [Delivery(incoming(m), m.message_id, at) for m, at in taken]
