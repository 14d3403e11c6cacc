"""The relay, generic over aggregates: outbox records and their messages (`records`), the relay
itself (change-feed documents in, Service Bus batches out, poison events quarantined with a
notice), the backlog estimate (`backlog`), telemetry (`telemetry`: the metric names), the
operators' use cases (`operators`) and the ports they need (`ports`). Nothing here knows a
particular aggregate; `cosmos_outbox._blueprints.outbox` serves it as a Functions blueprint."""

from __future__ import annotations

from cosmos_outbox._relay.relay import Relay, RelayReport

__all__ = ["Relay", "RelayReport"]
