"""The projector: one event in, the projection change and its inbox record out, in ONE
transactional batch in the contact's partition of the projection container.

Documents, all partitioned by contact id (`/partitionKey`):

- the projection, id = contact id, `type` `contactProjection`, `version` = last applied;
- one inbox record per processed event, id `inbox-<event id>`, `type` `inboxRecord`, expiring
  after the inbox TTL (`INBOX_TTL_SECONDS`);
- one held event per event that arrived after a gap, id `held-<version>`, `type` `heldEvent`,
  kept (no TTL) until the missing version arrives and it is applied;
- one gap record per quarantine notice (the outbox set the event of that version aside), id
  `gap-<version>`, `type` `quarantinedGap`, with the event id, action and reason: the gap is a
  known one, not a loss. The events after it are held as for any gap; the record is deleted in
  the batch that applies that version when the operator replays the event.

An event whose inbox record exists is acknowledged without effect; so is one whose version is
not above the projection's (which also covers a redelivery after its inbox record expired).
An event whose action the projection does not handle is applied as a version step only (its
inbox record says `ignored`): later versions are not held behind it.
A conflict (another delivery of the same contact's events won the race: 409 on the inbox
record, 412 on the projection's etag) fails the batch as a whole, nothing is written, and the
error propagates: the host abandons the message and its redelivery finds the inbox record.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum
from typing import Any

from azure.cosmos import ContainerProxy
from azure.cosmos.exceptions import CosmosResourceNotFoundError

from contacts_projection.events import QUARANTINE_NOTICE, IncomingEvent
from contacts_projection.projection import Decision, apply, decide, handles, last_version

logger = logging.getLogger(__name__)

INBOX_TYPE = "inboxRecord"
HELD_TYPE = "heldEvent"
GAP_TYPE = "quarantinedGap"
# Held events applied per batch (a batch holds at most 100 operations: the projection, the
# inbox record and one delete per held event).
MAX_HELD_PER_BATCH = 50


class Outcome(Enum):
    APPLIED = "applied"
    #: applied as a version step only: the projection does not handle its action
    IGNORED = "ignored"
    DUPLICATE = "duplicate"
    HELD = "held"
    GAP_RECORDED = "gap recorded"


@dataclass
class Result:
    outcome: Outcome
    applied: list[int] = field(default_factory=list)
    missing: int | None = None


def inbox_id(event_id: str) -> str:
    return f"inbox-{event_id}"


def held_id(version: int) -> str:
    return f"held-{version:012d}"


def gap_id(version: int) -> str:
    return f"gap-{version:012d}"


def _held_event(document: dict[str, Any]) -> IncomingEvent:
    e = document["event"]
    return IncomingEvent(
        event_id=e["id"], contact_id=document["partitionKey"], type=e["type"],
        version=int(e["version"]), data=e["data"],
    )


class Projector:
    """Applies events to the projection container (azure-cosmos, sync)."""

    def __init__(self, container: ContainerProxy, *, inbox_ttl_seconds: int) -> None:
        self._container = container
        self._inbox_ttl = inbox_ttl_seconds

    def _read(self, item: str, partition: str) -> dict[str, Any] | None:
        try:
            document: dict[str, Any] = self._container.read_item(item, partition_key=partition)
        except CosmosResourceNotFoundError:
            return None
        return document

    def _inbox_record(self, event: IncomingEvent, *, held: bool) -> dict[str, Any]:
        return {
            "id": inbox_id(event.event_id),
            "partitionKey": event.contact_id,
            "type": INBOX_TYPE,
            "eventId": event.event_id,
            "action": event.type,
            "version": event.version,
            "held": held,
            "ignored": event.type != QUARANTINE_NOTICE and not handles(event.type),
            "processedAt": datetime.now(UTC).isoformat(),
            "ttl": self._inbox_ttl,
        }

    def handle(self, event: IncomingEvent) -> Result:
        partition = event.contact_id
        if self._read(inbox_id(event.event_id), partition) is not None:
            return Result(Outcome.DUPLICATE)
        projection = self._read(partition, partition)
        if event.type == QUARANTINE_NOTICE:
            return self._record_gap(projection, event)
        decision = decide(projection, event)
        if decision is Decision.DUPLICATE:
            return Result(Outcome.DUPLICATE)
        if decision is Decision.HOLD:
            missing = int(projection["version"]) + 1 if projection else 1
            held = {
                "id": held_id(event.version),
                "partitionKey": partition,
                "type": HELD_TYPE,
                "missingVersion": missing,
                "event": {"id": event.event_id, "type": event.type, "version": event.version,
                          "data": dict(event.data)},
                "ttl": -1,
            }
            self._write_with_inbox(event, held, held=True)
            logger.warning(
                "contact %s: event %s version %d held, version %d missing",
                partition, event.event_id, event.version, missing,
            )
            return Result(Outcome.HELD, missing=missing)
        applied = self._apply(projection, event, first=True)
        outcome = Outcome.APPLIED if handles(event.type) else Outcome.IGNORED
        # held events that follow on: applied in further batches until the next gap
        while True:
            projection = self._read(partition, partition)
            assert projection is not None
            nxt = self._read(held_id(int(projection["version"]) + 1), partition)
            if nxt is None:
                return Result(outcome, applied=applied)
            applied += self._apply(projection, _held_event(nxt), first=False)

    def _write_with_inbox(self, event: IncomingEvent, record: dict[str, Any], *,
                          held: bool) -> None:
        """The event's inbox record and one record of its contact (held event, known gap), in
        one batch: both or neither."""
        self._container.execute_item_batch(
            batch_operations=[
                ("create", (self._inbox_record(event, held=held),)),
                ("upsert", (record,)),
            ],
            partition_key=event.contact_id,
        )

    def _record_gap(self, projection: dict[str, Any] | None, event: IncomingEvent) -> Result:
        """A quarantine notice: the event of `event.version` was set aside by the outbox. Its
        gap is recorded (with the notice's inbox record, in one batch) unless that version is
        already applied (a replay came first) or unknown."""
        partition = event.contact_id
        if event.version == 0 or event.version <= last_version(projection):
            return Result(Outcome.DUPLICATE)
        gap = {
            "id": gap_id(event.version),
            "partitionKey": partition,
            "type": GAP_TYPE,
            "version": event.version,
            "eventId": event.data.get("eventId"),
            "action": event.data.get("action"),
            "reason": event.data.get("reason"),
            "noticedAt": datetime.now(UTC).isoformat(),
            "ttl": -1,
        }
        self._write_with_inbox(event, gap, held=False)
        logger.warning(
            "contact %s: version %d was quarantined by the outbox (event %s): %s",
            partition, event.version, gap["eventId"], gap["reason"],
        )
        return Result(Outcome.GAP_RECORDED, missing=event.version)

    def _apply(
        self, projection: dict[str, Any] | None, event: IncomingEvent, *, first: bool
    ) -> list[int]:
        """One batch: the projection after `event` and the held events following it (up to
        MAX_HELD_PER_BATCH), the inbox record of `event` when it is the incoming one, and the
        deletion of the held events applied."""
        partition = event.contact_id
        operations: list[tuple[Any, ...]] = []
        deletes: list[str] = []
        if not first:
            deletes.append(held_id(event.version))
        updated = apply(projection, event)
        versions = [event.version]
        while len(deletes) < MAX_HELD_PER_BATCH:
            held = self._read(held_id(updated["version"] + 1), partition)
            if held is None:
                break
            updated = apply(updated, _held_event(held))
            deletes.append(held["id"])
            versions.append(int(updated["version"]))
        if projection is None:
            operations.append(("create", (updated,)))
        else:
            operations.append(
                ("replace", (updated["id"], updated), {"if_match_etag": projection["_etag"]})
            )
        if first:
            operations.append(("create", (self._inbox_record(event, held=False),)))
        operations += [("delete", (item,)) for item in deletes]
        # a quarantined version now applied (its replay): its gap record goes in the same batch
        operations += [("delete", (gap_id(v),)) for v in versions
                       if self._read(gap_id(v), partition) is not None]
        self._container.execute_item_batch(batch_operations=operations, partition_key=partition)
        return versions
