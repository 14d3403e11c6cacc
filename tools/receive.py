"""Receive this app's events from a session subscription of its topic through the real
azure-servicebus SDK, as a consumer would write it (e2e tests, benchmarks)."""

from __future__ import annotations

import json
import threading
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
          subscription: str = "all-events", workers: int = 8) -> list[Received]:
    """Receive (and complete) from every session until `until(received)` or the timeout.

    Like a real consumer, several threads each take the next available session: opening a
    session receiver costs the sync SDK ~0.45 s (its open loop polls every 50 ms).
    """
    received: list[Received] = []
    lock = threading.Lock()
    deadline = time.monotonic() + timeout

    def done() -> bool:
        with lock:
            return until(received)

    def work() -> None:
        # retry_total=0: "no free session" (OperationTimeoutError after max_wait_time) comes
        # back at once instead of after the SDK's retries with back-off (~17 s), as the
        # service answers it
        with ServiceBusClient.from_connection_string(connection_string, retry_total=0) as client:
            while time.monotonic() < deadline and not done():
                try:
                    _drain_one_session(client, topic, subscription, deadline, received, lock)
                except (OperationTimeoutError, ServiceBusError):
                    time.sleep(0.2)

    threads = [threading.Thread(target=work, daemon=True) for _ in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout + 30)
    return list(received)


def _drain_one_session(client: ServiceBusClient, topic: str, subscription: str,
                       deadline: float, received: list[Received], lock: threading.Lock) -> None:
    # keep_alive=0 + prefetch: the SDK starts no keep-alive thread, whose 1 s sleeps would
    # otherwise delay every close.
    with client.get_subscription_receiver(
        topic, subscription, session_id=NEXT_AVAILABLE_SESSION, max_wait_time=1,
        prefetch_count=100, keep_alive=0,
    ) as receiver:
        wait = 1.0
        while time.monotonic() < deadline:
            batch = receiver.receive_messages(max_message_count=100, max_wait_time=wait)
            wait = 0.2
            if not batch:
                return
            for message in batch:
                props = {_decode(k): _decode(v)
                         for k, v in (message.application_properties or {}).items()}
                item = Received(
                    message_id=str(message.message_id),
                    session_id=str(message.session_id),
                    subject=str(message.subject),
                    version=int(props["version"]),
                    body=json.loads(b"".join(message.body)),
                    properties=props,
                )
                receiver.complete_message(message)
                with lock:
                    received.append(item)


def count_at_least(n: int) -> Callable[[list[Received]], bool]:
    return lambda received: len({r.message_id for r in received}) >= n
