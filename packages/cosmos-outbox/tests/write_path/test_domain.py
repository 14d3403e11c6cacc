"""The domain core: an aggregate's type and collection come from its class name; its events are
bound to it by its `event` decorator (the action is the class name unless named) and register
themselves by aggregate type and action; `record` gives each event the next version and the
aggregate's values; events are handed over once; `live` hides a soft-deleted one."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import ClassVar

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tickets import Ticket, TicketClosed, TicketOpened, TicketRetitled

from cosmos_outbox._domain import (
    AGGREGATES,
    EVENTS,
    UnknownEventError,
    new_id,
    utc_text,
)
from cosmos_outbox.aggregates import Aggregate, Event


def test_the_catalogue_holds_every_bound_event_class_by_its_aggregate_and_action() -> None:
    assert {"TicketOpenedEvent", "TicketRetitledEvent", "TicketClosedEvent"} <= EVENTS.actions(
        "ticket"
    )
    assert EVENTS.resolve("ticket", "TicketOpenedEvent") is TicketOpened
    assert {TicketOpened, TicketRetitled, TicketClosed} <= Ticket.event_classes()
    assert AGGREGATES["ticket"] is Ticket
    with pytest.raises(UnknownEventError):
        EVENTS.resolve("ticket", "NoSuchEvent")
    with pytest.raises(UnknownEventError):
        EVENTS.resolve("ticket", 3)


def test_type_collection_and_action_are_derived_from_the_class_names() -> None:
    class ParcelLabel(Aggregate):
        pass

    @ParcelLabel.event
    class ParcelLabelPrinted(Event):
        pass

    assert (ParcelLabel.aggregate_type, ParcelLabel.collection) == ("parcelLabel", "parcelLabels")
    assert ParcelLabel.source() == "/parcelLabels"
    assert ParcelLabelPrinted.action_name() == "ParcelLabelPrinted"
    assert ParcelLabel.event_classes() == {ParcelLabelPrinted}
    assert "parcelLabelId" in ParcelLabelPrinted.model_json_schema(by_alias=True)["properties"]


def test_an_aggregate_may_name_its_type_and_collection() -> None:
    class Person(Aggregate):
        aggregate_type: ClassVar[str] = "human"
        collection: ClassVar[str] = "people"

    assert (Person.aggregate_type, Person.collection, AGGREGATES["human"]) == (
        "human",
        "people",
        Person,
    )


def test_two_classes_cannot_share_an_action_and_an_event_needs_its_aggregate() -> None:
    class Impostor(Event):
        pass

    with pytest.raises(TypeError, match="both have the ticket action"):
        Ticket.event("TicketOpenedEvent")(Impostor)

    class Orphan(Event):
        pass

    with pytest.raises(TypeError, match="not bound to an aggregate"):
        Orphan.action_name()
    with pytest.raises(TypeError, match="bound to ticket already"):
        Ticket.event(TicketOpened)


def test_record_gives_the_next_version_and_takes_the_aggregates_values() -> None:
    ticket = Ticket.open("Printer on fire")
    ticket.retitle("Printer fixed")
    opened, retitled = ticket.events
    assert [opened.version, retitled.version] == [1, 2]
    assert isinstance(opened, TicketOpened) and (opened.title, opened.code) == (
        "Printer on fire",
        "NEW",
    )
    assert isinstance(retitled, TicketRetitled) and retitled.title == "Printer fixed"
    at = datetime(2026, 1, 2, tzinfo=UTC)
    ticket.collect_events()
    ticket.record(TicketRetitled, at=at, title="given, not taken")
    [given] = ticket.collect_events()
    assert isinstance(given, TicketRetitled)
    assert (given.version, given.created_at, given.title) == (3, at, "given, not taken")


def test_events_carry_the_aggregate_id_under_its_own_name_and_are_collected_once() -> None:
    ticket = Ticket.open("Printer on fire")
    ticket.retitle("Printer fixed")
    wire = ticket.events[0].model_dump(mode="json", by_alias=True)
    assert wire["ticketId"] == ticket.id and "aggregateId" not in wire
    assert list(wire)[:6] == ["id", "ticketId", "version", "createdAt", "traceparent", "action"]
    assert [type(e) for e in ticket.collect_events()] == [TicketOpened, TicketRetitled]
    assert ticket.collect_events() == []
    assert ticket.live
    assert Ticket.parse_event(wire) == TicketOpened.model_validate(wire)


def test_new_ids_are_random_version_4_uuids_written_as_uuid_writes_them() -> None:
    ids = [new_id() for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    for made in ids:
        parsed = uuid.UUID(made)
        assert (str(parsed), parsed.version, parsed.variant) == (made, 4, uuid.RFC_4122)
    # every variant digit and every digit elsewhere occurs: the random bits are not stuck
    assert {made[19] for made in ids} == set("89ab")
    assert set("".join(made[:8] for made in ids)) == set("0123456789abcdef")


@given(st.integers(min_value=0, max_value=253_402_300_799 * 10**9))
def test_utc_text_is_what_datetime_isoformat_writes(nanoseconds: int) -> None:
    second, micro = divmod(nanoseconds // 1000, 1_000_000)
    expected = datetime.fromtimestamp(second, UTC).replace(microsecond=micro).isoformat()
    assert utc_text(nanoseconds) == expected
    assert utc_text(second * 10**9) == datetime.fromtimestamp(second, UTC).isoformat()


def test_utc_text_without_an_instant_is_now() -> None:
    before = datetime.now(UTC)
    written = datetime.fromisoformat(utc_text())
    assert before <= written <= datetime.now(UTC)
