"""The relay with a fake publisher that enforces a batch size limit. Stored documents go through
the store's boundary parser (`read_feed`) as in production; documents of another aggregate type
(another app's, on the same container) go through the same relay."""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import TicketWorld
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError
from tickets import Ticket

from cosmos_outbox._domain import Event, new_id
from cosmos_outbox._mapper import (
    QUARANTINE_NOTICE_SUBJECT,
    StoredFields,
    aggregate_event_document,
    document_created_at,
    envelope_and_data,
    notice_id,
    plain_fields,
    read_feed,
)
from cosmos_outbox._quarantine import QUARANTINE_TYPE, Quarantine
from cosmos_outbox._relay.forwarding import Relay, RelayReport
from cosmos_outbox._sync_over_async import run_sync
from cosmos_outbox.telemetry import RelayTelemetry
from cosmos_outbox_testing import FakePublisher, InMemoryScheduleQueue, InMemoryStore

#: The relay's telemetry (the global providers: a no-op unless a test installs an SDK).
TELEMETRY = RelayTelemetry(destination="test-events")

TRACE = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def history(n_changes: int, *, first: str = "Ada") -> list[dict[str, Any]]:
    """The stored events of a ticket opened, then retitled `n_changes` times."""
    ticket = Ticket.open(f"{first}'s printer")
    for i in range(n_changes):
        ticket.retitle(f"change {i}")
    events: list[Event] = ticket.collect_events()
    return [
        aggregate_event_document(
            e.model_copy(update={"traceparent": TRACE}), source=Ticket.source(), ttl_seconds=60
        )
        for e in events
    ]


def with_body(document: dict[str, Any], **changes: Any) -> None:
    """A stored event's body (JSON text in its document) with fields changed."""
    document["body"] = json.dumps(
        {**json.loads(document["body"]), **changes}, separators=(",", ":")
    )


def format_1(document: dict[str, Any]) -> dict[str, Any]:
    """The same event as the format before stored it: its envelope and its data in `data`."""
    kept = {
        k: v
        for k, v in document.items()
        if k not in {"aggregateId", "action", "version", "createdAt", "traceparent", "body"}
    }
    return {**kept, "data": envelope_and_data(document)}


def note_history(n_changes: int) -> list[dict[str, Any]]:
    """The stored events of a note: an aggregate type of another app on the same container,
    as raw documents (the relay reads documents, not classes)."""
    note_id = new_id()
    documents = []
    for version in range(1, n_changes + 2):
        event_id = new_id()
        documents.append(
            {
                "id": event_id,
                "partitionKey": note_id,
                "type": "domainEvent",
                "aggregateType": "note",
                "source": "/notes",
                "ttl": 60,
                "data": {
                    "id": event_id,
                    "noteId": note_id,
                    "version": version,
                    "createdAt": "2026-01-01T00:00:00+00:00",
                    "traceparent": None,
                    "action": "NoteWrittenEvent" if version == 1 else "NoteEditedEvent",
                },
            }
        )
    return documents


class Quarantined:
    """The quarantine records of a store, by id."""

    def __init__(self, store: InMemoryStore) -> None:
        self.store = store

    @property
    def documents(self) -> dict[str, dict[str, Any]]:
        return {d["id"]: d for d in self.store.of_type(QUARANTINE_TYPE)}


class Relaying:
    """The relay as the trigger runs it: stored documents parsed at the boundary, then relayed
    (the sync API's way: over sync fakes, run to its end in this thread)."""

    def __init__(self, publisher: FakePublisher, store: InMemoryStore) -> None:
        self._relay = Relay(publisher, Quarantine(store), TELEMETRY)

    def relay(self, documents: list[dict[str, Any]]) -> RelayReport:
        return run_sync(self._relay.relay(read_feed(documents)))


def relay(
    publisher: FakePublisher | None = None,
) -> tuple[Relaying, FakePublisher, Quarantined]:
    publisher = publisher or FakePublisher()
    store = InMemoryStore()
    return Relaying(publisher, store), publisher, Quarantined(store)


def test_maps_each_event_to_a_message_as_the_topic_expects() -> None:
    r, publisher, _ = relay()
    [doc] = history(0)
    r.relay([doc])
    [message] = publisher.messages
    assert message.message_id == doc["id"]
    assert message.session_id == doc["aggregateId"] == doc["partitionKey"]
    assert message.subject == "TicketOpenedEvent"
    assert message.content_type == "application/json"
    assert message.body == doc["body"].encode()  # the event's own fields, as stored
    assert json.loads(message.body) == {"title": "Ada's printer", "code": "NEW"}
    assert message.application_properties == {
        "aggregateType": "ticket",
        "ticketId": doc["aggregateId"],
        "version": 1,
        "action": "TicketOpenedEvent",
        "traceparent": TRACE,
        "Diagnostic-Id": TRACE,
        "outboxFormat": 2,
    }
    assert (message.aggregate_type, message.source) == ("ticket", "/tickets")


