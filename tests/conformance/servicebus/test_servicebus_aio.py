"""Conformance through the SDK's asyncio client."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from azure.servicebus import NEXT_AVAILABLE_SESSION, ServiceBusMessage
from azure.servicebus.aio import ServiceBusClient

from .conftest import SUBSCRIPTION, TOPIC, Target

pytestmark = pytest.mark.conformance


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
            for _ in range(10):
                for message in await receiver.receive_messages(
                    max_message_count=20, max_wait_time=1
                ):
                    await receiver.complete_message(message)
                    got.append(str(message))
                if len(got) >= 20:
                    break
    return got


async def _next_available(connection_string: str) -> str | None:
    sid = f"contact-{uuid.uuid4()}"
    async with ServiceBusClient.from_connection_string(connection_string) as client:
        async with client.get_topic_sender(TOPIC) as sender:
            await sender.send_messages(ServiceBusMessage("x", message_id=sid, session_id=sid))
        async with client.get_subscription_receiver(
            TOPIC, SUBSCRIPTION, session_id=NEXT_AVAILABLE_SESSION, max_wait_time=2
        ) as receiver:
            session_id = receiver.session.session_id
            for message in await receiver.receive_messages(max_message_count=1, max_wait_time=2):
                await receiver.complete_message(message)
    return session_id if session_id == sid else None


def test_aio_batch_send_and_session_receive(servicebus: Target) -> None:
    assert asyncio.run(_round_trip(servicebus.connection_string)) == [str(i) for i in range(20)]


def test_aio_next_available_session(fresh_servicebus: Target) -> None:
    assert asyncio.run(_next_available(fresh_servicebus.connection_string)) is not None
