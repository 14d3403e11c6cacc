"""The relay use case: outbox records in, broker messages out. Generic over aggregates.

Events are grouped per aggregate (session) and ordered by version inside it, then packed into
size-limited batches, a new batch whenever one is full. A send failure propagates, so the
trigger's retry policy redelivers the same documents (the topic drops the duplicates). An event
that cannot become a message (unreadable, or breaking one of Service Bus's limits that no retry
changes: `cosmos_outbox._message_limits`) is quarantined with its reason and skipped, and a notice
(`OutboxEventQuarantined`, MessageId derived from the event id) is published in its session
where the event would have been, so subscribers can tell "set aside" from "lost".

The claim check: an event whose message does not fit an empty batch (the topic's limit, after
the link was asked once more per invocation) is offloaded when a payload store is configured:
its claim-check message (same ids, properties and content type, an empty body, `dataref` = the
body's reference) takes its place in the batch, and its body is stored before that batch can be
sent. A failed upload raises like a failed send (nothing of the batch is sent, the trigger
retries; the retry writes the same bytes to the same name). Quarantined instead: a body above
`max_payload_bytes` (0: no claim check), or a claim-check message that does not fit either.

Scheduled events (`cosmos_outbox._relay.scheduled` says how): one not released yet is not sent;
its release is scheduled for its due time on the schedule queue (without one, it is quarantined,
the reason naming SERVICEBUS_SCHEDULE_QUEUE); a cancelled one is skipped (never sent); a released
one is sent as any event, without a version (it takes no place in its session's order).

Every invocation writes one structured log line (fields in `extra`), on failure too, and
records its metrics and a PRODUCER span per batch through `cosmos_outbox.telemetry`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol

from cosmos_outbox import clock
from cosmos_outbox._mapper import claim_check, payload_name, quarantine_notice, to_message
from cosmos_outbox._message_limits import unsendable
from cosmos_outbox._quarantine import Quarantine
from cosmos_outbox._records import (
    FeedItem,
    NotAnEvent,
    OutboxMessage,
    OutboxRecord,
    Release,
    Unreadable,
)
from cosmos_outbox._relay.health import RelayHealth
from cosmos_outbox._relay.scheduled import step
from cosmos_outbox._sync_over_async import as_async
from cosmos_outbox.errors import PayloadStoreError, PublishFailedError, RelayNotReadyError
from cosmos_outbox.ports import (
    AsyncMessagePublisher,
    AsyncPayloadStore,
    AsyncScheduleQueue,
    MessageBatch,
    MessagePublisher,
    PayloadStore,
    ScheduleQueue,
)
from cosmos_outbox.settings import DEFAULT_PAYLOAD_MAX_BYTES
from cosmos_outbox.telemetry import RelayTelemetry, SentEvent, error_type

#: The log category operators filter on (kept across module moves).
logger = logging.getLogger("cosmos_outbox.relay")


@dataclass
class RelayReport:
    received: int = 0
    sent: int = 0
    batches: int = 0
    skipped: int = 0
    quarantined: list[str] = field(default_factory=list)
    #: the ids of the events sent (claim checks included; notices not)
    sent_ids: set[str] = field(default_factory=set)
    #: the first event of the batch whose send (or claim check) failed, when one did
    stuck_on: str | None = None
    #: why each quarantined event was set aside, by event id
    reasons: dict[str, str] = field(default_factory=dict)
    #: quarantine notices published (not counted in `sent`)
    notices: int = 0
    #: events sent as a claim check (counted in `sent` too), and their bodies' bytes
    offloaded: int = 0
    offloaded_bytes: int = 0
    max_lag_ms: float | None = None
    #: scheduled events not due (released) yet whose release was scheduled, and cancelled ones
    #: skipped (never sent)
    scheduled: int = 0
    cancelled: int = 0


class Relay:
    """Relays outbox records to the publisher. With `payloads` (the claim check), an event too
    large for a message is offloaded when its body is at most `max_payload_bytes`; without, it
    is quarantined. Scheduled events' releases go to `schedule` (without one, a scheduled event
    is quarantined). The async API's (the sync API runs it over sync adapters)."""

    def __init__(
        self,
        publisher: AsyncMessagePublisher | MessagePublisher,
        quarantine: Quarantine,
        telemetry: RelayTelemetry,
        *,
        payloads: AsyncPayloadStore | PayloadStore | None = None,
        max_payload_bytes: int = DEFAULT_PAYLOAD_MAX_BYTES,
        health: RelayHealth | None = None,
        topic: str = "",
        schedule: AsyncScheduleQueue | ScheduleQueue | None = None,
    ) -> None:
        self._publisher = as_async(publisher)
        self._schedule = as_async(schedule) if schedule is not None else None
        self._quarantine = quarantine
        self._telemetry = telemetry
        self._payloads = (
            as_async(payloads) if payloads is not None and max_payload_bytes > 0 else None
        )
        self._max_payload = max_payload_bytes
        self._health = health
        self._topic = topic
        #: what it needs was found (`_preflight`): asked until it is, then not again
        self._ready = False

    async def relay(
        self,
        items: Iterable[FeedItem],
        *,
        rewrite: Callable[[OutboxMessage], OutboxMessage] | None = None,
    ) -> RelayReport:
        """Relay the items (see the module). `rewrite` changes each event's message before it
        is sent (a re-drive's: a MessageId of its own, the event id kept as its CloudEvents
        id); notices are sent as they are."""
        report = RelayReport()
        listed = list(items)
        try:
            if not self._ready:
                await self._preflight()
            await self._relay(listed, report, rewrite)
        except Exception as exc:
            self._telemetry.failed(exc)
            _log(report, exc)
            if self._health is not None:
                await self._health.blocked(
                    report.stuck_on or _first_event(listed), f"{error_type(exc)}: {exc}"
                )
            raise
        _log(report, None)
        if self._health is not None and report.sent_ids:
            await self._health.sent(report.sent_ids)
        return report

    async def check(self) -> str | None:
        """What the relay needs, checked now unless it was found already (the backlog timer
        asks at each tick, so a relay that cannot start says so within a minute of the app's
        start, before any event): None when ready; else why not, which is logged in one line
        and recorded in the relay's status (`/outbox/status`, `/health`). Never raises."""
        if self._ready:
            return None
        try:
            await self._preflight()
        except RelayNotReadyError as exc:
            await self.not_ready(exc)
            return str(exc)
        return None

    async def probe(self) -> None:
        """Does Service Bus answer? One round trip that changes nothing (the publisher's
        `probe`): raises when it does not."""
        await self._publisher.probe()

    async def ready(self) -> None:
        """Everything the relay needs was found (by `check` and the backlog's read of its
        lease container): a "not ready" record an earlier tick left is cleared. No round trip
        once none can exist."""
        if self._health is not None:
            await self._health.sent(set())

    async def not_ready(self, exc: RelayNotReadyError) -> None:
        """Say that the relay cannot start, and why: one log line, and its status."""
        logger.error("relay not ready: %s", exc, extra={"outbox.relay_ready": False})
        if self._health is not None:
            await self._health.blocked(None, f"{error_type(exc)}: {exc}")

    async def _preflight(self) -> None:
        """What the relay needs, checked before it first relays (RelayNotReadyError naming
        what is missing and the fix, in the log and in the relay's status): the topic (a
        sender's link opens), and the claim check's payload container when there is one."""
        await _sender_opens(
            self._publisher.create_batch,
            f"topic {self._topic!r}",
            "Check that the topic exists (the deploy templates and funcstack.json's UserConfig "
            "declare it), that SERVICEBUS_TOPIC names it, and that the app's identity may send "
            "to it (Azure Service Bus Data Sender)",
        )
        if self._schedule is not None:
            await _sender_opens(
                self._schedule.check,
                "schedule queue",
                "Check that the queue SERVICEBUS_SCHEDULE_QUEUE names exists and that the app's "
                "identity may send to it and receive from it (Azure Service Bus Data Sender and "
                "Data Receiver)",
            )
        if self._payloads is not None:
            try:
                await self._payloads.check()
            except PayloadStoreError as exc:
                raise RelayNotReadyError(str(exc)) from exc
            logger.info(
                "relay: the claim check's payload container was found",
                extra={"outbox.claim_check": True},
            )
        self._ready = True

    async def send(self, messages: Sequence[OutboxMessage]) -> int:
        """Send `messages` as they are (the notices of an operator's action), in order, in the
        relay's batches, through its telemetry; how many were sent. Raises when the broker does
        not take them (or one cannot fit a message: PublishFailedError)."""
        report = RelayReport()

        async def send(
            batch: MessageBatch, events: list[SentEvent], notices: int, offloaded: list[int]
        ) -> None:
            await self._send(batch, events, report, notices, offloaded)

        out = _Outgoing(self._publisher, send, report)
        for message in messages:
            if not await out.add(message, SentEvent(None, None), notice=True):
                raise PublishFailedError(
                    f"message {message.message_id} ({message.subject}) does not fit a message"
                )
        await out.flush()
        return report.notices

    async def _relay(
        self,
        items: Iterable[FeedItem],
        report: RelayReport,
        rewrite: Callable[[OutboxMessage], OutboxMessage] | None = None,
    ) -> None:
        events: dict[str, OutboxRecord | Unreadable] = {}
        sent_events: dict[str, SentEvent] = {}
        waiting: list[OutboxRecord] = []  # scheduled, not released yet
        oldest: float | None = None  # creation time of the oldest event, epoch seconds
        for item in items:
            report.received += 1
            match item:
                case NotAnEvent():
                    report.skipped += 1
                case Unreadable():
                    events[item.event_id] = item
                case OutboxRecord() if item.deliver_at is not None and item.released_at is None:
                    if item.cancelled_at is not None:
                        report.cancelled += 1
                    else:
                        waiting.append(item)
                case OutboxRecord():
                    events[item.event_id] = item
                    sent = sent_events[item.event_id] = _sent_event(item)
                    if sent.created_at is not None and (oldest is None or sent.created_at < oldest):
                        oldest = sent.created_at
        if oldest is not None:
            report.max_lag_ms = (time.time() - oldest) * 1000

        async def send(
            batch: MessageBatch, events: list[SentEvent], notices: int, offloaded: list[int]
        ) -> None:
            await self._send(batch, events, report, notices, offloaded)

        out = _Outgoing(self._publisher, send, report)
        if waiting:
            await self._schedule_releases(waiting, report, out)
        for event in _in_session_order(events.values()):
            if isinstance(event, Unreadable):
                await self._put_aside(event, event.reason, report, out)
                continue
            message = to_message(event)
            if rewrite is not None:
                message = rewrite(message)
            never = unsendable(message)
            if never is not None:  # no retry can send it: its lease moves on without it
                await self._put_aside(event, never, report, out)
                continue
            if not await out.add(message, sent_events[event.event_id], notice=False):
                await self._offload(event, message, sent_events[event.event_id], report, out)
        await out.flush()

    async def _schedule_releases(
        self, waiting: list[OutboxRecord], report: RelayReport, out: _Outgoing
    ) -> None:
        """Each scheduled event not released yet: its release scheduled for its due time (or a
        step towards it), or, without a schedule queue, the event quarantined (no release can
        ever come: the reason says what to set; a replay relays it again)."""
        if self._schedule is None:
            for event in waiting:
                await self._put_aside(
                    event,
                    "a scheduled event (deliverAt) and no schedule queue where the relay runs: "
                    "set SERVICEBUS_SCHEDULE_QUEUE to a Service Bus queue, then replay it",
                    report,
                    out,
                )
            return
        now = clock.now()
        releases = [
            Release(str(event.partition_key), event.event_id, step(due, now))
            for event in waiting
            if (due := event.deliver_at) is not None
        ]
        report.stuck_on = releases[0].event_id
        await self._schedule.schedule(releases)
        report.stuck_on = None
        report.scheduled += len(releases)

    async def _offload(
        self,
        event: OutboxRecord,
        message: OutboxMessage,
        sent: SentEvent,
        report: RelayReport,
        out: _Outgoing,
    ) -> None:
        """An event too large for a message: its claim-check message in its place, its body
        stored before the batch holding that message can be sent; or quarantined."""
        size = len(message.body)
        too_large = f"message of {size} bytes is larger than the entity's message size limit"
        if self._payloads is None:
            await self._put_aside(
                event,
                f"{too_large} (no claim check: no payload storage, or "
                "OUTBOX_PAYLOAD_MAX_BYTES is 0)",
                report,
                out,
            )
            return
        if size > self._max_payload:
            await self._put_aside(
                event,
                f"{too_large}, and its body is larger than "
                f"OUTBOX_PAYLOAD_MAX_BYTES ({self._max_payload}) for a claim check",
                report,
                out,
            )
            return
        name = payload_name(event)
        claim = claim_check(message, self._payloads.reference(name))
        if not await out.add(claim, sent, notice=False, offloaded=size):
            await self._put_aside(
                event,
                f"{too_large}, and its claim-check message does not fit "
                "either (its properties are too large)",
                report,
                out,
            )
            return
        # Stored now, before `out` can send the batch holding the claim check: a failure
        # raises, nothing of that batch is sent, and the retry stores the same bytes again.
        report.stuck_on = event.event_id
        await self._payloads.put(name, message.body, content_type=message.content_type)
        report.stuck_on = None
        logger.info(
            "relay offloaded event %s (%d bytes) to %s",
            event.event_id,
            size,
            claim.dataref,
            extra={
                "outbox.event_id": event.event_id,
                "outbox.offloaded_bytes": size,
                "outbox.dataref": claim.dataref,
            },
        )

    async def _send(
        self,
        batch: MessageBatch,
        events: list[SentEvent],
        report: RelayReport,
        notices: int,
        offloaded: list[int],
    ) -> None:
        await self._telemetry.send(events, lambda: self._publisher.send(batch))
        report.sent += len(batch) - notices
        report.notices += notices
        report.batches += 1
        if offloaded:
            self._telemetry.offloaded(len(offloaded), sum(offloaded))
            report.offloaded += len(offloaded)
            report.offloaded_bytes += sum(offloaded)

    async def _put_aside(
        self, event: OutboxRecord | Unreadable, reason: str, report: RelayReport, out: _Outgoing
    ) -> None:
        """Quarantine the event, then publish its notice in its session, where the event would
        have been (after the earlier versions, before the later ones)."""
        logger.error(
            "relay quarantined event %s: %s",
            event.event_id,
            reason,
            extra={"outbox.event_id": event.event_id, "outbox.reason": reason},
        )
        await self._quarantine.put(event, reason=reason)
        self._telemetry.quarantined()
        report.quarantined.append(event.event_id)
        report.reasons[event.event_id] = reason
        notice = quarantine_notice(event, reason)
        if notice is not None and not await out.add(
            notice, SentEvent(getattr(event, "traceparent", None), None), notice=True
        ):
            logger.error(
                "the quarantine notice of event %s does not fit in a message", event.event_id
            )


