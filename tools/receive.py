"""Receive this app's events from a session subscription of its topic through the real
azure-servicebus SDK, as a consumer would write it (e2e tests, benchmarks): from the local
stack's namespace (its connection string) or a deployed one (a client made with a credential:
`tools.deployed`), from every session or from the sessions a test names (its own contacts', on a
namespace that others' events reach too)."""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from azure.servicebus import (
    NEXT_AVAILABLE_SESSION,
    ServiceBusClient,
    ServiceBusReceivedMessage,
    ServiceBusSessionFilter,
)
from azure.servicebus.exceptions import OperationTimeoutError, ServiceBusError


@dataclass(frozen=True)
class Received:
    message_id: str
    session_id: str
    subject: str
    version: int
    #: the event's data: the message's body, or, for a claim check, what its dataref names
    #: (fetched when `drain` was given the payload store; else empty)
    body: dict[str, Any]
    properties: dict[str, Any]
    #: the bytes of the message's own body (empty for a claim check)
    raw_size: int = 0
    content_type: str | None = None

    @property
    def dataref(self) -> str | None:
        ref = self.properties.get("cloudEvents_dataref")
        return None if ref is None else str(ref)


#: A namespace to receive from: a connection string (the local stack's), or a function that makes
#: a client with the keyword arguments given (a deployed namespace, reached with a credential).
Namespace = str | Callable[..., ServiceBusClient]


#: A session to receive from: one named, or the next available.
Session = str | ServiceBusSessionFilter


def connect(namespace: Namespace, **options: Any) -> ServiceBusClient:
    """A client of `namespace`, with the SDK's `options`."""
    if isinstance(namespace, str):
        return ServiceBusClient.from_connection_string(namespace, **options)
    return namespace(**options)


def _decode(value: Any) -> Any:
    return value.decode() if isinstance(value, bytes) else value


def drain(
    namespace: Namespace,
    *,
    until: Callable[[list[Received]], bool],
    timeout: float,
    topic: str = "contact-events",
    subscription: str = "all-events",
    workers: int = 8,
    payloads: Callable[[str], bytes] | None = None,
    sessions: Collection[str] | None = None,
) -> list[Received]:
    """Receive (and complete) until `until(received)` or the timeout: from every session, or
    from `sessions` only (taken in turn, again and again: a session's later messages may come
    after its first receiver closed).

    Like a real consumer, several threads each take the next available session: opening a
    session receiver costs the sync SDK ~0.45 s (its open loop polls every 50 ms). A claim
    check's data (`cloudEvents_dataref`) is fetched with `payloads` (a payload store's `get`).
    """
    received: list[Received] = []
    lock = threading.Lock()
    deadline = time.monotonic() + timeout
    turns = deque(sessions) if sessions is not None else None

    def done() -> bool:
        with lock:
            return until(received)

    def take() -> Session | None:
        if turns is None:
            return NEXT_AVAILABLE_SESSION
        with lock:
            return turns.popleft() if turns else None

    def work() -> None:
        # retry_total=0: "no free session" (OperationTimeoutError after max_wait_time) comes
        # back at once instead of after the SDK's retries with back-off (~17 s), as the
        # service answers it
        with connect(namespace, retry_total=0) as client:
            while time.monotonic() < deadline and not done():
                session = take()
                if session is None:  # every named session is another worker's now
                    time.sleep(0.2)
                    continue
                try:
                    _drain_one_session(
                        client, topic, subscription, deadline, received, lock, payloads, session
                    )
                except (OperationTimeoutError, ServiceBusError):
                    time.sleep(0.2)
                finally:
                    if turns is not None and isinstance(session, str):
                        with lock:
                            turns.append(session)

    count = workers if sessions is None else max(1, min(workers, len(sessions)))
    threads = [threading.Thread(target=work, daemon=True) for _ in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout + 30)
    return list(received)


def _drain_one_session(
    client: ServiceBusClient,
    topic: str,
    subscription: str,
    deadline: float,
    received: list[Received],
    lock: threading.Lock,
    payloads: Callable[[str], bytes] | None,
    session: Session,
) -> None:
    # keep_alive=0 + prefetch: the SDK starts no keep-alive thread, whose 1 s sleeps would
    # otherwise delay every close.
    with client.get_subscription_receiver(
        topic,
        subscription,
        session_id=session,
        max_wait_time=1,
        prefetch_count=100,
        keep_alive=0,
    ) as receiver:
        wait = 1.0
        while time.monotonic() < deadline:
            batch = receiver.receive_messages(max_message_count=100, max_wait_time=wait)
            wait = 0.2
            if not batch:
                return
            for message in batch:
                item = received_from(message, payloads)
                receiver.complete_message(message)
                with lock:
                    received.append(item)


def received_from(
    message: ServiceBusReceivedMessage, payloads: Callable[[str], bytes] | None = None
) -> Received:
    """What a test reads of a received message (a claim check's data fetched with
    `payloads`)."""
    props = {_decode(k): _decode(v) for k, v in (message.application_properties or {}).items()}
    raw = b"".join(message.body)
    data = raw
    dataref = props.get("cloudEvents_dataref")
    if dataref is not None and payloads is not None:
        data = payloads(str(dataref))
    return Received(
        message_id=str(message.message_id),
        session_id=str(message.session_id),
        subject=str(message.subject),
        version=int(props["version"]),
        body=json.loads(data) if data else {},
        properties=props,
        raw_size=len(raw),
        content_type=message.content_type,
    )


def count_at_least(
    n: int, sessions: Collection[str] | None = None
) -> Callable[[list[Received]], bool]:
    """``n`` distinct messages received (of ``sessions`` only, when given: a stack whose topic
    other tests use too)."""
    return lambda received: (
        len({r.message_id for r in received if sessions is None or r.session_id in sessions}) >= n
    )
