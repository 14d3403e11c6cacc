"""``python -m emulators.servicebus.tail``: print every event arriving on a subscription.

Reads the ``tail`` subscription of the topic: its own copy of every event (local config
only), not sessionful, received and deleted, so it never takes a message from another
consumer of ``all-events`` and sees events of all contacts as they arrive (each contact's in
order: the topic keeps send order). Ctrl-C stops it at once. The connection string comes
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
    ServiceBusClient,
    ServiceBusReceivedMessage,
    ServiceBusReceiveMode,
)
from azure.servicebus.exceptions import ServiceBusError

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
    subscription: str = "tail",
    wait_seconds: float = 1.0,
    out: TextIO = sys.stdout,
    max_messages: int | None = None,
) -> int:
    """Receive until interrupted (or ``max_messages``); returns the number printed."""
    printed = 0
    with ServiceBusClient.from_connection_string(connection_string) as client:
        while max_messages is None or printed < max_messages:
            try:
                with client.get_subscription_receiver(
                    topic, subscription, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE,
                    prefetch_count=100,
                ) as receiver:
                    while max_messages is None or printed < max_messages:
                        for message in receiver.receive_messages(
                            max_message_count=100, max_wait_time=wait_seconds
                        ):
                            print(format_event(message), file=out, flush=True)
                            printed += 1
            except ServiceBusError as exc:
                print(f"# {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
                time.sleep(1.0)  # endpoint down or restarting: try again shortly
    return printed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m emulators.servicebus.tail")
    parser.add_argument("--connection-string", default=None)
    parser.add_argument("--topic", default=os.environ.get("SERVICEBUS_TOPIC", "contact-events"))
    parser.add_argument("--subscription", default="tail")
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