def test_an_event_stored_in_the_format_before_is_relayed_as_it_was() -> None:
    r, publisher, _ = relay()
    [doc] = history(0)
    old = format_1(doc)
    r.relay([old])
    [message] = publisher.messages
    data = old["data"]
    assert (message.message_id, message.session_id) == (data["id"], data["ticketId"])
    assert json.loads(message.body) == data  # the envelope in the body, as before
    assert message.application_properties == {
        "aggregateType": "ticket",
        "ticketId": data["ticketId"],
        "version": 1,
        "action": "TicketOpenedEvent",
        "traceparent": TRACE,
        "Diagnostic-Id": TRACE,
    }


def test_a_body_is_sent_byte_for_byte_even_when_the_host_re_formatted_the_document() -> None:
    """The Azure host hands trigger documents over through Newtonsoft.Json, which re-formats
    date-like strings (Azure/Azure-Functions#1399): the body, kept as JSON text, is not one;
    the time, read by parsing, is written in one form whatever form it came in."""
    [doc] = history(0)
    with_body(doc, due="2019-01-01T00:00:01.0000000Z", at="2019-01-01T10:00:05.120000+02:00")
    doc["createdAt"] = "2026-01-02T03:04:05.120000+00:00"
    re_formatted = {**doc, "createdAt": "2026-01-02T03:04:05.12+00:00"}
    sent = []
    for stored in (doc, re_formatted):
        r, publisher, _ = relay()
        r.relay([stored])
        [message] = publisher.messages
        sent.append(message)
    assert sent[0].body == sent[1].body == doc["body"].encode()
    assert b'"due":"2019-01-01T00:00:01.0000000Z"' in sent[1].body
    assert sent[0].created_at == sent[1].created_at


def test_non_event_documents_are_skipped() -> None:
    r, publisher, _ = relay()
    ticket_doc = {"id": "t", "partitionKey": "t", "type": "ticket", "data": {}}
    quarantined = {"id": "quarantine-x", "partitionKey": "t", "type": "quarantinedEvent"}
    report = r.relay([ticket_doc, quarantined, *history(0)])
    assert report.skipped == 2 and len(publisher.messages) == 1


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda d: d.pop("body"), "no 'body'"),
        (lambda d: d.update(body=17), "no 'body'"),
        (lambda d: d.pop("action"), "action"),
        (lambda d: d.update(version="two"), "version"),
        (lambda d: d.update(version=True), "version"),
        (lambda d: d.update(aggregateId=""), "aggregateId"),
        (lambda d: d.update(id="x" * 129), "event id"),
        (lambda d: d.update(source=""), "source"),
        (lambda d: d.update(properties="{not json"), "properties"),
        # what Service Bus refuses at every send (issue 44): a property's value over 32 KB, and
        # properties under 32 KB each whose header is over 64 KB
        (
            lambda d: d.update(properties=json.dumps({"note": "x" * 40 * 1024})),
            "application property 'note' is 40960 bytes",
        ),
        (
            lambda d: d.update(properties=json.dumps({f"p{i}": "x" * 25 * 1024 for i in range(3)})),
            "header",
        ),
        # the format before: the envelope in `data`
        (lambda d: d.update(format_1(d)) or d.pop("body"), None),
        (lambda d: [d.update(format_1(d)), d.pop("body"), d["data"].pop("action")], "action"),
        (
            lambda d: [d.update(format_1(d)), d.pop("body"), d["data"].update(ticketId="")],
            "data.ticketId",
        ),
        (
            lambda d: [d.update(format_1(d)), d.pop("body"), d.update(aggregateType="order")],
            "data.orderId",
        ),
    ],
)
def test_malformed_events_are_quarantined_with_a_reason_and_the_rest_go_on(
    mutate: Any, reason: str | None
) -> None:
    docs = history(2)
    mutate(docs[1])
    r, publisher, quarantine = relay()
    report = r.relay(docs)
    if reason is None:  # a well-formed event of the format before: relayed
        assert [m.message_id for m in publisher.messages] == [d["id"] for d in docs]
        return
    events = [m for m in publisher.messages if m.subject != QUARANTINE_NOTICE_SUBJECT]
    assert [m.message_id for m in events] == [docs[0]["id"], docs[2]["id"]]
    [notice] = [m for m in publisher.messages if m.subject == QUARANTINE_NOTICE_SUBJECT]
    assert notice.message_id == notice_id(docs[1]["id"])
    assert notice.session_id == docs[0]["partitionKey"]
    assert json.loads(notice.body)["eventId"] == docs[1]["id"]
    assert report.sent == 2 and report.notices == 1
    [kept] = quarantine.documents.values()
    assert reason in kept["reason"]
    assert kept["data"]["id"] == docs[1]["id"]  # the document kept whole
    assert report.quarantined == [docs[1]["id"]]


