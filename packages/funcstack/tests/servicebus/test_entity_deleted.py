"""A queue or topic deleted (or replaced) through the control channel ends the links attached to
it with ``amqp:not-found``, as Service Bus does: a sender's next send fails and a receiver's
next receive says the entity could not be found, rather than going on with an entity nobody
can reach any more (a message sent there was accepted and never delivered)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.exceptions import MessagingEntityNotFoundError, ServiceBusError

from funcstack.deadlines import SHORT
from funcstack.servicebus import control_request

from .conftest import Target


def _control(target: Target, request: dict[str, Any]) -> None:
    endpoint = target.endpoint
    assert endpoint is not None and endpoint.control_port is not None
    control_request(endpoint.host, endpoint.control_port, request)


@pytest.mark.parametrize("again", [False, True], ids=["deleted", "deleted-and-made-again"])
def test_a_deleted_queue_ends_its_senders_and_receivers_links(
    shared_servicebus: Target, again: bool
) -> None:
    queue = f"gone-{uuid.uuid4().hex[:8]}"
    _control(shared_servicebus, {"op": "create-queue", "name": queue, "properties": {}})
    client = ServiceBusClient.from_connection_string(
        shared_servicebus.connection_string, retry_total=0
    )
    with (
        client,
        client.get_queue_sender(queue) as sender,
        client.get_queue_receiver(queue, max_wait_time=SHORT) as receiver,
    ):
        sender.send_messages(ServiceBusMessage("before"))
        [before] = receiver.receive_messages(max_wait_time=SHORT)  # at its arrival
        receiver.complete_message(before)
        _control(shared_servicebus, {"op": "delete", "name": queue})
        if again:  # a new queue of the name: not the one these links were attached to
            _control(shared_servicebus, {"op": "create-queue", "name": queue, "properties": {}})
        # the SDK's send on a link the service ended: an error of its own (no retries here)
        with pytest.raises(ServiceBusError):
            sender.send_messages(ServiceBusMessage("after"))
        with pytest.raises(MessagingEntityNotFoundError, match=f"'{queue}' could not be found"):
            receiver.receive_messages(max_wait_time=SHORT)  # ended by the detach
    if again:
        _control(shared_servicebus, {"op": "delete", "name": queue})