class _SendBatch(Protocol):
    """How a filled batch leaves (the relay's: telemetry, then the publisher; counted in the
    report): the batch, the events it holds, how many of its messages are notices, and the
    sizes of the bodies its claim checks stand for."""

    def __call__(
        self, batch: MessageBatch, events: list[SentEvent], notices: int, offloaded: list[int]
    ) -> Awaitable[None]: ...


class _Outgoing:
    """The batch being filled, in order; a new one whenever it is full. It talks to the relay
    through two things only: the publisher's port (new batches, a fresh link) and `send`."""

    def __init__(
        self, publisher: AsyncMessagePublisher, send: _SendBatch, report: RelayReport
    ) -> None:
        self._publisher, self._send, self._report = publisher, send, report
        self._batch: MessageBatch | None = None
        self._events: list[SentEvent] = []
        self._ids: list[str] = []
        self._notices = 0
        self._offloaded: list[int] = []
        self._refreshed = False

    async def add(
        self,
        message: OutboxMessage,
        event: SentEvent,
        *,
        notice: bool,
        offloaded: int | None = None,
    ) -> bool:
        """Add the message to the current batch, or to a new one when that is full; False
        when it does not fit even in an empty batch. `offloaded`: the size of the body a
        claim-check message stands for."""
        if self._batch is None:
            self._batch = await self._publisher.create_batch()
        if not self._batch.try_add(message) and not await self._fits_a_new_batch(message):
            return False
        self._events.append(event)
        if not notice:
            self._ids.append(message.event_id or message.message_id)
        self._notices += notice
        if offloaded is not None:
            self._offloaded.append(offloaded)
        return True

    async def _fits_a_new_batch(self, message: OutboxMessage) -> bool:
        """The current batch is full: the message in a new one. False when it does not fit an
        empty batch, even on a fresh link when the publisher may learn a larger limit there
        (asked once per invocation: a namespace moved to Premium since the link opened)."""
        publisher = self._publisher
        assert self._batch is not None
        # A message whose body alone is as large as a batch can never fit one of this link:
        # the batch being filled is kept (the claim check that stands for it goes in it too).
        if len(self._batch) and len(message.body) < self._batch.max_size_in_bytes:
            await self.flush()
            self._batch = await publisher.create_batch()
            if self._batch.try_add(message):
                return True
        if self._refreshed:
            return False
        self._refreshed = True
        if not await publisher.refresh():
            return False
        await self.flush()  # what the batch being filled holds goes first, in order
        self._batch = await publisher.create_batch()
        return self._batch.try_add(message)

    async def flush(self) -> None:
        if self._batch is not None and len(self._batch):
            if self._ids:
                self._report.stuck_on = self._ids[0]
            await self._send(self._batch, self._events, self._notices, self._offloaded)
            self._report.sent_ids.update(self._ids)
            self._report.stuck_on = None
        self._batch, self._events, self._ids = None, [], []
        self._notices, self._offloaded = 0, []


