"""A re-drive as a bulk operation's items (`RedriveItems`): the stored events a re-drive of its
scope selects (`RedriveOperators.scope`: created since its `since`, of its aggregate type and
aggregate, discarded ones left out), those stored when it began (its limit is that time: events
stored later are not the operation's), per aggregate in version order. Each batch is sent through
the relay, as a page of the paged re-drive is, under the operation's id as the re-drive id: an
event's MessageId is `redrive_message_id(event id, operation id)`, the same at every attempt, so
a batch acted on again after a worker died mid-batch sends what the first attempt sent under the
same MessageIds, which the topic's duplicate detection drops: each event reaches the topic once.
Keys are `[aggregate id, version, event id]` as JSON (their order is the re-drive's)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from cosmos_outbox._mapper import OperationCounts
from cosmos_outbox._records import OutboxRecord, Unreadable
from cosmos_outbox.operations._bulk._items import PASSING, ItemOutcome, Items, Picked
from cosmos_outbox.operations._redrive import (
    RedriveOperators,
    operation_will_see,
    redrive_key,
    rewrite,
)
from cosmos_outbox.telemetry import error_type

if TYPE_CHECKING:
    from cosmos_outbox._relay.forwarding import Relay

__all__ = ["RedriveItems"]

Event = OutboxRecord | Unreadable


def _key_text(event: Event) -> str:
    return json.dumps(list(redrive_key(event)), separators=(",", ":"))


def _key_of(text: str) -> tuple[str, int, str]:
    aggregate_id, version, event_id = json.loads(text)
    return str(aggregate_id), int(version), str(event_id)


class RedriveItems(Items):
    """The events of a re-drive operation `redrive_id` (see the module), sent by `relay()` (the
    outbox's relay) to `subscription` (None: the topic)."""

    def __init__(
        self,
        redrive: RedriveOperators,
        relay: Callable[[], Relay],
        redrive_id: str,
        *,
        since: datetime,
        aggregate_type: str | None,
        aggregate_id: str | None,
        subscription: str | None,
        clock: Callable[[], datetime],
    ) -> None:
        self._redrive, self._relay, self._id = redrive, relay, redrive_id
        self._since, self._type, self._aggregate = since, aggregate_type, aggregate_id
        self._subscription, self._clock = subscription, clock

    async def _events(self, limit: str | None) -> list[Event]:
        until = datetime.fromisoformat(limit) if limit else None
        events, _ = await self._redrive.scope(self._since, self._type, self._aggregate, until=until)
        return events

    async def count(self) -> tuple[int, str | None]:
        now = self._clock().isoformat()
        return len(await self._events(now)), now

    async def next(
        self, cursor: str | None, limit: str | None, size: int
    ) -> tuple[list[Picked], str | None]:
        after = _key_of(cursor) if cursor else None
        pending = [e for e in await self._events(limit) if after is None or redrive_key(e) > after]
        picked = pending[:size]
        return [Picked(_key_text(e)) for e in picked], (_key_text(picked[-1]) if picked else cursor)

    async def act(self, keys: Sequence[str]) -> list[ItemOutcome]:
        wanted = set(keys)
        found = [e for e in await self._events(None) if _key_text(e) in wanted]
        present = {_key_text(e) for e in found}
        # gone: expired or discarded since it was picked (nothing sent for it)
        outcomes = [ItemOutcome(k, "gone") for k in keys if k not in present]
        if not found:
            return outcomes
        try:
            message = rewrite(self._id, self._subscription)
            report = await self._relay().relay(found, rewrite=message)
        except PASSING as exc:
            why = f"{error_type(exc)}: {exc!s:.200}"
            return outcomes + [ItemOutcome(_key_text(e), "later", why=why) for e in found]
        except Exception as exc:  # a send that failed: tried again, failed after its patience
            why = f"re-drive failed to send: {error_type(exc)}: {exc!s:.200}"
            return outcomes + [ItemOutcome(_key_text(e), "later", why=why) for e in found]
        quarantined = set(report.quarantined)
        for event in found:
            key = _key_text(event)
            if event.event_id in quarantined:
                reason = report.reasons.get(event.event_id, "set aside")
                why = f"{event.event_id}: quarantined again: {reason}"
                outcomes.append(ItemOutcome(key, "failed", why=why))
            else:  # sent; or scheduled (its release scheduled again), or cancelled (never sent)
                outcomes.append(ItemOutcome(key, "done", sent=event.event_id in report.sent_ids))
        return outcomes

    def will_see(self, counts: OperationCounts) -> str:
        return operation_will_see(self._subscription, sent=counts.sent, failed=counts.failed)
