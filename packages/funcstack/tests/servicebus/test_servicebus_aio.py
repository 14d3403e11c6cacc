"""Conformance through the SDK's asyncio client."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from azure.servicebus import NEXT_AVAILABLE_SESSION, ServiceBusMessage
from azure.servicebus.aio import ServiceBusClient

from funcstack.deadlines import SHORT

from .conftest import SUBSCRIPTION, TOPIC, Entities, Target, receive_async

pytestmark = [pytest.mark.integration, pytest.mark.conformance]


async def _round_trip(connection_string: str) -> list[str]:
    sid = f"contact-{uuid.uuid4()}"
    async with ServiceBusClient.from_connection_string(connection_string) as client:
        async with client.get_topic_sender(TOPIC) as sender:
            batch = await sender.create_message_batch()
            for i in range(20):
                batch.add_message(
                    ServiceBusMessage(f"{i}", message_id=f"{sid}:{i}", session_id=sid)
                )
            await sender.send_messages(batch)
        got: list[str] = []
        async with client.get_subscription_receiver(
            TOPIC, SUBSCRIPTION, session_id=sid, max_wait_time=1
        ) as receiver:
            for message in await receive_async(receiver, 20, "the batch's 20 messages"):
                await receiver.complete_message(message)
                got.append(str(message))
    return got


async def _next_available(connection_string: str, topic: str) -> str | None:
    sid = f"contact-{uuid.uuid4()}"
    async with ServiceBusClient.from_connection_string(connection_string) as client:
        async with client.get_topic_sender(topic) as sender:
            await sender.send_messages(ServiceBusMessage("x", message_id=sid, session_id=sid))
        async with client.get_subscription_receiver(
            topic, SUBSCRIPTION, session_id=NEXT_AVAILABLE_SESSION, max_wait_time=SHORT
        ) as receiver:
            session_id = receiver.session.session_id
            for message in await receiver.receive_messages(
                max_message_count=1, max_wait_time=SHORT
            ):
                await receiver.complete_message(message)
    return session_id if session_id == sid else None


def test_aio_batch_send_and_session_receive(servicebus: Target) -> None:
    assert asyncio.run(_round_trip(servicebus.connection_string)) == [str(i) for i in range(20)]


def test_aio_next_available_session(local_only: Target, own: Entities) -> None:
    assert asyncio.run(_next_available(local_only.connection_string, own.topic)) is not None


async def _list_sessions_then_round_trip(
    connection_string: str, topic: str
) -> tuple[list[str], str]:
    """List a subscription's sessions twice (each listing opens a $management link pair on a
    session of its own, which the async client ends before it detaches the links), then send
    and receive on the same client."""
    sid = f"contact-{uuid.uuid4()}"
    async with ServiceBusClient.from_connection_string(connection_string) as client:
        async with client.get_topic_sender(topic) as sender:
            await sender.send_messages(ServiceBusMessage("x", message_id=sid, session_id=sid))
        listed = [s async for s in client.list_subscription_sessions(topic, SUBSCRIPTION)]
        listed += [s async for s in client.list_subscription_sessions(topic, SUBSCRIPTION)]
        async with client.get_subscription_receiver(
            topic, SUBSCRIPTION, session_id=sid, max_wait_time=2
        ) as receiver:
            got = await receive_async(receiver, 1, "the message sent after the listings")
            await receiver.complete_message(got[0])
    return listed, str(got[0])


def test_a_detach_after_its_sessions_end_is_ignored_without_dropping_the_connection(
    local_only: Target, own: Entities
) -> None:
    """The async client detaches its $management links after it ended their session. As the
    service's AMQP stack does, the endpoint ignores a detach (or end) on a channel that has no
    session: no error logged (in the lines of the endpoint's log this test's requests wrote),
    the connection kept."""
    assert local_only.log_path is not None
    start = local_only.log_path.stat().st_size
    listed, body = asyncio.run(
        _list_sessions_then_round_trip(local_only.connection_string, own.topic)
    )
    assert len(listed) == 2
    assert body == "x"
    # each line is in the file as it is logged; the round trip after the listings came after
    # the detaches on the same connection
    written = local_only.log_path.read_bytes()[start:].decode("utf-8", "replace")
    assert "connection failed" not in written
    assert "Traceback" not in written
