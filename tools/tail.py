"""``make tail`` (``python -m tools.tail``): print each event as it reaches this app's topic.

Reads the ``tail`` subscription (tools/servicebus-config.json: local only, not sessionful,
received and deleted), so it never takes a message from the app's subscribers and sees the
events of all contacts as they arrive (each contact's in order). It starts from now: the
subscription keeps messages up to 10 minutes (its time to live), and what it kept from before
the tail started is dropped, not printed (``--from-start``, or ``make tail ARGS=--from-start``,
prints it). The connection string and the topic come from the flags, else the environment
(``ServiceBusConnection``, ``SERVICEBUS_TOPIC``), else ``Values`` of ``local.settings.json``
(written by ``make run``).
"""

from __future__ import annotations

import argparse
import json
import os
from datetime import UTC, datetime
from pathlib import Path

from funcstack.servicebus.tail import print_arrivals

CONNECTION_SETTING = "ServiceBusConnection"
TOPIC_SETTING = "SERVICEBUS_TOPIC"
DEFAULT_TOPIC = "contact-events"
SUBSCRIPTION = "tail"


def setting(name: str, settings_file: Path = Path("local.settings.json")) -> str | None:
    """An app setting from the environment, else from the local settings file."""
    value = os.environ.get(name)
    if value:
        return value
    if settings_file.is_file():
        values = json.loads(settings_file.read_text(encoding="utf-8")).get("Values", {})
        found = values.get(name)
        return str(found) if found else None
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.tail")
    parser.add_argument("--connection-string", default=None)
    parser.add_argument(
        "--topic", default=None, help=f"default: {TOPIC_SETTING} or {DEFAULT_TOPIC}"
    )
    parser.add_argument("--subscription", default=SUBSCRIPTION)
    parser.add_argument(
        "--from-start",
        action="store_true",
        help="print the events the subscription kept from before too "
        "(up to 10 minutes), not only those from now on",
    )
    args = parser.parse_args(argv)
    connection_string = args.connection_string or setting(CONNECTION_SETTING)
    if not connection_string:
        parser.error(
            f"no --connection-string, no {CONNECTION_SETTING} in the environment or "
            "local.settings.json (is `make run` running?)"
        )
    topic = args.topic or setting(TOPIC_SETTING) or DEFAULT_TOPIC
    since = None if args.from_start else datetime.now(UTC)
    try:
        print_arrivals(connection_string, topic=topic, subscription=args.subscription, since=since)
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
