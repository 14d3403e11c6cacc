"""Issue 72 item 3, its Done-when: three subscriptions with different rules (the outbox's own,
`own-rule`; an `aggregateType = 'contact'` filter without the targeted-delivery clause,
`contacts-only`; Azure's `$Default` TrueFilter, `everything`), and every preview and report of
the operators' actions says exactly what each one received -- checked against what it did
receive from funcstack's Service Bus, whose own filter code decides delivery (the core's
evaluator and funcstack's are held equal elsewhere, by a property test; here the whole path is:
the management API's rules read, the messages the actions send, the topic's delivery).

The outbox runs in-process on the test kit's store, with the real Service Bus adapters (the
publisher, the dead-letter queues, the rule check) on the session's stack (fixtures/
funcstack.json's `rules-events` topic): no server of its own."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

pytest.importorskip("funcstack")

from azure.servicebus import ServiceBusClient, ServiceBusReceivedMessage

from cosmos_outbox import Outbox
from cosmos_outbox.documents import EVENT_TYPE, read_feed
from cosmos_outbox.operations import LetterFilter, Operations, Selection
from cosmos_outbox.ports import DeadLetterEntity
from cosmos_outbox.servicebus import (
    ServiceBusDeadLetters,
    ServiceBusPublisher,
    ServiceBusTargetRules,
)
from cosmos_outbox_testing import in_memory, run_sync
from funcstack import LocalStack

pytestmark = pytest.mark.integration

TOPIC = "rules-events"
OWN, CONTACTS, EVERYTHING = "own-rule", "contacts-only", "everything"
SUBSCRIPTIONS = (CONTACTS, EVERYTHING, OWN)


class RulesWorld:
    def __init__(self, connection: str) -> None:
        self.connection = connection
        self.memory = in_memory(topic=TOPIC, subscriptions=dict.fromkeys(SUBSCRIPTIONS))
        services = dataclasses.replace(
            self.memory.services,
            publisher=lambda: ServiceBusPublisher(
                lambda: ServiceBusClient.from_connection_string(connection), TOPIC
            ),
            dead_letters=lambda: ServiceBusDeadLetters.from_connection_string(connection, TOPIC),
            target_rules=lambda: ServiceBusTargetRules(TOPIC, connection_string=connection),
        )
        self.outbox = Outbox(services=lambda: services)
        self.operations: Operations = self.outbox.operations()
        self.client = ServiceBusClient.from_connection_string(connection)

    def publish(self, entity: str, key: str, *actions: str) -> list[str]:
        with self.outbox.transaction(key, entity=entity) as tx:
            for action in actions:
                tx.publish(action, {"at": action})
            return list(tx.commit().events)

    def relay(self) -> None:
        documents = self.memory.store.of_type(EVENT_TYPE)
        run_sync(self.outbox.wiring().relay().relay(read_feed(documents)))

    def received(self, subscription: str) -> list[ServiceBusReceivedMessage]:
        """Every message waiting at `subscription`, taken (completed)."""
        taken: list[ServiceBusReceivedMessage] = []
        with self.client.get_subscription_receiver(TOPIC, subscription) as receiver:
            while batch := receiver.receive_messages(max_message_count=50, max_wait_time=0.5):
                for message in batch:
                    receiver.complete_message(message)
                taken += batch
        return taken

    def counts(self, predicate: Any) -> dict[str, int]:
        """Per subscription, how many of the messages it received match `predicate`."""
        return {name: sum(1 for m in self.received(name) if predicate(m)) for name in SUBSCRIPTIONS}

    def dead_letter(self, subscription: str, event_ids: set[str]) -> None:
        """The messages of `event_ids` at `subscription` dead-lettered there (their handler
        failed); the others taken."""
        with self.client.get_subscription_receiver(TOPIC, subscription) as receiver:
            while batch := receiver.receive_messages(max_message_count=50, max_wait_time=0.5):
                for message in batch:
                    if props(message).get("cloudEvents_id") in event_ids:
                        receiver.dead_letter_message(message, reason="HandlerFailed")
                    else:
                        receiver.complete_message(message)


def props(message: ServiceBusReceivedMessage) -> dict[str, Any]:
    return {
        (k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
        for k, v in (message.application_properties or {}).items()
    }


@pytest.fixture
def world(funcstack_services: LocalStack) -> Iterator[RulesWorld]:
    world = RulesWorld(funcstack_services.servicebus_connection_string)
    try:
        for name in SUBSCRIPTIONS:  # what an earlier test left
            world.received(name)
        yield world
    finally:
        world.client.close()


def receives(answer: list[Any]) -> dict[str, int]:
    return {c.subscription: c.receives for c in answer}


def test_each_preview_and_report_says_what_each_subscription_received(
    world: RulesWorld,
) -> None:
    since = datetime.now(UTC) - timedelta(minutes=1)
    world.publish("contact", f"c-{uuid.uuid4().hex[:6]}", "Created", "Renamed")
    [customer] = world.publish("customer", f"k-{uuid.uuid4().hex[:6]}", "Created")
    world.relay()
    relayed = world.counts(lambda m: True)
    assert relayed == {OWN: 3, CONTACTS: 2, EVERYTHING: 3}

    # a re-drive to the topic: its preview, its report, what arrived
    redrive = world.operations.redrive
    preview = run_sync(redrive.preview(since))
    page = run_sync(redrive.page(since))
    arrived = world.counts(lambda m: props(m).get("outboxRedrive") == page.redrive_id)
    assert receives(preview.subscriptions) == receives(page.subscribers) == arrived
    assert arrived == {OWN: 3, CONTACTS: 2, EVERYTHING: 3}
    assert "contacts-only receives 2" in page.subscribers_will_see

    # targeted at own-rule: the subscriptions lacking the clause receive it too, and say so
    preview = run_sync(redrive.preview(since, subscription=OWN))
    page = run_sync(redrive.page(since, subscription=OWN))
    arrived = world.counts(lambda m: props(m).get("outboxRedrive") == page.redrive_id)
    assert receives(preview.subscriptions) == receives(page.subscribers) == arrived
    assert arrived == {OWN: 3, CONTACTS: 2, EVERYTHING: 3}

    # the journey: contacts-only's rule drops the customer's event
    journey = run_sync(world.operations.journey.of_event(customer))
    sights = {s.subscription: (s.state, s.rules) for s in journey.subscribers}
    assert sights[CONTACTS] == ("not for it", "drops")
    assert sights[OWN][1] == sights[EVERYTHING][1] == "receives"


def test_each_dead_letter_preview_and_report_says_what_each_subscription_received(
    world: RulesWorld,
) -> None:
    [contact] = world.publish("contact", f"c-{uuid.uuid4().hex[:6]}", "Created")
    [customer] = world.publish("customer", f"k-{uuid.uuid4().hex[:6]}", "Created")
    world.relay()
    world.received(CONTACTS)
    world.received(EVERYTHING)
    world.dead_letter(OWN, {contact, customer})
    letters = world.operations.dead_letters
    entity = DeadLetterEntity(OWN, "subscription")
    of_contacts = Selection(filter=LetterFilter(aggregate_type="contact"), every=True)

    preview = run_sync(letters.preview(entity, of_contacts, action="resubmit"))
    report = run_sync(letters.resubmit(entity, of_contacts))
    assert report.done == 1
    arrived = world.counts(lambda m: props(m).get("cloudEvents_id") == contact)
    assert receives(preview.deliveries) == receives(report.deliveries) == arrived
    # targeted at own-rule: contacts-only (no clause) and everything ($Default) receive it too
    assert arrived == {OWN: 1, CONTACTS: 1, EVERYTHING: 1}
    assert "contacts-only receives 1" in report.subscribers_will_see

    # a discard's notice of the customer's version at own-rule
    of_customers = Selection(filter=LetterFilter(aggregate_type="customer"), every=True)
    preview = run_sync(letters.preview(entity, of_customers, action="discard"))
    report = run_sync(letters.discard(entity, of_customers, reason="given up by hand"))
    assert report.done == 1
    arrived = world.counts(lambda m: str(m.subject) == "OutboxEventDiscarded")
    assert receives(preview.deliveries) == receives(report.deliveries) == arrived
    assert arrived == {OWN: 1, CONTACTS: 0, EVERYTHING: 1}
