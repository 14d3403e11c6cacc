"""A queue-triggered function on the outbox's session in a real Functions host (queue_app, hosted
by funcstack on the session's stack, its queue declared in fixtures/funcstack.json's Storage
part): a command put on the Azurite queue with the unmodified azure-storage-queue SDK (base64,
as the host expects by default) becomes its document and its event, which the relay sends to
the Service Bus topic exactly once, with the event's id, session and type (received with the
unmodified azure-servicebus SDK); a command that is not valid raises in the function, is retried
and ends in `<queue>-poison` after host.json's maxDequeueCount, having written and sent
nothing. test_queue_triggered_functions.py holds the same function in-process."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "funcstack",
    reason=(
        "funcstack in this interpreter (Python 3.13+) runs these tests: "
        "they host an app on funcstack's Functions host"
    ),
)

from azure.core.exceptions import ResourceNotFoundError
from azure.cosmos import ContainerProxy, CosmosClient, PartitionKey
from azure.servicebus import ServiceBusClient, ServiceBusReceivedMessage
from azure.storage.queue import QueueClient, QueueServiceClient
from azure_stack import DATABASE, NOTHING_MORE, SUBSCRIPTION, TOPIC, received, verified
from deadlines import wait_for

from funcstack import LocalStack

pytestmark = pytest.mark.integration
QUEUE_APP = Path(__file__).parents[1] / "queue_app"
#: fixtures/funcstack.json declares it (Storage.Queues); the host creates its poison queue.
QUEUE = "outbox-commands"
POISON = f"{QUEUE}-poison"


@dataclass
class Hosted:
    stack: LocalStack
    container: ContainerProxy
    queues: QueueServiceClient

    def send(self, command: dict[str, Any]) -> None:
        """The command as JSON, base64-encoded as the host's queue trigger decodes it."""
        text = json.dumps(command).encode()
        self.queue(QUEUE).send_message(base64.b64encode(text).decode())

    def queue(self, name: str) -> QueueClient:
        return self.queues.get_queue_client(name)

    def documents(self, partition_key: str) -> list[dict[str, Any]]:
        return list(self.container.query_items("SELECT * FROM c", partition_key=partition_key))

    def session_messages(self, session: str) -> list[ServiceBusReceivedMessage]:
        """What the topic's subscription holds for `session`: waits up to a minute for the
        first message (the host and the relay run meanwhile), then 2 s more for any other."""
        with (
            ServiceBusClient.from_connection_string(
                self.stack.servicebus_connection_string
            ) as client,
            client.get_subscription_receiver(
                TOPIC, SUBSCRIPTION, session_id=session, max_wait_time=60
            ) as receiver,
        ):
            got = receiver.receive_messages(max_message_count=10, max_wait_time=60)
            got += receiver.receive_messages(max_message_count=10, max_wait_time=2)
            for message in got:
                receiver.complete_message(message)
            return got


@pytest.fixture(scope="module")
def hosted(
    funcstack_services: LocalStack, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Hosted]:
    """queue_app in one host for the module, on an outbox container and a lease container of
    its own (deleted after)."""
    suffix = uuid.uuid4().hex[:12]
    outbox, leases = f"outbox-{suffix}", f"leases-{suffix}"
    database = CosmosClient.from_connection_string(
        funcstack_services.cosmos_connection_string, **verified(funcstack_services)
    ).get_database_client(DATABASE)
    container = database.create_container(
        id=outbox, partition_key=PartitionKey(path="/partitionKey"), default_ttl=-1
    )
    database.create_container(id=leases, partition_key=PartitionKey(path="/id"))
    name = f"queue-app-{suffix}"
    try:
        funcstack_services.host_app(
            QUEUE_APP,
            name=name,
            port=0,
            settings_file=tmp_path_factory.mktemp("queue-app") / "local.settings.json",
            overrides={"COSMOS_CONTAINER": outbox, "COSMOS_LEASE_CONTAINER": leases},
        )
        with QueueServiceClient.from_connection_string(
            funcstack_services.storage_connection_string
        ) as queues:
            yield Hosted(funcstack_services, container, queues)
    finally:
        funcstack_services.stop_part(name)
        funcstack_services.hosts.pop(name, None)
        database.delete_container(outbox)
        database.delete_container(leases)


def test_a_queued_command_is_committed_and_its_event_reaches_the_topic_once(
    hosted: Hosted,
) -> None:
    customer, booking = f"c-{uuid.uuid4().hex[:8]}", f"b-{uuid.uuid4().hex[:8]}"
    hosted.send({"customerId": customer, "bookingId": booking, "seats": 3})

    [message] = hosted.session_messages(customer)  # all the session holds: exactly one
    [event] = [d for d in hosted.documents(customer) if d["type"] == "domainEvent"]
    assert (str(message.message_id), message.session_id, message.subject) == (
        event["id"],
        customer,
        "BookingImported",
    )
    data = json.loads(b"".join(message.body))  # the event's data, as published
    assert data == {"bookingId": booking, "seats": 3}
    assert message.application_properties is not None
    assert message.application_properties[b"action"] == b"BookingImported"
    [document] = [d for d in hosted.documents(customer) if d["type"] == "booking"]
    assert (document["id"], document["seats"]) == (booking, 3)


def test_a_command_that_is_not_valid_ends_in_the_poison_queue_having_written_nothing(
    hosted: Hosted,
) -> None:
    customer = f"c-{uuid.uuid4().hex[:8]}"
    command = {"customerId": customer, "bookingId": "b-1", "seats": 0}
    hosted.send(command)

    def poisoned_one() -> Any:
        try:
            peeked = hosted.queue(POISON).peek_messages(max_messages=32)
        except ResourceNotFoundError:  # the host creates it when it first moves one there
            peeked = []
        return next((m for m in peeked if customer in base64.b64decode(m.content).decode()), None)

    poisoned = wait_for(poisoned_one, f"the command in {POISON}", every=0.2)
    assert json.loads(base64.b64decode(poisoned.content)) == command  # the text as sent

    assert not any(
        customer in base64.b64decode(m.content).decode()
        for m in hosted.queue(QUEUE).peek_messages(max_messages=32)
    )
    assert hosted.documents(customer) == []
    assert received(hosted.stack, {customer}, 0, wait=NOTHING_MORE) == []  # nothing on the topic
