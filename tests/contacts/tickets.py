"""Event documents of another aggregate type (a ticket), as another app on the same container
would store them: raw documents, no classes (the relay and the subscriber read documents, not
this app's event classes). The package's own tests drive a ticket aggregate end to end
(packages/cosmos-outbox/tests/tickets.py)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any


def ticket_history(n_changes: int, *, ttl_seconds: int = 60) -> list[dict[str, Any]]:
    """The event documents of one ticket: opened, then retitled `n_changes` times."""
    ticket_id = str(uuid.uuid4())
    documents = []
    for version in range(1, n_changes + 2):
        event_id = str(uuid.uuid4())
        action = "TicketOpenedEvent" if version == 1 else "TicketRetitledEvent"
        documents.append(
            {
                "id": event_id,
                "partitionKey": ticket_id,
                "type": "domainEvent",
                "aggregateType": "ticket",
                "source": "/tickets",
                "ttl": ttl_seconds,
                "data": {
                    "id": event_id,
                    "ticketId": ticket_id,
                    "version": version,
                    "createdAt": datetime.now(UTC).isoformat(),
                    "traceparent": None,
                    "action": action,
                    "title": f"Printer on fire, take {version}",
                },
            }
        )
    return documents
