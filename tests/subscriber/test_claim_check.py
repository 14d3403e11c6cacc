"""The subscriber's claim-check fetch on the local stack (its async functions in the local host,
Blob Storage on Azurite through the SDK's `aio` client): contact events offloaded by the relay
are projected whole, and a message whose payload is missing is dead-lettered after
MaxDeliveryCount with the reason logged on every delivery."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from azure.cosmos.exceptions import CosmosResourceNotFoundError
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue

import tests.subscriber  # noqa: F401  (puts subscriber/ on sys.path)
from cosmos_outbox.blob import BlobPayloadStore
from funcstack import deadlines
from funcstack.cosmos import CosmosEndpoint
from funcstack.deadlines import LONG, SHORT
from funcstack.servicebus import ServiceBusEndpoint
from funcstack.services import LocalServices
from tools.httpclient import Client
from tools.stack import Ports, Stack

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory,
    shared_cosmos: CosmosEndpoint,
    shared_servicebus: ServiceBusEndpoint,
    claim_check_azurite: LocalServices,
) -> Iterator[Stack]:
    """On the run's Cosmos DB and Service Bus endpoints and the claim-check modules' Azurite
    (tests/conftest.py), each in a database, topic and payload container of its own: no test
    here stops or faults them."""
    workdir = Path(tmp_path_factory.mktemp("subscriber-claim-check"))
    with Stack(
        shared_cosmos=shared_cosmos,
        shared_servicebus=shared_servicebus,
        shared_azurite=claim_check_azurite.azurite,
        workdir=workdir / "stack",
        ports=Ports.free(),
        with_subscriber=True,
        # The app's own feed poll delay (1 s): no test here times the relay or kills it
        # mid-send; idle, a stack polling every 100 ms took 4.8 % of a core, every 1 s 1.3 %
        # (measured once; the figures' history is in git).
        # The missing payload's test receives the dead letter from the dead-letter queue itself
        # (as Service Bus keeps it): the failures' ingest (on by default) would drain it first.
        settings_overrides={"OUTBOX_FAILURE_INGEST": "false"},
    ) as stack:
        yield stack


def wait_for[T](check: Callable[[], T | None], what: str, deadline: float = SHORT) -> T:
    """`funcstack.deadlines.wait_for`, polling every 0.3 s (each poll reads the store or a
    log)."""
    return deadlines.wait_for(check, what, deadline, every=0.3)


def test_offloaded_contact_events_are_projected_whole(stack: Stack) -> None:
    """The relay told that the topic takes 1 KB: the contact's events go by claim check."""
    stack.stop_runner()
    stack.start_runner(SERVICEBUS_MAX_MESSAGE_BYTES="1024")
    client = Client(stack.api_url)
    try:
        created = client.request(
            "POST",
            "/contacts",
            json_body={
                "firstName": "Claire",
                "lastName": "Check",
                "email": "claire@example.com",
                "companyName": "Claims",
                "description": "d" * 500,
            },
        )
        assert created.status == 201, created.body
        contact = created.json()["id"]
        described = client.request(
            "POST", f"/contacts/{contact}/update-description", json_body={"description": "e" * 500}
        )
        assert described.status == 204, described.body
    finally:
        client.close()

    def projected() -> dict[str, Any] | None:
        try:
            doc: dict[str, Any] = stack.projections_container().read_item(
                contact, partition_key=contact
            )
        except CosmosResourceNotFoundError:
            return None
        return doc if doc["version"] == 2 else None

    try:
        projection = wait_for(projected, "the projection at version 2")
    finally:
        stack.stop_runner()
        stack.start_runner()
    assert projection["data"]["description"] == "e" * 500
    assert projection["data"]["email"] == "claire@example.com"
    offloaded = [
        line
        for line in stack.log_path("runner").read_text("utf-8", "replace").splitlines()
        if "offloaded event" in line and contact in line
    ]
    assert len(offloaded) == 2


def test_a_message_whose_payload_is_missing_is_dead_lettered_with_the_reason_logged(
    stack: Stack,
) -> None:
    assert stack.servicebus is not None and stack.azurite is not None
    payloads = BlobPayloadStore.from_connection_string(
        stack.azurite.connection_string, stack.settings()["OUTBOX_PAYLOAD_CONTAINER"]
    )
    contact, event_id = str(uuid.uuid4()), str(uuid.uuid4())
    dataref = payloads.reference(f"contact/{contact}/{event_id}")  # never stored
    message = ServiceBusMessage(
        b"",
        content_type="application/json",
        subject="ContactCreatedEvent",
        message_id=event_id,
        session_id=contact,
        application_properties={
            "aggregateType": "contact",
            "contactId": contact,
            "version": 1,
            "action": "ContactCreatedEvent",
            "cloudEvents_specversion": "1.0",
            "cloudEvents_id": event_id,
            "cloudEvents_source": "/contacts",
            "cloudEvents_type": "ContactCreatedEvent",
            "cloudEvents_subject": contact,
            "cloudEvents_dataref": dataref,
        },
    )
    subscription = stack.subscriber_settings()["SUBSCRIBER_SUBSCRIPTION"]
    topic = stack.settings()["SERVICEBUS_TOPIC"]
    with ServiceBusClient.from_connection_string(stack.servicebus.connection_string) as client:
        with client.get_topic_sender(topic) as sender:
            sender.send_messages(message)
        with client.get_subscription_receiver(
            topic,
            subscription,
            sub_queue=ServiceBusSubQueue.DEAD_LETTER,
            max_wait_time=LONG,
        ) as dead_letters:
            # ten deliveries, each failing, before the subscription dead-letters it
            found = dead_letters.receive_messages(max_message_count=1, max_wait_time=LONG)
            assert found, f"the message not dead-lettered within {LONG:g} s"
            [dead] = found
            dead_letters.complete_message(dead)
    assert (dead.message_id, dead.dead_letter_reason, dead.delivery_count) == (
        event_id,
        "MaxDeliveryCountExceeded",
        10,
    )

    def logged() -> list[str]:
        return [
            line
            for line in stack.log_path("subscriber").read_text("utf-8", "replace").splitlines()
            if event_id in line and "could not be fetched" in line
        ]

    # the host writes the worker's lines as they come: the last may follow the dead letter
    def ten() -> list[str] | None:
        found = logged()
        return found if len(found) >= 10 else None

    lines: list[str] = wait_for(ten, "the ten deliveries' lines")
    assert len(lines) == 10  # one per delivery, each with the reason
    assert all("no payload at" in line and dataref in line for line in lines)
