"""A per-event option (a subject, application properties, a scheduled delivery time...) travels
from where an app gives it to the message on the topic, through one file per step
(docs/changing-the-event.md): each step missed fails a test here, by name.

- `Transaction.publish` takes it (the sync API's is the same method, `_write/sync.py`: held
  here);
- the mapper writes it into the event document (`event_document`) and reads it back into the
  outbox record and the message (`outbox_record`, `to_message`): every parameter of
  `event_document` has a sample here, and where it shows on the message;
- an aggregate's events carry it in their envelope (a field of `Event`, `_domain.py`), written
  into their document (`aggregate_event_document`);
- the Service Bus adapter puts it on the wire (`servicebus/_messages.py`;
  tests/relay/test_wire_bytes.py pins the bytes of what was there before: an event without the
  option is sent as before).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any

import pytest
from tickets import Ticket, TicketClosed

from cosmos_outbox._domain import Event
from cosmos_outbox._mapper import (
    aggregate_event_document,
    event_document,
    outbox_record,
    to_message,
)
from cosmos_outbox._mapper import cloudevents as _cloudevents
from cosmos_outbox._records import OutboxMessage
from cosmos_outbox._write import service, sync, transaction, unit_of_work
from cosmos_outbox.servicebus import _messages

#: Each parameter of `event_document`: a value, and what the message shows of it (None: the
#: document's own, not on the message: its place in the container). A new option without a
#: sample here fails `test_every_option_of_the_event_document_reaches_the_message`, naming it.
SAMPLES: dict[str, tuple[Any, Callable[[OutboxMessage], Any] | None]] = {
    "event_id": ("e-1", lambda m: m.message_id),
    "partition_key": ("p-1", None),
    "aggregate_type": ("booking", lambda m: m.aggregate_type),
    "aggregate_id": ("s-1", lambda m: m.session_id),
    "source": ("/bookings", lambda m: m.source),
    "action": ("BookingHeld", lambda m: m.application_properties["action"]),
    "body": ('{"seats":2}', lambda m: m.body.decode()),
    "ttl": (60, None),
    "version": (3, lambda m: m.version),
    "created_at": (
        "2026-11-26T10:00:00+00:00",
        lambda m: m.created_at.isoformat() if m.created_at else None,
    ),
    "traceparent": (
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        lambda m: m.application_properties["traceparent"],
    ),
    "subject": ("b-1", lambda m: m.subject),
    "properties": ('{"channel":"web"}', lambda m: {"channel": m.application_properties["channel"]}),
}
#: The options that make a scheduled event: written with `version` 0 (it takes no place in its
#: stream's order; its message has no version), a sample each and where the message shows it.
SCHEDULED: dict[str, tuple[Any, Callable[[OutboxMessage], Any]]] = {
    "deliver_at": (
        "2026-11-26T10:15:00+00:00",
        lambda m: m.application_properties["deliverAt"],
    ),
}
#: How a sample reads on the message when it is not the value given (JSON text read back).
READ_AS = {"properties": {"channel": "web"}}
#: An option `publish` takes that it writes as another (`deliver_after`: from now, as the due
#: time `deliver_at`).
WRITTEN_AS = {"deliver_after": "deliver_at"}


def test_every_option_of_the_event_document_reaches_the_message() -> None:
    options = list(inspect.signature(event_document).parameters)
    missing = [name for name in options if name not in SAMPLES and name not in SCHEDULED]
    assert missing == [], (
        f"event_document takes {missing}: give each a sample in SAMPLES and say where the "
        "message shows it (docs/changing-the-event.md)"
    )
    samples = {k: v for k, (v, _) in SAMPLES.items()}
    message = to_message(outbox_record(event_document(**samples)))
    for name, (value, shown) in SAMPLES.items():
        if shown is not None:
            assert shown(message) == READ_AS.get(name, value), name
    scheduled = to_message(
        outbox_record(
            event_document(**{**samples, "version": 0}, **{k: v for k, (v, _) in SCHEDULED.items()})
        )
    )
    for name, (value, shown) in SCHEDULED.items():
        assert shown(scheduled) == value, name
    assert "version" not in scheduled.application_properties  # no place in the order


def test_every_option_publish_takes_is_written_into_the_event_document() -> None:
    """`publish`'s options are `event_document`'s, by name (the transaction hands them on)."""
    published = inspect.signature(transaction.Transaction.publish).parameters
    options = [
        WRITTEN_AS.get(n, n)
        for n, p in published.items()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    ]
    assert set(options) <= set(inspect.signature(event_document).parameters), options


@pytest.mark.parametrize(
    ("shell", "core"),
    [
        (sync.Transaction, transaction.Transaction),
        (sync.UnitOfWork, unit_of_work.UnitOfWork),
        (sync.AggregateService, service.AggregateService),
    ],
    ids=lambda c: c.__qualname__,
)
def test_the_sync_api_takes_what_the_async_api_takes(shell: type, core: type) -> None:
    """Each public method of the async API is the sync shell's too, with the same parameters
    (an option added to the one and not the other fails here)."""
    for name, method in inspect.getmembers(core, inspect.isfunction):
        if name.startswith("_") or name == "ping":
            continue
        assert hasattr(shell, name), f"{shell.__qualname__} has no {name}"
        expected = list(inspect.signature(method).parameters.items())
        found = list(inspect.signature(getattr(shell, name)).parameters.items())
        assert [(n, p.kind) for n, p in found] == [(n, p.kind) for n, p in expected], name


#: The message's fields the Service Bus adapter does not read itself: they travel in the
#: application properties the mapper made (`to_message`).
IN_THE_PROPERTIES = {"version", "aggregate_type"}


def test_every_field_of_the_message_is_put_on_the_wire_by_the_service_bus_adapter() -> None:
    """Each field of `OutboxMessage` is read by the adapter's mapping (`servicebus/_messages.py`
    and `_cloudevents.py`): a field added and not sent fails here, naming it."""
    source = inspect.getsource(_messages) + inspect.getsource(_cloudevents)
    unread = [
        f.name
        for f in dataclasses.fields(OutboxMessage)
        if f.name not in IN_THE_PROPERTIES and f"message.{f.name}" not in source
    ]
    assert unread == []


#: Each field of an aggregate's event's envelope (`Event`'s own fields), and the option of the
#: event document it is written as (`aggregate_event_document`).
ENVELOPE = {
    "id": "event_id",
    "aggregate_id": "aggregate_id",
    "version": "version",
    "created_at": "created_at",
    "traceparent": "traceparent",
    "action": "action",
    "deliver_at": "deliver_at",
}
#: Every option's sample and where the message shows it.
_SHOWN = {**SAMPLES, **SCHEDULED}


def test_every_envelope_field_of_an_aggregate_event_reaches_the_message() -> None:
    """An option of an aggregate's events (a field of `Event`, its envelope) is written into
    the event document and reaches the message; a field without its option here fails,
    naming it."""
    missing = sorted(set(Event.model_fields) - set(ENVELOPE))
    assert missing == [], f"give Event's {missing} their event document option in ENVELOPE"
    every = {field: _SHOWN[option][0] for field, option in ENVELOPE.items() if field != "action"}
    immediate = {k: v for k, v in every.items() if ENVELOPE[k] not in SCHEDULED}
    for given in (immediate, {**every, "version": 0}):  # a scheduled event takes version 0
        event = TicketClosed.model_validate(given)
        message = to_message(
            outbox_record(aggregate_event_document(event, source=Ticket.source(), ttl_seconds=60))
        )
        for field, option in ENVELOPE.items():
            if field not in given and field != "action":
                continue
            shown = _SHOWN[option][1]
            assert shown is not None
            expected = event.action if field == "action" else READ_AS.get(option, given[field])
            assert shown(message) == expected, field
