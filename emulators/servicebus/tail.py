"""``python -m emulators.servicebus.tail``: print every event arriving on a subscription.

Takes the next available session in a loop (so every contact's events are seen in order),
prints one line per message and completes it. Ctrl-C stops it. The connection string comes
from ``--connection-string``, else env ``ServiceBusConnection``, else ``Values`` of
``local.settings.json`` in the current directory.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from azure.servicebus import (
    NEXT_AVAILABLE_SESSION,
    ServiceBusClient,
    ServiceBusReceivedMessage,
)
from azure.servicebus.exceptions import OperationTimeoutError, ServiceBusError

SETTING = "ServiceBusConnection"


def default_connection_string(settings_file: Path = Path("local.settings.json")) -> str | None:
    value = os.environ.get(SETTING)
    if value:
        return value
    if settings_file.is_file():
        values = json.loads(settings_file.read_text(encoding="utf-8")).get("Values", {})
        found = values.get(SETTING)
        return str(found) if found else None
    return None


def _plain(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value


def format_event(message: ServiceBusReceivedMessage) -> str:
    """One line: session, subject, message id, application properties, body."""
    props = {str(_plain(k)): _plain(v) for k, v in (message.application_properties or {}).items()}
    body = b"".join(message.body) if not isinstance(message.body, bytes) else message.body
    return (
        f"session={message.session_id} subject={message.subject} id={message.message_id} "
        f"props={json.dumps(props, sort_keys=True, default=str)} "
        f"body={body.decode('utf-8', errors='replace')}"
    )


def tail(
    connection_string: str,
    *,
    topic: str,
    subscription: str,
    wait_seconds: float = 5.0,
    out: TextIO = sys.stdout,
    max_messages: int | None = None,
) -> int:
    """Receive until interrupted (or ``max_messages``); returns the number printed."""
    printed = 0
    with ServiceBusClient.from_connection_string(connection_string) as client:
        while max_messages is None or printed < max_messages:
            try:
                with client.get_subscription_receiver(
                    topic,
                    subscription,
                    session_id=NEXT_AVAILABLE_SESSION,
                    max_wait_time=wait_seconds,
                ) as receiver:
                    while max_messages is None or printed < max_messages:
                        batch = receiver.receive_messages(max_message_count=50, max_wait_time=0.5)
                        if not batch:
                            break  # session drained: let another session be taken
                        for message in batch:
                            print(format_event(message), file=out, flush=True)
                            receiver.complete_message(message)
                            printed += 1
            except OperationTimeoutError:
                continue  # no session with messages within wait_seconds
            except ServiceBusError as exc:
                print(f"# {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
                time.sleep(1.0)  # endpoint down or restarting: try again shortly
    return printed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m emulators.servicebus.tail")
    parser.add_argument("--connection-string", default=None)
    parser.add_argument("--topic", default=os.environ.get("SERVICEBUS_TOPIC", "contact-events"))
    parser.add_argument("--subscription", default="all-events")
    args = parser.parse_args(argv)
    connection_string = args.connection_string or default_connection_string()
    if not connection_string:
        parser.error(
            f"no --connection-string, no {SETTING} in the environment or local.settings.json"
        )
    try:
        tail(connection_string, topic=args.topic, subscription=args.subscription)
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