def _first_event(items: list[FeedItem]) -> str | None:
    """The first event an invocation holds (what a relay that cannot start is stuck on)."""
    return next((item.event_id for item in items if not isinstance(item, NotAnEvent)), None)


def _sent_event(record: OutboxRecord) -> SentEvent:
    """What telemetry knows of an event sent: its trace context, and since when it waited to be
    sent (its creation; a scheduled event's due time, when that is later)."""
    created = None if record.created_at is None else _aware(record.created_at).timestamp()
    if record.deliver_at is not None:
        due = _aware(record.deliver_at).timestamp()
        created = due if created is None else max(created, due)
    return SentEvent(record.traceparent, created)


def _log(report: RelayReport, exc: Exception | None) -> None:
    """One line per invocation, text for humans and the same values as fields (`extra`), so
    Application Insights keeps them as custom dimensions; written on failure too."""
    lag = None if report.max_lag_ms is None else round(report.max_lag_ms)
    fields: dict[str, object] = {
        "outbox.outcome": "failed" if exc else "ok",
        "outbox.received": report.received,
        "outbox.sent": report.sent,
        "outbox.batches": report.batches,
        "outbox.skipped": report.skipped,
        "outbox.quarantined": len(report.quarantined),
        "outbox.offloaded": report.offloaded,
        "outbox.max_lag_ms": lag,
        "outbox.scheduled": report.scheduled,
        "outbox.cancelled": report.cancelled,
    }
    if exc is not None:
        fields["error.type"] = error_type(exc)
    logger.log(
        logging.ERROR if exc else logging.INFO,
        "relay invocation %s: received=%d sent=%d batches=%d skipped=%d quarantined=%d "
        "offloaded=%d max_lag_ms=%s%s",
        fields["outbox.outcome"],
        report.received,
        report.sent,
        report.batches,
        report.skipped,
        len(report.quarantined),
        report.offloaded,
        lag,
        f" error.type={fields['error.type']}" if exc else "",
        extra=fields,
    )


