"""cosmos-outbox: the transactional outbox on Azure Cosmos DB and Service Bus, for Azure
Functions apps in Python.

An aggregate and the events its change raised are written in one Cosmos DB transactional batch;
a change-feed trigger relays the events to a Service Bus topic with duplicate detection
(MessageId = event id, SessionId = aggregate id); event documents expire by TTL.

The modules, from the inside out:

- `cosmos_outbox._domain`: `Aggregate`, `DomainEvent`, the event catalogue; `cosmos_outbox._text`:
  text fields whose published schema is what they validate;
- `cosmos_outbox.ports`, `cosmos_outbox._service`, `cosmos_outbox.errors`: the unit of work, the
  use cases every aggregate has, the errors they report;
- `cosmos_outbox.cosmos` (Cosmos DB), `cosmos_outbox.servicebus` (Service Bus),
  `cosmos_outbox._documents` (the stored documents), `cosmos_outbox._relay` (change feed to
  topic, quarantine, backlog, telemetry, operators);
- `cosmos_outbox.http` (operations declared once, problems, paging, conditional requests, the
  route helper), `cosmos_outbox._blueprints` (the outbox's and the docs' Functions blueprints),
  `cosmos_outbox._outbox` (`Outbox`: the composition root an app builds its functions from);
- `cosmos_outbox.subscriber` (the consuming side: CloudEvents in, inbox, tolerant dispatch);
- `cosmos_outbox.testing` (fakes, contract suites to subclass, checks driven by the aggregates).

This module imports only the domain core, so importing the package costs little.
"""

from __future__ import annotations

from cosmos_outbox._domain import Aggregate, DomainError, DomainEvent, event_aliases

__version__ = "0.1.0"

__all__ = ["Aggregate", "DomainError", "DomainEvent", "__version__", "event_aliases"]
