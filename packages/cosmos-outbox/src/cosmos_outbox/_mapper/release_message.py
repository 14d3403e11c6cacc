"""A scheduled event's release, as the schedule queue carries it (`cosmos_outbox._relay.scheduled`
says what a release is for): its message's Subject and body, both directions. The relay makes it
(`release_body`), the schedule queue's adapter sends it (`cosmos_outbox.servicebus`), and the
release trigger and the relay process read it back (`release_of`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from cosmos_outbox._mapper.document import parse_time
from cosmos_outbox._mapper.event import due_text
from cosmos_outbox._records import Release

#: The Subject of a release message on the schedule queue.
RELEASE_SUBJECT = "OutboxRelease"


def release_body(release: Release) -> bytes:
    """A release on the queue (its message's body): the event's partition and id, and when the
    release was scheduled for."""
    return json.dumps(
        {
            "partitionKey": release.partition_key,
            "eventId": release.event_id,
            "at": due_text(release.at),
        },
        separators=(",", ":"),
    ).encode()


def release_of(body: bytes | str) -> Release:
    """A release read back from its message's body. ValueError when it is not one."""
    try:
        found: Any = json.loads(body)
    except ValueError:
        raise ValueError("a release's body is JSON") from None
    if not isinstance(found, Mapping):
        raise ValueError("a release's body is a JSON object")
    partition, event_id, at = found.get("partitionKey"), found.get("eventId"), found.get("at")
    when = parse_time(at)
    if not isinstance(partition, str) or not isinstance(event_id, str) or when is None:
        raise ValueError("a release names its event's partitionKey, eventId and its time")
    return Release(partition, event_id, when)
