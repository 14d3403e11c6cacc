"""The event catalogue is derived from the event classes, and every event class maps to the
stored document, the broker message (with its CloudEvents attributes) and the OpenAPI document;
every field of the contact a client sets is settable on create and through PATCH and travels in
an event. A class, field or mapping left out fails here by name."""

from __future__ import annotations

import json
import types
import typing
from datetime import UTC, datetime
from typing import Any, ClassVar, Literal

import jsonschema_rs
import pytest
from cloudevents.core.bindings.amqp import from_binary
from cloudevents.core.formats.json import JSONFormat
from pydantic import BaseModel, ConfigDict

from application.contacts.commands import CreateContact, PatchContact
from application.outbox.records import OutboxRecord, to_message
from domain.aggregate import EVENTS, Aggregate, DomainEvent, UnknownEventError, event_aliases
from domain.contact import Contact
from infra.cosmos.documents import event_document, read_feed
from infra.servicebus.publisher import to_servicebus_message
from tests.openapi import openapi_document
from tests.tickets import Ticket
from tests.unit.test_wire_format import as_amqp

#: The aggregates whose events these tests map: the app's, and the tests' second one.
AGGREGATES: tuple[type[Aggregate], ...] = (Contact, Ticket)
ENVELOPE = {"id", "aggregate_id", "version", "created_at", "traceparent", "action"}


