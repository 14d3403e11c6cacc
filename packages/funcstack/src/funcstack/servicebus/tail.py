"""``python -m funcstack.servicebus.tail --connection-string CS --topic T --subscription S``:
print every message arriving on a subscription, one line each.

Received and deleted, so give it a subscription of its own (not sessionful): it then takes no
message from another consumer of the topic and sees every message as it arrives (in send
order). Ctrl-C stops it at once. It survives the endpoint restarting (it reconnects).
By default it starts from now: what the subscription kept from before it started (since the
last tail, up to the subscription's time to live) is received and dropped, not printed, with
one line on stderr saying how much; ``--from-start`` prints it too.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import UTC, datetime
from typing import Any, TextIO

from azure.servicebus import (
    ServiceBusClient,
    ServiceBusReceivedMessage,
    ServiceBusReceiveMode,
)
from azure.servicebus.exceptions import ServiceBusError

__all__ = ["format_event", "main", "print_arrivals"]


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


def print_arrivals(
    connection_string: str,
    *,
    topic: str,
    subscription: str,
    wait_seconds: float = 1.0,
    out: TextIO = sys.stdout,
    max_messages: int | None = None,
    since: datetime | None = None,
) -> int:
    """Receive until interrupted (or ``max_messages``); returns the number printed. Messages
    enqueued before ``since`` (an aware datetime; None: none) are received, dropped and
    counted on stderr, not printed."""
    printed = 0
    with ServiceBusClient.from_connection_string(connection_string) as client:
        while max_messages is None or printed < max_messages:
            try:
                with client.get_subscription_receiver(
                    topic,
                    subscription,
                    receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE,
                    prefetch_count=100,
                ) as receiver:
                    while max_messages is None or printed < max_messages:
                        skipped = 0
                        for message in receiver.receive_messages(
                            max_message_count=100, max_wait_time=wait_seconds
                        ):
                            if since is not None and _enqueued_before(message, since):
                                skipped += 1
                                continue
                            print(format_event(message), file=out, flush=True)
                            printed += 1
                        if skipped:
                            print(
                                f"# {skipped} message(s) enqueued before "
                                f"{since.isoformat() if since else ''} dropped "
                                "(--from-start prints them)",
                                file=sys.stderr,
                                flush=True,
                            )
            except ServiceBusError as exc:
                print(f"# {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
                time.sleep(1.0)  # endpoint down or restarting: try again shortly
    return printed


def _enqueued_before(message: ServiceBusReceivedMessage, since: datetime) -> bool:
    enqueued = message.enqueued_time_utc
    if enqueued is None:
        return False
    if enqueued.tzinfo is None:
        enqueued = enqueued.replace(tzinfo=UTC)
    return enqueued < since


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m funcstack.servicebus.tail")
    parser.add_argument("--connection-string", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--subscription", required=True)
    parser.add_argument(
        "--from-start", action="store_true", help="print what the subscription kept from before too"
    )
    args = parser.parse_args(argv)
    since = None if args.from_start else datetime.now(UTC)
    try:
        print_arrivals(
            args.connection_string, topic=args.topic, subscription=args.subscription, since=since
        )
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
