"""The documents the projector keeps in the projection container beside the projections (the
inbox, held events, known and accepted gaps), their ids, and why a version is held: read by the
projector (`_projector`) and the status (`_status`) alike."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "ACCEPTED_GAP_TYPE",
    "GAP_TYPE",
    "HELD_TYPE",
    "INBOX_TYPE",
    "gap_id",
    "held_id",
    "hold_reason",
    "inbox_id",
    "last_version",
]

INBOX_TYPE = "inboxRecord"
HELD_TYPE = "heldEvent"
GAP_TYPE = "quarantinedGap"
ACCEPTED_GAP_TYPE = "acceptedGap"


def last_version(projection: Mapping[str, Any] | None) -> int:
    return int(projection["version"]) if projection is not None else 0


def inbox_id(event_id: str) -> str:
    return f"inbox-{event_id}"


def held_id(version: int) -> str:
    return f"held-{version:012d}"


def gap_id(version: int) -> str:
    return f"gap-{version:012d}"


def hold_reason(
    aggregate_type: str, aggregate_id: str, missing: int, known: Mapping[str, Any] | None
) -> tuple[str, str]:
    """Why version `missing` of an aggregate is not here (from its gap record, `known`, when
    the outbox said), and what releases the versions held behind it: the operators' commands
    (`cosmos-outbox`, the routes' command line)."""
    if known is not None and known.get("type") == GAP_TYPE:
        event = known.get("eventId")
        return (
            f"version {missing} was quarantined by the outbox (event {event}: "
            f"{known.get('reason')})",
            f"replay it (cosmos-outbox quarantine replay {event}) or give it up "
            f"(cosmos-outbox quarantine discard {event} --reason ...)",
        )
    return (
        f"version {missing} has not arrived (still on its way, dead-lettered at this "
        "subscription, or lost)",
        f"find it (cosmos-outbox journey --aggregate {aggregate_type} {aggregate_id}), then "
        "resubmit its dead letter (cosmos-outbox deadletters resubmit <subscription> ...) "
        f"or give the version up (cosmos-outbox subscribers release <subscription> "
        f"{aggregate_type} {aggregate_id} --version {missing} --reason ...)",
    )
