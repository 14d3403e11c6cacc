"""Scheduled events, piece by piece, on the test kit (the whole of it is held to
`ScheduledEventsContract`: write_path/test_contracts.py on the fakes,
scheduled/test_on_funcstack.py on funcstack):
what `publish` and `record` refuse, how a scheduled event is numbered and kept, what `cancel`
refuses and how it meets a release at the commit, the relay's part (a release scheduled, a
quarantine without a schedule queue, a long delay in steps, the lag counted from the due time),
the release's (early, gone), the stored form and the message read back, the subscriber's order,
the blueprint's function and the kit's clock."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from tickets import Ticket, TicketClosed, TicketRetitled

from cosmos_outbox import Outbox, Services
from cosmos_outbox._mapper import (
    EVENT_TYPE,
    aggregate_event_document,
    outbox_record,
    read_feed,
    release_body,
    to_message,
)
from cosmos_outbox._quarantine import QUARANTINE_TYPE, Quarantine
from cosmos_outbox._records import PoisonEventError, Release
from cosmos_outbox._relay.forwarding import Relay
from cosmos_outbox._relay.scheduled import HORIZON, ReleaseOutcome, Releases
from cosmos_outbox._sync_over_async import as_async, run_sync
from cosmos_outbox._write.streams import SEQUENCE_TYPE
from cosmos_outbox.errors import NotFoundError, TooLateToCancelError
from cosmos_outbox.servicebus import application_properties
from cosmos_outbox.settings import SettingsError, TriggerSettings
from cosmos_outbox.subscriber import (
    IncomingEvent,
    Outcome,
    Projection,
    UnreadableEventError,
    from_message,
)
from cosmos_outbox.subscriber._projector import AsyncProjector
from cosmos_outbox.telemetry import RelayTelemetry
from cosmos_outbox_testing import (
    FakePublisher,
    FunctionClient,
    InMemory,
    InMemoryScheduleQueue,
    InMemoryStore,
    in_memory,
    service_bus_message,
)

TELEMETRY = RelayTelemetry(destination="test-events")
LATER = timedelta(minutes=15)


@pytest.fixture
def memory() -> Any:
    outbox = Outbox([Ticket])
    with in_memory(outbox) as world:
        yield world, outbox


def events_in(world: InMemory, partition: str) -> dict[str, dict[str, Any]]:
    return {d["action"]: d for d in world.store.in_partition(partition) if d["type"] == EVENT_TYPE}


#: The event documents (and etags) relayed already, per store.
_RELAYED: dict[int, set[tuple[str, str]]] = {}


def relay(world: InMemory, outbox: Outbox) -> Any:
    """What was written since the last call, relayed as the change-feed trigger hands it over
    (each document at its latest version): the report."""
    seen = _RELAYED.setdefault(id(world.store), set())
    changed = [d for d in world.of_type(EVENT_TYPE) if (d["id"], d["_etag"]) not in seen]
    seen |= {(d["id"], d["_etag"]) for d in changed}
    return run_sync(outbox.wiring().relay().relay(read_feed(changed)))


# -- publish and record ------------------------------------------------------------------------


def test_a_naive_due_time_is_refused_at_publish_and_nothing_is_staged(memory: Any) -> None:
    world, outbox = memory
    with outbox.transaction("c-1", entity="customer") as tx:
        with pytest.raises(ValueError, match="naive"):
            tx.publish("HoldExpired", {}, deliver_at=datetime.now() + LATER)
        with pytest.raises(ValueError, match="not both"):
            tx.publish("HoldExpired", {}, deliver_at=datetime.now(UTC), deliver_after=LATER)
        with pytest.raises(TypeError, match="timedelta"):
            tx.publish("HoldExpired", {}, deliver_after=900)
        assert tx.commit().events == ()  # nothing was staged
    assert world.store.in_partition("c-1") == []


def test_a_due_time_beyond_what_its_document_can_be_kept_for_is_refused_naming_the_limit(
    memory: Any,
) -> None:
    _, outbox = memory
    with outbox.transaction("c-1", entity="customer") as tx:
        with pytest.raises(ValueError, match="2147483647 s"):
            tx.publish("Reminder", {}, deliver_after=timedelta(days=365 * 70))
        tx.publish("Reminder", {}, deliver_after=timedelta(days=365 * 60))  # within it


def test_a_scheduled_event_takes_no_number_and_its_document_outlives_its_due_time(
    memory: Any,
) -> None:
    world, outbox = memory
    with outbox.transaction("c-1", entity="customer") as tx:
        tx.publish("Held", {})
        tx.publish("HoldExpired", {}, deliver_after=LATER)
        tx.publish("Extended", {})
        tx.commit()
    stored = events_in(world, "c-1")
    assert [stored[a]["version"] for a in ("Held", "HoldExpired", "Extended")] == [1, 0, 2]
    ttl = world.services.event_ttl_seconds
    assert stored["HoldExpired"]["ttl"] == ttl + LATER.total_seconds()
    assert stored["Held"]["ttl"] == ttl
    [sequence] = [d for d in world.store.in_partition("c-1") if d["type"] == SEQUENCE_TYPE]
    assert sequence["next"] == 3
    with outbox.transaction("c-2", entity="customer") as tx:  # only scheduled: no sequence
        tx.publish("Reminder", {}, deliver_after=LATER)
        tx.commit()
    assert [d["type"] for d in world.store.in_partition("c-2")] == [EVENT_TYPE]


def test_an_aggregate_records_a_scheduled_event_without_moving_its_version() -> None:
    ticket = Ticket.open("Printer on fire")
    with pytest.raises(ValueError, match="is new"):
        Ticket(title="t").record(TicketClosed, deliver_after=LATER)
    reminder = ticket.record(TicketClosed, deliver_after=LATER)
    ticket.retitle("Printer still on fire")
    opened, scheduled, retitled = ticket.collect_events()
    assert (opened.version, scheduled.version, retitled.version, ticket.version) == (1, 0, 2, 2)
    assert scheduled is reminder and reminder.deliver_at is not None
    assert reminder.deliver_at - reminder.created_at == LATER
    with pytest.raises(ValueError, match="naive"):
        ticket.record(TicketClosed, deliver_at=datetime.now())


# -- cancel ------------------------------------------------------------------------------------


def _scheduled(outbox: Outbox, partition: str = "c-1", **due: Any) -> str:
    with outbox.transaction(partition, entity="customer") as tx:
        event = tx.publish("HoldExpired", {}, **(due or {"deliver_after": LATER}))
        tx.publish("Held", {})
        tx.commit()
    return event


def test_cancel_refuses_what_it_cannot_cancel_and_does_nothing_twice(memory: Any) -> None:
    world, outbox = memory
    expiry = _scheduled(outbox)
    held = events_in(world, "c-1")["Held"]["id"]
    with outbox.transaction("c-1", entity="customer") as tx:
        with pytest.raises(NotFoundError):
            tx.cancel("no-such-event")
        with pytest.raises(NotFoundError):  # another partition's
            outbox.transaction("c-2", entity="customer").cancel(expiry)
        with pytest.raises(ValueError, match="not scheduled"):
            tx.cancel(held)
        assert tx.cancel(expiry) is True
        assert tx.cancel(expiry) is True  # staged once
        tx.commit()
    assert events_in(world, "c-1")["HoldExpired"]["cancelledAt"]
    with outbox.transaction("c-1", entity="customer") as tx:
        # cancelled already: nothing to do, and the app is told (issue 66)
        assert tx.cancel(expiry) is False
        assert tx.commit().events == ()


def test_a_release_between_the_cancel_and_its_commit_makes_it_too_late_and_writes_nothing(
    memory: Any,
) -> None:
    world, outbox = memory
    expiry = _scheduled(outbox, deliver_at=datetime.now(UTC))
    with outbox.transaction("c-1", entity="customer") as tx:
        tx.create({"id": "payment", "type": "payment"})
        tx.cancel(expiry)  # read: not released yet
        assert world.release_due() == [] and relay(world, outbox).scheduled == 1
        assert world.release_due() == [expiry]  # the release commits first
        with pytest.raises(TooLateToCancelError, match="too late to cancel"):
            tx.commit()
    assert world.store.read("c-1", "payment") is None
    assert "cancelledAt" not in events_in(world, "c-1")["HoldExpired"]


def test_a_cancel_that_another_cancel_beat_commits_the_rest(memory: Any) -> None:
    world, outbox = memory
    expiry = _scheduled(outbox)
    first = outbox.transaction("c-1", entity="customer")
    second = outbox.transaction("c-1", entity="customer")
    first.cancel(expiry)
    second.cancel(expiry)
    second.create({"id": "payment", "type": "payment"})
    first.commit()
    second.commit()  # its cancel is dropped: the event is cancelled already
    assert world.store.read("c-1", "payment") is not None


def test_an_aggregate_cancels_its_scheduled_event_with_a_change(memory: Any) -> None:
    world, outbox = memory
    service = outbox.service(Ticket)
    ticket = Ticket.open("Printer on fire")
    reminder = ticket.record(TicketRetitled, deliver_after=LATER)
    service.create(ticket)

    def close(t: Ticket) -> None:
        t.close()
        t.cancel_scheduled(reminder.id)

    service.change(ticket.id, close)
    stored = events_in(world, ticket.id)
    assert stored["TicketRetitledEvent"]["cancelledAt"] and stored["TicketClosedEvent"]
    # a change that only cancels writes too; a release first makes it too late
    later = Ticket.open("Another")
    second = later.record(TicketRetitled, deliver_at=datetime.now(UTC))
    service.create(later)
    relay(world, outbox)
    world.release_due()
    with pytest.raises(TooLateToCancelError):
        service.change(later.id, lambda t: t.cancel_scheduled(second.id))


# -- the relay and the releases ---------------------------------------------------------------


def test_the_relay_schedules_a_release_sends_a_released_event_and_skips_a_cancelled_one(
    memory: Any,
) -> None:
    world, outbox = memory
    expiry = _scheduled(outbox)
    report = relay(world, outbox)
    [release] = world.schedule.scheduled
    assert (release.partition_key, release.event_id) == ("c-1", expiry)
    assert release.at == datetime.fromisoformat(events_in(world, "c-1")["HoldExpired"]["deliverAt"])
    assert (report.sent, report.scheduled) == (1, 1)  # Held sent, the expiry not
    world.clock.advance(LATER)
    assert relay(world, outbox).sent == 1
    sent = world.publisher.messages[-1]
    assert sent.message_id == expiry and "version" not in sent.application_properties
    assert sent.application_properties["deliverAt"] == release.at.isoformat()
    cancelled = _scheduled(outbox, "c-2")
    with outbox.transaction("c-2", entity="customer") as tx:
        tx.cancel(cancelled)
        tx.commit()
    assert relay(world, outbox).cancelled == 1
    assert cancelled not in {r.event_id for r in world.schedule.scheduled}


def test_without_a_schedule_queue_a_scheduled_event_is_quarantined_naming_the_setting() -> None:
    store = InMemoryStore()
    outbox = Outbox(
        services=lambda: Services(store=store, publisher=FakePublisher, token_secret="t")
    )
    expiry = _scheduled(outbox)
    report = relay_of(outbox, store)
    assert report.quarantined == [expiry]
    assert "SERVICEBUS_SCHEDULE_QUEUE" in report.reasons[expiry]
    [record] = store.of_type(QUARANTINE_TYPE)
    assert record["eventId"] == expiry


def relay_of(outbox: Outbox, store: InMemoryStore) -> Any:
    return run_sync(outbox.wiring().relay().relay(read_feed(store.of_type(EVENT_TYPE))))


def test_a_delay_longer_than_a_day_is_released_in_steps_never_early(memory: Any) -> None:
    world, outbox = memory
    _scheduled(outbox, deliver_after=timedelta(days=2, hours=12))
    relay(world, outbox)
    first = world.schedule.scheduled[0].at
    assert first - world.clock.now() <= HORIZON
    world.clock.advance(timedelta(days=1, minutes=1))
    assert [s for *_, s in world.scheduled()] == ["waiting"]  # a step: scheduled again
    world.clock.advance(timedelta(days=1))
    assert [s for *_, s in world.scheduled()] == ["waiting"]
    world.clock.advance(timedelta(hours=12))
    assert [s for *_, s in world.scheduled()] == ["released"]
    assert len(world.schedule.scheduled) == 3


def test_a_release_that_comes_early_is_scheduled_again_and_one_of_a_gone_event_does_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store, queue = InMemoryStore(), InMemoryScheduleQueue()
    outbox = Outbox(
        services=lambda: Services(store=store, publisher=FakePublisher, token_secret="t")
    )
    expiry = _scheduled(outbox)
    releases = Releases(as_async(store), as_async(queue), event_ttl_seconds=60)
    early = Release("c-1", expiry, datetime.now(UTC))  # the broker's clock ahead of ours
    assert run_sync(releases.release(early)) is ReleaseOutcome.NOT_YET
    [again] = queue.scheduled
    assert again.event_id == expiry and again.at > early.at
    with caplog.at_level(logging.WARNING, "cosmos_outbox.relay"):
        assert run_sync(releases.release(Release("c-1", "gone", early.at))) is ReleaseOutcome.GONE
    assert "nothing to release" in caplog.text


def test_a_released_events_lag_counts_from_its_due_time() -> None:
    ticket = Ticket.open("t")
    due = datetime.now(UTC) - timedelta(seconds=1)
    event = ticket.record(TicketClosed, deliver_at=due)
    document = aggregate_event_document(event, source="/tickets", ttl_seconds=60)
    document |= {"createdAt": "2020-01-01T00:00:00+00:00", "releasedAt": "2020-01-01T00:00:00Z"}
    relayed = Relay(FakePublisher(), Quarantine(InMemoryStore()), TELEMETRY)
    report = run_sync(relayed.relay(read_feed([document])))
    ended = datetime.now(UTC)
    # from its due time, not from its creation (years before): between the second it was
    # overdue and the relay's end (a millisecond either way: the times' precision)
    assert report.sent == 1 and report.max_lag_ms is not None
    assert 999 <= report.max_lag_ms <= (ended - due).total_seconds() * 1000 + 1


# -- the stored form and the message -----------------------------------------------------------


def _stored(**changes: Any) -> dict[str, Any]:
    ticket = Ticket.open("t")
    event = ticket.record(TicketClosed, deliver_after=LATER)
    return aggregate_event_document(event, source="/tickets", ttl_seconds=60) | changes


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"version": 2}, "version must be 0"),
        ({"deliverAt": "tomorrow"}, "deliverAt must be an ISO 8601 time"),
        ({"deliverAt": "2026-11-26T10:00:00"}, "deliverAt must be an ISO 8601 time"),
        ({"releasedAt": 5}, "releasedAt must be an ISO 8601 time"),
    ],
)
def test_a_stored_scheduled_event_that_is_wrong_is_set_aside_naming_why(
    changes: dict[str, Any], reason: str
) -> None:
    with pytest.raises(PoisonEventError, match=reason):
        outbox_record(_stored(**changes))


def test_the_subscriber_reads_a_scheduled_events_message_back() -> None:
    message = to_message(outbox_record(_stored(releasedAt="2026-11-26T10:00:00+00:00")))
    read = from_message(
        message.body,
        content_type=message.content_type,
        application_properties=application_properties(message),
    )
    assert read.scheduled and read.version == 0
    assert read.envelope_and_data()["deliverAt"] == message.application_properties["deliverAt"]
    assert Ticket.parse_event(read.envelope_and_data()).deliver_at == read.deliver_at
    for broken in ({"deliverAt": "soon"}, {"version": 3}):
        properties = {**application_properties(message), **broken}
        with pytest.raises(UnreadableEventError, match="deliverAt"):
            from_message(message.body, content_type=None, application_properties=properties)


class _Counted(Projection):
    def handles(self, action: str) -> bool:
        return action != "Ignored"

    def apply(self, projection: Any, event: IncomingEvent) -> dict[str, Any]:
        return {
            "id": event.aggregate_id,
            "partitionKey": event.aggregate_id,
            "version": event.version,
            "seen": [*(projection or {}).get("seen", []), event.type],
        }


def _event(kind: str, version: int, *, scheduled: bool = False) -> IncomingEvent:
    return IncomingEvent(
        event_id=f"{kind}-{version}",
        aggregate_id="a-1",
        type=kind,
        version=version,
        data={},
        aggregate_type="thing",
        deliver_at=datetime.now(UTC) if scheduled else None,
    )


def test_the_subscriber_applies_a_scheduled_event_as_it_comes_and_keeps_the_version() -> None:
    store = InMemoryStore()
    projector = AsyncProjector(store, _Counted(), inbox_ttl_seconds=60)

    def handle(event: IncomingEvent) -> Outcome:
        return run_sync(projector.handle(event)).outcome

    assert handle(_event("Reminder", 0, scheduled=True)) is Outcome.APPLIED  # before version 1
    assert store.read("a-1", "a-1")["version"] == 0  # type: ignore[index]
    assert handle(_event("Opened", 1)) is Outcome.APPLIED
    assert handle(_event("Moved", 3)) is Outcome.HELD  # version 2 missing
    assert handle(_event("Ignored", 0, scheduled=True)) is Outcome.IGNORED
    assert handle(_event("Reminder", 0, scheduled=True)) is Outcome.DUPLICATE
    assert handle(_event("Moved", 2)) is Outcome.APPLIED  # releases 3: nothing held behind it
    projection = store.read("a-1", "a-1")
    assert projection is not None
    assert (projection["version"], projection["seen"]) == (
        3,
        ["Reminder", "Opened", "Moved", "Moved"],
    )


# -- the blueprint, the settings, the kit ------------------------------------------------------


def test_the_relay_blueprint_registers_the_releases_only_with_a_schedule_queue(
    memory: Any,
) -> None:
    world, outbox = memory
    without = outbox.relay_blueprint()
    assert "release_due_events" not in {f.get_function_name() for f in _functions(without)}
    triggers = TriggerSettings.model_validate({"SERVICEBUS_SCHEDULE_QUEUE": "outbox-releases"})
    assert TriggerSettings.model_validate({"SERVICEBUS_SCHEDULE_QUEUE": " "}).schedule_queue is None
    from cosmos_outbox._blueprints.relay_functions import relay_blueprint

    blueprint = relay_blueprint(outbox.wiring, asynchronous=False, triggers=triggers)
    [function] = [f for f in _functions(blueprint) if f.get_function_name() == "release_due_events"]
    [binding] = json.loads(function.get_function_json())["bindings"]
    assert (binding["type"], binding["queueName"], binding["connection"]) == (
        "serviceBusTrigger",
        "%SERVICEBUS_SCHEDULE_QUEUE%",
        "ServiceBusConnection",
    )
    import azure.functions as func

    app = func.FunctionApp()
    app.register_functions(blueprint)
    expiry = _scheduled(outbox, deliver_at=datetime.now(UTC))
    with FunctionClient(app) as client:
        release = Release("c-1", expiry, datetime.now(UTC))
        client.invoke("release_due_events", service_bus_message(release_body(release)))
    assert [s for *_, s in world.scheduled()] == ["released"]


def _functions(blueprint: Any) -> list[Any]:
    import azure.functions as func

    app = func.FunctionApp()
    app.register_functions(blueprint)
    return list(app.get_functions())


def test_a_schedule_queue_without_a_service_bus_connection_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from cosmos_outbox.services import schedule_from_settings
    from cosmos_outbox.settings import OutboxSettings

    monkeypatch.setenv("CosmosDBConnection", "AccountEndpoint=https://x/;AccountKey=eA==;")
    monkeypatch.setenv("COSMOS_CONTAINER", "outbox")
    monkeypatch.setenv("SERVICEBUS_SCHEDULE_QUEUE", "outbox-releases")
    with pytest.raises(SettingsError, match="SERVICEBUS_SCHEDULE_QUEUE is set"):
        schedule_from_settings(OutboxSettings())
    monkeypatch.setenv("SERVICEBUS_SCHEDULE_QUEUE", "")
    assert schedule_from_settings(OutboxSettings()) is None


def test_the_kits_clock_releases_what_comes_due_and_the_kit_says_where_each_event_is(
    memory: Any,
) -> None:
    world, outbox = memory
    kept = _scheduled(outbox)
    dropped = _scheduled(outbox, "c-2")
    with outbox.transaction("c-2", entity="customer") as tx:
        tx.cancel(dropped)
        tx.commit()
    relay(world, outbox)
    assert [(e.event_id, e.state) for e in world.scheduled()] == [
        (kept, "waiting"),
        (dropped, "cancelled"),
    ] or [(e.event_id, e.state) for e in world.scheduled()] == [
        (dropped, "cancelled"),
        (kept, "waiting"),
    ]
    assert {e.event_id for e in world.events()} == {
        kept,
        *(events_in(world, p)["Held"]["id"] for p in ("c-1", "c-2")),
    }  # a cancelled event is not one a subscriber will read
    world.clock.advance(LATER - timedelta(seconds=1))
    assert world.scheduled("c-1")[0].state == "waiting"
    world.clock.advance(timedelta(seconds=1))
    assert world.scheduled("c-1")[0].state == "released"