def example(annotation: Any) -> Any:
    """A valid value of a field type (the first branch of a union that is not None)."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return example(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return example(next(a for a in typing.get_args(annotation) if a is not type(None)))
    if origin is Literal:
        return typing.get_args(annotation)[0]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation.model_validate(
            {name: example(f.annotation) for name, f in annotation.model_fields.items()})
    return {str: "Ada", int: 2, bool: True,
            datetime: datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)}[annotation]


def instance(kind: type[DomainEvent]) -> DomainEvent:
    fields = {name: example(f.annotation) for name, f in kind.model_fields.items()
              if name not in ENVELOPE}
    return kind.model_validate({"aggregate_id": "agg-1", "version": 2, **fields})


EVENT_CLASSES = sorted(((a, e) for a in AGGREGATES for e in a.event_classes()),
                       key=lambda pair: (pair[0].aggregate_type, pair[1].action_name()))
IDS = [e.action_name() for _, e in EVENT_CLASSES]


def test_the_catalogue_holds_every_concrete_event_class_by_its_aggregate_and_action() -> None:
    for aggregate in AGGREGATES:
        subclasses = {c for c in _subclasses(DomainEvent)
                      if getattr(c, "aggregate_type", None) == aggregate.aggregate_type
                      and "action" in c.model_fields}
        assert aggregate.event_classes() == subclasses
    assert {"ContactCreatedEvent", "ContactDeletedEvent"} <= EVENTS.actions("contact")
    with pytest.raises(UnknownEventError):
        EVENTS.resolve("contact", "NoSuchEvent")


def test_two_classes_cannot_share_an_action_and_an_event_needs_an_aggregate() -> None:
    class LocalEvent(DomainEvent):
        model_config = ConfigDict(alias_generator=event_aliases("contact"))
        aggregate_type: ClassVar[str] = "contact"

    with pytest.raises(TypeError, match="both have the contact action"):
        type("Impostor", (LocalEvent,), {
            "__annotations__": {"action": Literal["ContactCreatedEvent"]},
            "action": "ContactCreatedEvent", "__module__": __name__})
    with pytest.raises(TypeError, match="bound to no aggregate type"):
        type("Orphan", (DomainEvent,), {
            "__annotations__": {"action": Literal["OrphanEvent"]}, "action": "OrphanEvent",
            "__module__": __name__})


@pytest.mark.parametrize(("aggregate", "kind"), EVENT_CLASSES, ids=IDS)
def test_every_event_maps_to_the_document_and_back(
    aggregate: type[Aggregate], kind: type[DomainEvent],
) -> None:
    event = instance(kind)
    document = json.loads(json.dumps(
        event_document(event, source=aggregate.source(), ttl_seconds=60)))
    assert (document["aggregateType"], document["partitionKey"]) == (
        aggregate.aggregate_type, "agg-1")
    [record] = read_feed([document])
    assert isinstance(record, OutboxRecord)
    assert EVENTS.parse(record.aggregate_type, json.loads(record.body)) == event


@pytest.mark.parametrize(("aggregate", "kind"), EVENT_CLASSES, ids=IDS)
def test_every_event_maps_to_a_message_and_a_cloudevent(
    aggregate: type[Aggregate], kind: type[DomainEvent],
) -> None:
    event = instance(kind)
    [record] = read_feed([event_document(event, source=aggregate.source(), ttl_seconds=60)])
    assert isinstance(record, OutboxRecord)
    message = to_message(record)
    assert (message.subject, message.session_id, message.message_id) == (
        kind.action_name(), "agg-1", event.id)
    assert message.application_properties["aggregateType"] == aggregate.aggregate_type
    assert message.application_properties[f"{aggregate.aggregate_type}Id"] == "agg-1"
    cloudevent = from_binary(as_amqp(to_servicebus_message(message)), JSONFormat())
    assert (cloudevent.get_type(), cloudevent.get_source(), cloudevent.get_subject()) == (
        kind.action_name(), f"/{aggregate.collection}", "agg-1")
    data = cloudevent.get_data()
    assert isinstance(data, dict)
    assert EVENTS.parse(aggregate.aggregate_type, data) == event


APP_EVENTS = sorted(Contact.event_classes(), key=lambda k: k.action_name())


@pytest.mark.parametrize("kind", APP_EVENTS, ids=[k.action_name() for k in APP_EVENTS])
def test_every_event_of_the_app_is_in_the_openapi_document(kind: type[DomainEvent]) -> None:
    document = openapi_document()
    action = kind.action_name()
    [entry] = [e for e in document["x-events"] if e["action"] == action]
    assert (entry["aggregateType"], entry["subject"], entry["source"]) == (
        "contact", action, "/contacts")
    schema = {**document["components"]["schemas"][action],
              "components": document["components"]}
    payload = json.loads(instance(kind).model_dump_json(by_alias=True))
    jsonschema_rs.validate(schema, payload)


def test_the_openapi_document_lists_no_event_the_app_does_not_emit() -> None:
    listed = {e["action"] for e in openapi_document()["x-events"]}
    assert listed == {k.action_name() for k in Contact.event_classes()}


# ---- the contact's fields: settable, patchable, carried by events ----------------------------

#: The contact's own bookkeeping: not set by a client.
KEPT_BY_THE_CONTACT = {"id", "version", "created_at", "modified_at", "deleted", "deleted_at"}
SETTABLE = set(Contact.model_fields) - KEPT_BY_THE_CONTACT


def test_every_field_a_client_sets_can_be_given_on_create() -> None:
    create = CreateContact.model_validate({
        "firstName": "Ada", "lastName": "L", "email": "ada@example.com", "companyName": "E"})
    assert set(create.fields()) == SETTABLE


def test_every_field_a_client_sets_can_be_changed_through_patch() -> None:
    assert set(PatchContact.model_fields) == SETTABLE


def test_every_field_a_client_sets_travels_in_the_created_event_and_one_change_event() -> None:
    created = EVENTS.resolve("contact", "ContactCreatedEvent")
    assert set(created.model_fields) - ENVELOPE >= SETTABLE
    changes = [set(k.model_fields) - ENVELOPE for k in Contact.event_classes()
               if k is not created]
    for field in SETTABLE:
        assert [c for c in changes if c == {field}], f"no event carries a change of {field}"


def _subclasses(cls: type[DomainEvent]) -> set[type[DomainEvent]]:
    found = set()
    for sub in cls.__subclasses__():
        if sub.__module__ != __name__:
            found.add(sub)
        found |= _subclasses(sub)
    return found
