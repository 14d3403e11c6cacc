"""The endpoint enforces the quotas of the tier its namespace is declared as (Standard unless the
Config.json's namespace says ``"Sku": "Premium"``), with Service Bus's answers as the SDK
surfaces them: a message, batch or header too large -> ``MessageSizeExceededError``; an
application property over 32 KB -> a ``ServiceBusError`` (the service's internal error, which
the SDK retries in vain); an id over 128 characters (only a raw ``AmqpAnnotatedMessage`` gets past
the SDK's own check) -> ``ServiceBusError`` not retried. Nothing of a refused batch is kept.
Through the real SDK, sync and aio. Local only: Standard's tests on the run's endpoint
(``shared_servicebus``: its namespace declares no tier), on queues of the module's own created
through its control channel; Premium's on an endpoint whose Config.json declares it."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSender
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient
from azure.servicebus.amqp import AmqpAnnotatedMessage
from azure.servicebus.exceptions import MessageSizeExceededError, ServiceBusError

from funcstack.servicebus._config import load_config
from funcstack.servicebus._launcher import ServiceBusEndpoint, start_servicebus
from funcstack.servicebus._limits import (
    MAX_HEADER_BYTES,
    MAX_ID_LENGTH,
    MAX_PROPERTY_VALUE_BYTES,
    STANDARD,
)

from .conftest import CONFIG, Target, entities, receive_all

pytestmark = [pytest.mark.integration, pytest.mark.conformance]

KB = 1024
#: Names of this module's own on the shared endpoint, which other modules use at the same time.
QUEUE = f"q-{uuid.uuid4().hex[:8]}"
SESSION_QUEUE = f"sq-{uuid.uuid4().hex[:8]}"
LARGE_QUEUE = "large"


def _namespace(sku: str | None, **extra: Any) -> dict[str, Any]:
    namespace: dict[str, Any] = {
        "Name": "sbemulatorns",
        "Topics": [],
        "Queues": [
            {"Name": QUEUE, "Properties": {}},
            {"Name": SESSION_QUEUE, "Properties": {"RequiresSession": True}},
            *extra.pop("queues", []),
        ],
    }
    if sku is not None:
        namespace["Sku"] = sku
    return namespace


def _config(tmp_path: Path, sku: str | None, **extra: Any) -> Path:
    namespace = _namespace(sku, **extra)
    path = tmp_path / f"config-{sku}.json"
    path.write_text(
        json.dumps({"UserConfig": {"Namespaces": [namespace], "Logging": {"Type": "File"}}})
    )
    return path


@pytest.fixture(scope="module")
def standard(shared_servicebus: Target) -> Iterator[ServiceBusEndpoint]:
    """The run's endpoint (Standard: the test config declares no tier), with `QUEUE`
    and `SESSION_QUEUE` created as `_config` declares them, deleted after the module."""
    endpoint = shared_servicebus.endpoint
    assert endpoint is not None
    assert load_config(CONFIG).tier == STANDARD
    with entities(endpoint, _namespace(None)):
        yield endpoint


@pytest.fixture(scope="module")
def premium(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceBusEndpoint]:
    tmp = tmp_path_factory.mktemp("premium")
    config = _config(
        tmp,
        "Premium",
        queues=[{"Name": LARGE_QUEUE, "Properties": {"MaxMessageSizeInKilobytes": 2048}}],
    )
    endpoint = start_servicebus(config=config, log_path=tmp / "sb.log")
    try:
        yield endpoint
    finally:
        endpoint.stop()


def _client(endpoint: ServiceBusEndpoint) -> ServiceBusClient:
    # no retries: a refusal the SDK deems retryable (a property over 32 KB) is raised at once
    return ServiceBusClient.from_connection_string(endpoint.connection_string, retry_total=0)


@contextmanager
def _sending(endpoint: ServiceBusEndpoint, queue: str = QUEUE) -> Iterator[ServiceBusSender]:
    with _client(endpoint) as client, client.get_queue_sender(queue, keep_alive=0) as sender:
        yield sender


def _received(
    endpoint: ServiceBusEndpoint,
    count: int = 0,
    queue: str = QUEUE,
    session_id: str | None = None,
) -> list[Any]:
    """The `count` messages the queue is expected to hold and any more that come
    (`receive_all`; none expected, as after a refusal: a non-event's window)."""
    with (
        _client(endpoint) as client,
        client.get_queue_receiver(queue, session_id=session_id, max_wait_time=1) as receiver,
    ):
        return receive_all(receiver, count, f"{count} message(s) on {queue}")


def _id() -> str:
    return str(uuid.uuid4())


# ---- Standard ---------------------------------------------------------------------------------


def test_standard_messages_and_batches_are_256_kb(standard: ServiceBusEndpoint) -> None:
    with _sending(standard) as sender:
        assert sender.create_message_batch().max_size_in_bytes == 256 * KB
        sender.send_messages(ServiceBusMessage(b"x" * 250 * KB, message_id="fits"))
        with pytest.raises(MessageSizeExceededError, match="262144"):
            sender.send_messages(ServiceBusMessage(b"x" * 257 * KB, message_id="too-large"))
    assert [m.message_id for m in _received(standard, 1)] == ["fits"]


def test_a_property_of_40_kb_is_refused_at_send_and_nothing_is_kept(
    standard: ServiceBusEndpoint,
) -> None:
    event = ServiceBusMessage(
        "{}", message_id=_id(), application_properties={"note": "n" * 40 * KB}
    )
    with (
        _sending(standard) as sender,
        pytest.raises(ServiceBusError, match=r"'note'.*40960 bytes") as refused,
    ):
        sender.send_messages(event)
    assert not isinstance(refused.value, MessageSizeExceededError)
    assert _received(standard) == []


def test_40_kb_of_properties_under_32_kb_each_are_sent(standard: ServiceBusEndpoint) -> None:
    props: dict[str | bytes, Any] = {f"p{i}": str(i) * 10 * KB for i in range(4)}
    message_id = _id()
    with _sending(standard) as sender:
        sender.send_messages(
            ServiceBusMessage("{}", message_id=message_id, application_properties=props)
        )
        # at the limit: one property of exactly 32 KB
        sender.send_messages(
            ServiceBusMessage(
                "{}",
                message_id="at-limit",
                application_properties={"p": "x" * MAX_PROPERTY_VALUE_BYTES},
            )
        )
    got = _received(standard, 2)
    assert [m.message_id for m in got] == [message_id, "at-limit"]
    # the SDK reads string properties back as bytes
    assert {k.decode(): v.decode() for k, v in got[0].application_properties.items()} == props


def test_a_header_over_64_kb_is_refused_as_too_large(standard: ServiceBusEndpoint) -> None:
    # 70 KB of properties, each under 32 KB
    props: dict[str | bytes, Any] = {f"p{i}": "h" * 10 * KB for i in range(7)}
    with (
        _sending(standard) as sender,
        pytest.raises(MessageSizeExceededError, match=str(MAX_HEADER_BYTES)),
    ):
        sender.send_messages(
            ServiceBusMessage("{}", message_id=_id(), application_properties=props)
        )
    assert _received(standard) == []


def test_a_batch_with_one_message_over_a_quota_is_refused_whole(
    standard: ServiceBusEndpoint,
) -> None:
    with _sending(standard) as sender:
        batch = sender.create_message_batch()
        batch.add_message(ServiceBusMessage("fine", message_id=_id()))
        batch.add_message(
            ServiceBusMessage(
                "bad", message_id=_id(), application_properties={"big": "b" * 33 * KB}
            )
        )
        with pytest.raises(ServiceBusError, match="message 2 of the batch"):
            sender.send_messages(batch)
    assert _received(standard) == []


@pytest.mark.parametrize("field", ["message_id", "group_id", "reply_to_group_id"])
def test_an_id_over_128_characters_is_refused(standard: ServiceBusEndpoint, field: str) -> None:
    """The SDK's ServiceBusMessage refuses such ids itself; a raw AMQP message carries them to
    the endpoint, which refuses them as the service does (not retried)."""
    queue = SESSION_QUEUE if field == "group_id" else QUEUE
    long = "é" * (MAX_ID_LENGTH + 1)
    properties = {
        "message_id": _id(),
        "group_id": "s" if queue == SESSION_QUEUE else None,
        field: long,
    }
    with _sending(standard, queue) as sender:
        with pytest.raises(ServiceBusError, match=f"{MAX_ID_LENGTH + 1} characters"):
            sender.send_messages(AmqpAnnotatedMessage(data_body=b"x", properties=properties))
        # 128 characters are taken
        properties[field] = "é" * MAX_ID_LENGTH
        sender.send_messages(AmqpAnnotatedMessage(data_body=b"x", properties=properties))
    session = properties["group_id"] if queue == SESSION_QUEUE else None
    assert len(_received(standard, 1, queue, session)) == 1


def test_a_partition_key_over_128_characters_is_refused(standard: ServiceBusEndpoint) -> None:
    annotations: dict[Any, Any] = {b"x-opt-partition-key": "k" * (MAX_ID_LENGTH + 1)}
    with _sending(standard) as sender, pytest.raises(ServiceBusError, match="PartitionKey"):
        sender.send_messages(
            AmqpAnnotatedMessage(
                data_body=b"x", properties={"message_id": _id()}, annotations=annotations
            )
        )
    assert _received(standard) == []


# ---- Premium ----------------------------------------------------------------------------------


def test_premium_messages_of_1_mb_and_batches_of_1_mb(premium: ServiceBusEndpoint) -> None:
    with _client(premium) as client:
        with client.get_queue_sender(QUEUE, keep_alive=0) as sender:
            assert sender.create_message_batch().max_size_in_bytes == 1024 * KB
            sender.send_messages(ServiceBusMessage(b"x" * 1000 * KB, message_id="fits"))
            with pytest.raises(MessageSizeExceededError, match="1048576"):
                sender.send_messages(ServiceBusMessage(b"x" * 1025 * KB, message_id="no"))
        with client.get_queue_sender(LARGE_QUEUE, keep_alive=0) as sender:
            # an entity's MaxMessageSizeInKilobytes: larger single messages, batches stay 1 MB
            assert sender.create_message_batch().max_size_in_bytes == 1024 * KB
            sender.send_messages(ServiceBusMessage(b"y" * 1500 * KB, message_id="large"))
            with pytest.raises(MessageSizeExceededError, match="2097152"):
                sender.send_messages(ServiceBusMessage(b"y" * 2049 * KB, message_id="no"))
    assert [m.message_id for m in _received(premium, 1)] == ["fits"]
    assert [m.message_id for m in _received(premium, 1, LARGE_QUEUE)] == ["large"]


def test_premium_keeps_the_property_and_header_quotas(premium: ServiceBusEndpoint) -> None:
    with _sending(premium) as sender, pytest.raises(ServiceBusError, match="'note'"):
        sender.send_messages(
            ServiceBusMessage("{}", application_properties={"note": "n" * 40 * KB})
        )


# ---- aio --------------------------------------------------------------------------------------


def test_the_async_client_meets_the_same_refusals(standard: ServiceBusEndpoint) -> None:
    async def run() -> tuple[BaseException, BaseException, BaseException]:
        async with (
            AsyncServiceBusClient.from_connection_string(
                standard.connection_string, retry_total=0
            ) as client,
            client.get_queue_sender(QUEUE) as sender,
        ):
            errors = []
            for message in (
                ServiceBusMessage("{}", application_properties={"note": "n" * 40 * KB}),
                ServiceBusMessage(
                    "{}", application_properties={f"p{i}": "h" * 10 * KB for i in range(7)}
                ),
                ServiceBusMessage(b"x" * 257 * KB),
            ):
                try:
                    await sender.send_messages(message)
                except ServiceBusError as error:
                    errors.append(error)
            assert len(errors) == 3, errors
            return errors[0], errors[1], errors[2]

    prop, header, size = asyncio.run(run())
    assert "'note'" in str(prop) and not isinstance(prop, MessageSizeExceededError)
    assert isinstance(header, MessageSizeExceededError)
    assert isinstance(size, MessageSizeExceededError)
    assert _received(standard) == []


# ---- the declared namespace -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("namespace", "message"),
    [
        ({"Sku": "Basic"}, "'Basic' is not modelled"),
        ({"Sku": "Gold"}, "not a Service Bus tier"),
        (
            {
                "Sku": "Premium",
                "Queues": [{"Name": "q", "Properties": {"MaxMessageSizeInKilobytes": 200000}}],
            },
            "MaxMessageSizeInKilobytes 200000",
        ),
        ({"Queues": [{"Name": "q" * 261}]}, "261 characters.*at most 260"),
        ({"Topics": [{"Name": "t", "Subscriptions": [{"Name": "s" * 51}]}]}, "at most 50"),
    ],
)
def test_a_namespace_azure_would_refuse_is_refused_naming_the_cause(
    tmp_path: Path,
    namespace: dict[str, Any],
    message: str,
) -> None:
    path = tmp_path / "Config.json"
    path.write_text(
        json.dumps({"UserConfig": {"Namespaces": [{"Name": "sbemulatorns", **namespace}]}})
    )
    with pytest.raises(ValueError, match=message) as refused:
        load_config(path)
    assert str(path) in str(refused.value)


def test_premium_is_declared_with_arms_sku_object_too(tmp_path: Path) -> None:
    path = tmp_path / "Config.json"
    path.write_text(
        json.dumps(
            {"UserConfig": {"Namespaces": [{"Name": "sbemulatorns", "Sku": {"Name": "premium"}}]}}
        )
    )
    assert load_config(path).tier.name == "Premium"
