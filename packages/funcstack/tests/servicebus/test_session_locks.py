"""A session's lock lapses after the entity's LockDuration unless it is renewed, as Service Bus's
does, even while its receiver stays attached: the session is free for another receiver, its
unsettled messages come back with DeliveryCount + 1, and the first receiver's link is detached
with ``com.microsoft:session-lock-lost``. Renewed (``session.renew_lock()``), it is kept past
its LockDuration. Through the real SDK; local only (a 2 s LockDuration)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceivedMessage
from azure.servicebus.exceptions import ServiceBusError, SessionCannotBeLockedError

from funcstack.deadlines import SHORT, wait_for
from funcstack.servicebus._launcher import ServiceBusEndpoint

from .conftest import Target, entities, receive

pytestmark = [pytest.mark.integration, pytest.mark.conformance]

#: A name of this module's own on the shared endpoint, which other modules use at the same time.
QUEUE = f"sessions-{uuid.uuid4().hex[:8]}"
LOCK_SECONDS = 2


@pytest.fixture(scope="module")
def endpoint(servicebus: Target) -> Iterator[ServiceBusEndpoint]:
    """Its session queue on the shared endpoint, created on the control channel."""
    if servicebus.endpoint is None:
        pytest.skip("creates its queue on the local endpoint's control channel")
    queue = {
        "Name": QUEUE,
        "Properties": {
            "RequiresSession": True,
            "LockDuration": f"PT{LOCK_SECONDS}S",
            "MaxDeliveryCount": 10,
        },
    }
    with entities(servicebus.endpoint, {"Queues": [queue]}):
        yield servicebus.endpoint


def _no_retry(endpoint: ServiceBusEndpoint) -> ServiceBusClient:
    """A client that does not retry a refused session (the SDK would, for longer than the
    lock lasts)."""
    return ServiceBusClient.from_connection_string(endpoint.connection_string, retry_total=0)


def _send(client: ServiceBusClient, session: str) -> None:
    with client.get_queue_sender(QUEUE) as sender:
        sender.send_messages(
            ServiceBusMessage("m", message_id=str(uuid.uuid4()), session_id=session)
        )


def test_a_session_lock_not_renewed_lapses_while_its_receiver_is_attached(
    endpoint: ServiceBusEndpoint,
) -> None:
    session = f"s-{uuid.uuid4()}"
    with ServiceBusClient.from_connection_string(endpoint.connection_string) as client:
        _send(client, session)
        with client.get_queue_receiver(QUEUE, session_id=session) as first:
            [message] = first.receive_messages(max_message_count=1, max_wait_time=SHORT)
            assert message.delivery_count == 0
            # held: another receiver is refused the session meanwhile (the lock renewed just
            # before, so that the other's connection has a whole LockDuration to ask in)
            first.session.renew_lock()
            with (
                _no_retry(endpoint) as other,
                pytest.raises(SessionCannotBeLockedError),
                other.get_queue_receiver(QUEUE, session_id=session),
            ):
                pass
            # past the lock duration, not renewed: the session is another receiver's

            def taken() -> list[ServiceBusReceivedMessage] | None:
                try:
                    with (
                        _no_retry(endpoint) as other,
                        other.get_queue_receiver(QUEUE, session_id=session) as second,
                    ):
                        got = receive(second, 1, "the unsettled message again")
                        for m in got:
                            second.complete_message(m)
                    return got
                except SessionCannotBeLockedError:
                    return None

            again = wait_for(taken, "the session lock lapsed: another receiver takes it", every=0.5)
            with pytest.raises(ServiceBusError):
                first.complete_message(message)
    assert [m.message_id for m in again] == [message.message_id]
    assert again[0].delivery_count == 1


def test_a_renewed_session_lock_is_kept_past_its_lock_duration(
    endpoint: ServiceBusEndpoint,
) -> None:
    session = f"s-{uuid.uuid4()}"
    with ServiceBusClient.from_connection_string(endpoint.connection_string) as client:
        _send(client, session)
        with client.get_queue_receiver(QUEUE, session_id=session) as holder:
            [message] = holder.receive_messages(max_message_count=1, max_wait_time=SHORT)
            started = time.monotonic()
            while time.monotonic() - started < 3 * LOCK_SECONDS:
                holder.session.renew_lock()
                time.sleep(LOCK_SECONDS / 4)
            with (
                _no_retry(endpoint) as other,
                pytest.raises(SessionCannotBeLockedError),
                other.get_queue_receiver(QUEUE, session_id=session),
            ):
                pass
            holder.complete_message(message)