class _Text(str):
    """A string of a class of its own (the model's verdict on it decides)."""


#: What a stored field may hold: JSON's values, strings about the length limits, and
#: values a model could convert (a float version, a bool, a string of a class of its own).
_STORED = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-2, 3),
    st.floats(allow_nan=False),
    st.text(max_size=3),
    st.text(min_size=126, max_size=130),
    st.builds(_Text, st.text(max_size=3)),
    st.lists(st.integers(), max_size=1),
)


@given(
    event_id=_STORED,
    aggregate_type=_STORED,
    aggregate_id=_STORED,
    action=_STORED,
    version=_STORED,
    source=_STORED,
)
def test_the_cheap_check_of_the_stored_fields_never_disagrees_with_their_model(
    event_id: Any, aggregate_type: Any, aggregate_id: Any, action: Any, version: Any, source: Any
) -> None:
    """The parser checks each event's fields without the model (`plain_fields`), and asks the
    model only when that check fails: what it lets through, the model takes unchanged."""
    plain = plain_fields(event_id, aggregate_type, aggregate_id, action, version, source)
    try:
        model = StoredFields(
            event_id=event_id,
            aggregate_type=aggregate_type,
            aggregate_id=aggregate_id,
            action=action,
            version=version,
            event_source=source,
        )
    except ValidationError:
        assert plain is None
        return
    if plain is not None:
        assert plain == (model.event_id, model.aggregate_id, model.action, model.version)
        assert (aggregate_type, source) == (model.aggregate_type, model.event_source)


def test_an_event_larger_than_a_message_is_quarantined_and_later_events_still_go() -> None:
    docs = history(2) + history(1, first="Other")
    with_body(docs[1], title="x" * 5000)
    r, publisher, quarantine = relay(FakePublisher(max_batch_bytes=4096))
    r.relay(docs)
    assert docs[1]["id"] not in {m.message_id for m in publisher.messages}
    [kept] = quarantine.documents.values()
    assert "larger than" in kept["reason"]
    # Its notice is published in its place: same session, between versions 1 and 3.
    assert [(m.message_id, m.version) for m in publisher.messages] == [
        (docs[0]["id"], 1),
        (notice_id(docs[1]["id"]), 2),
        (docs[2]["id"], 3),
        (docs[3]["id"], 1),
        (docs[4]["id"], 2),
    ]
    notice = publisher.messages[1]
    assert notice.subject == QUARANTINE_NOTICE_SUBJECT
    assert notice.session_id == docs[1]["aggregateId"]
    cid = docs[1]["aggregateId"]
    assert json.loads(notice.body) == {
        "eventId": docs[1]["id"],
        "ticketId": cid,
        "aggregateType": "ticket",
        "aggregateId": cid,
        "action": "TicketRetitledEvent",
        "version": 2,
        "reason": kept["reason"],
    }
    assert notice.application_properties == {
        "aggregateType": "ticket",
        "ticketId": cid,
        "version": 2,
        "action": QUARANTINE_NOTICE_SUBJECT,
        "eventId": docs[1]["id"],
        "outboxFormat": 2,
    }


def test_a_message_too_large_for_the_link_is_tried_once_on_a_fresh_link() -> None:
    docs = history(2)
    with_body(docs[1], title="x" * 5000)
    publisher = FakePublisher(max_batch_bytes=4096)
    publisher.entity_limit = 64 * 1024  # raised since the link opened
    r, _, quarantine = relay(publisher)
    r.relay(docs)
    assert [m.message_id for m in publisher.messages] == [d["id"] for d in docs]
    assert quarantine.documents == {} and publisher.refreshes == 1


def test_a_full_batch_does_not_refresh_the_link() -> None:
    docs = history(29)
    r, publisher, _ = relay(FakePublisher(max_batch_bytes=2048))
    r.relay(docs)
    assert len(publisher.sent) > 1 and publisher.refreshes == 0


def test_the_notice_id_is_derived_from_the_event_id_only() -> None:
    assert notice_id("e-1") == notice_id("e-1") != notice_id("e-2")
    assert len(notice_id("x" * 128)) == 36  # within Service Bus' 128-character MessageId