def _in_session_order(
    events: Iterable[OutboxRecord | Unreadable],
) -> list[OutboxRecord | Unreadable]:
    """Sessions in order of first appearance; versions ascending inside each session. An
    unreadable event goes where its version says, or first in its session when it has none;
    one whose aggregate cannot be read is a session of its own."""
    first_seen: dict[str, int] = {}
    listed = list(events)
    for event in listed:
        first_seen.setdefault(_session(event), len(first_seen))
    return sorted(listed, key=lambda e: (first_seen[_session(e)], _version(e)))


def _session(event: OutboxRecord | Unreadable) -> str:
    if isinstance(event, OutboxRecord):
        return event.aggregate_id
    return event.aggregate_id if event.aggregate_id else f"\0{event.event_id}"


def _version(event: OutboxRecord | Unreadable) -> int:
    return event.version if event.version is not None else 0


def _aware(at: datetime) -> datetime:
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


async def _sender_opens(open_: Callable[[], Awaitable[object]], entity: str, fix: str) -> None:
    """`open_` opens a sender's link to `entity` (RelayNotReadyError if not: what failed, and
    `fix`)."""
    try:
        await open_()
    except Exception as exc:
        raise RelayNotReadyError(
            f"the relay cannot open a sender to its {entity}: {error_type(exc)}: "
            f"{str(exc)[:300]}. {fix}"
        ) from exc
