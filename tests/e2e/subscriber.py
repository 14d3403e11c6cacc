"""A session subscriber through the real azure-servicebus SDK, as a consumer would write it."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from azure.servicebus import NEXT_AVAILABLE_SESSION, ServiceBusClient
from azure.servicebus.exceptions import OperationTimeoutError, ServiceBusError


@dataclass(frozen=True)
class Received:
    message_id: str
    session_id: str
    subject: str
    version: int
    body: dict[str, Any]
    properties: dict[str, Any]


def _decode(value: Any) -> Any:
    return value.decode() if isinstance(value, bytes) else value


def drain(connection_string: str, *, until: Callable[[list[Received]], bool],
          timeout: float, topic: str = "contact-events",
          subscription: str = "all-events") -> list[Received]:
    """Receive (and complete) from every session until `until(received)` or the timeout."""
    received: list[Received] = []
    deadline = time.monotonic() + timeout
    with ServiceBusClient.from_connection_string(connection_string) as client:
        while time.monotonic() < deadline and not until(received):
            try:
                # keep_alive=0 + prefetch: the SDK starts no keep-alive thread, whose 1 s
                # sleeps would otherwise delay every close (one receiver per session).
                with client.get_subscription_receiver(
                    topic, subscription, session_id=NEXT_AVAILABLE_SESSION, max_wait_time=1,
                    prefetch_count=100, keep_alive=0,
                ) as receiver:
                    wait = 1.0
                    while time.monotonic() < deadline:
                        batch = receiver.receive_messages(max_message_count=100,
                                                          max_wait_time=wait)
                        wait = 0.2
                        if not batch:
                            break
                        for message in batch:
                            props = {_decode(k): _decode(v)
                                     for k, v in (message.application_properties or {}).items()}
                            received.append(Received(
                                message_id=str(message.message_id),
                                session_id=str(message.session_id),
                                subject=str(message.subject),
                                version=int(props["version"]),
                                body=json.loads(b"".join(message.body)),
                                properties=props,
                            ))
                            receiver.complete_message(message)
            except (OperationTimeoutError, ServiceBusError):
                time.sleep(0.2)
    return received


def count_at_least(n: int) -> Callable[[list[Received]], bool]:
    return lambda received: len({r.message_id for r in received}) >= n
