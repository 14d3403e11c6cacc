"""A per-event option (a subject, application properties, a scheduled delivery time...) travels
from where an app gives it to the message on the topic, through one file per step
(docs/changing-the-event.md): each step missed fails a test here, by name.

- `Transaction.publish` takes it and the sync shell takes it too (`_write/sync.py`): the sync and
  async APIs take the same parameters;
- the mapper writes it into the event document (`event_document`) and reads it back into the
  outbox record and the message (`outbox_record`, `to_message`): every parameter of
  `event_document` has a sample here, and where it shows on the message;
- an aggregate's events (`Event`'s envelope, `_domain.py`) keep it out of the body
  (`ENVELOPE_FIELDS` is `Event`'s own fields);
- the Service Bus adapter puts it on the wire (`servicebus/_messages.py`:
  tests/test_wire_bytes.py pins the bytes of what was there before).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest

from cosmos_outbox._domain import Event
from cosmos_outbox._mapper import ENVELOPE_FIELDS, event_document, outbox_record, to_message
from cosmos_outbox._records import OutboxMessage
from cosmos_outbox._write import service, sync, transaction, unit_of_work

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
#: How a sample reads on the message when it is not the value given (JSON text read back).
READ_AS = {"properties": {"channel": "web"}}


def test_every_option_of_the_event_document_reaches_the_message() -> None:
    options = list(inspect.signature(event_document).parameters)
    missing = [name for name in options if name not in SAMPLES]
    assert missing == [], (
        f"event_document takes {missing}: give each a sample in SAMPLES and say where the "
        "message shows it (docs/changing-the-event.md)"
    )
    message = to_message(outbox_record(event_document(**{k: v for k, (v, _) in SAMPLES.items()})))
    for name, (value, shown) in SAMPLES.items():
        if shown is not None:
            assert shown(message) == READ_AS.get(name, value), name


def test_every_option_publish_takes_is_written_into_the_event_document() -> None:
    """`publish`'s options are `event_document`'s, by name (the transaction hands them on)."""
    published = inspect.signature(transaction.Transaction.publish).parameters
    options = [n for n, p in published.items() if p.kind is inspect.Parameter.KEYWORD_ONLY]
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


def test_an_aggregate_events_envelope_stays_out_of_its_body() -> None:
    """`Event`'s own fields are its envelope (the message's properties), never its data."""
    assert set(Event.model_fields) == ENVELOPE_FIELDS
