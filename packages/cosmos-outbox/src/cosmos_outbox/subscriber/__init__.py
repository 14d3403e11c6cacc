"""The consuming side of the outbox: messages read as CloudEvents and checked to be outbox
events (`events`), a projector that applies each event exactly once, in version order, with an
inbox record in the same transactional batch, gaps held or recorded and versions an operator
gave up moved past (`projector`), its status (`status`: what it holds, why, and what releases
it), and tolerant dispatch that records and skips what a subscriber does not handle
(`dispatch`).

    projector = Projector(container, OrderProjection(), inbox_ttl_seconds=14 * 86400)
    dispatcher = Dispatcher("order", lambda: projector)

    @app.service_bus_topic_trigger(..., is_sessions_enabled=True)
    def project(msg: func.ServiceBusMessage) -> None:
        dispatcher.handle(msg)
"""

from __future__ import annotations

from cosmos_outbox.subscriber._bookkeeping import (
    ACCEPTED_GAP_TYPE,
    GAP_TYPE,
    HELD_TYPE,
    INBOX_TYPE,
    held_id,
    inbox_id,
)
from cosmos_outbox.subscriber._events import (
    DISCARD_NOTICE,
    QUARANTINE_NOTICE,
    IncomingEvent,
    UnreadableEventError,
    from_message,
)
from cosmos_outbox.subscriber._projector import (
    MAX_HELD_PER_BATCH,
    Outcome,
    Projection,
    Result,
)
from cosmos_outbox.subscriber._status import (
    AcceptedGap,
    HeldAggregate,
    SubscriberStatus,
    subscriber_status,
)
from cosmos_outbox.subscriber._sync import Dispatcher, Projector

__all__ = [
    "ACCEPTED_GAP_TYPE",
    "DISCARD_NOTICE",
    "GAP_TYPE",
    "HELD_TYPE",
    "INBOX_TYPE",
    "MAX_HELD_PER_BATCH",
    "QUARANTINE_NOTICE",
    "AcceptedGap",
    "Dispatcher",
    "HeldAggregate",
    "IncomingEvent",
    "Outcome",
    "Projection",
    "Projector",
    "Result",
    "SubscriberStatus",
    "UnreadableEventError",
    "from_message",
    "held_id",
    "inbox_id",
    "subscriber_status",
]