def test_a_repeated_event_in_one_invocation_is_sent_once() -> None:
    docs = history(1)
    r, publisher, _ = relay()
    r.relay([*docs, docs[0]])
    assert len(publisher.messages) == 2


def test_the_trigger_function_relays_the_documents_it_is_given(world: TicketWorld) -> None:
    world.client.relay(history(2))
    assert [m.version for m in world.memory.publisher.messages] == [1, 2, 3]


def test_another_aggregate_type_is_relayed_with_its_own_id_property_and_session() -> None:
    [doc] = note_history(0)
    r, publisher, _ = relay()
    r.relay([doc])
    [message] = publisher.messages
    data = doc["data"]
    assert message.session_id == data["noteId"] == doc["partitionKey"]
    assert message.subject == "NoteWrittenEvent"
    assert json.loads(message.body) == data
    assert message.application_properties == {
        "aggregateType": "note",
        "noteId": data["noteId"],
        "version": 1,
        "action": "NoteWrittenEvent",
    }
    assert (message.aggregate_type, message.source) == ("note", "/notes")


def test_events_of_two_aggregate_types_in_one_feed_keep_their_own_order() -> None:
    ticket, note = history(2), note_history(2)
    feed = [note[2], ticket[1], note[0], ticket[2], ticket[0], note[1]]
    r, publisher, _ = relay()
    r.relay(feed)
    sessions: dict[str, list[int]] = {}
    for m in publisher.messages:
        sessions.setdefault(m.session_id, []).append(m.version)
    assert sessions == {note[0]["partitionKey"]: [1, 2, 3], ticket[0]["partitionKey"]: [1, 2, 3]}


def test_the_creation_time_of_a_stored_event_is_read_in_either_format() -> None:
    body = {"body": "{}"}
    assert document_created_at({**body, "createdAt": "2024-01-01T00:00:00+00:00"}) == 1704067200.0
    assert document_created_at({**body, "createdAt": "2024-01-01T00:00:00"}) == 1704067200.0
    assert document_created_at({**body, "createdAt": "2024-01-01T00:00:00Z"}) == 1704067200.0
    assert document_created_at({**body, "createdAt": "yesterday"}) is None
    assert document_created_at({"data": {"createdAt": "2024-01-01T00:00:00+00:00"}}) == 1704067200.0
    assert document_created_at({}) is None


def test_the_relay_and_its_batch_builder_talk_through_a_small_interface() -> None:
    """`_Outgoing` (the batch being filled) gets the publisher's port and a `send` callable:
    it names no private member of anything but itself, and the relay names none of its."""
    import ast
    import inspect

    from cosmos_outbox._relay import forwarding as relay

    tree = ast.parse(inspect.getsource(relay))
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}

    def foreign_private(cls: ast.ClassDef) -> list[str]:
        return [
            ast.unparse(node)
            for node in ast.walk(cls)
            if isinstance(node, ast.Attribute)
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
            and not (isinstance(node.value, ast.Name) and node.value.id in {"self", "cls"})
        ]

    assert foreign_private(classes["_Outgoing"]) == []
    assert foreign_private(classes["Relay"]) == []


def test_a_relay_that_cannot_open_a_sender_says_to_what_why_and_how_to_fix_it() -> None:
    """Its preflight, before it first relays: the topic's sender, then the schedule queue's.
    The relay's status and its one log line carry what `check` answers."""

    class NoTopic(FakePublisher):
        def create_batch(self) -> Any:
            raise RuntimeError("no such topic\nsecond line")

    class NoQueue(InMemoryScheduleQueue):
        def check(self) -> None:
            raise LookupError("no such queue")

    topicless = Relay(NoTopic(), Quarantine(InMemoryStore()), TELEMETRY, topic="events")
    assert run_sync(topicless.check()) == (
        "the relay cannot open a sender to its topic 'events': RuntimeError: no such topic\n"
        "second line. Check that the topic exists (the deploy templates and funcstack.json's "
        "UserConfig declare it), that SERVICEBUS_TOPIC names it, and that the app's identity "
        "may send to it (Azure Service Bus Data Sender)"
    )
    queueless = Relay(
        FakePublisher(), Quarantine(InMemoryStore()), TELEMETRY, topic="events", schedule=NoQueue()
    )
    assert run_sync(queueless.check()) == (
        "the relay cannot open a sender to its schedule queue: LookupError: no such queue. "
        "Check that the queue SERVICEBUS_SCHEDULE_QUEUE names exists and that the app's "
        "identity may send to it and receive from it (Azure Service Bus Data Sender and Data "
        "Receiver)"
    )
    assert run_sync(Relay(FakePublisher(), Quarantine(InMemoryStore()), TELEMETRY).check()) is None
