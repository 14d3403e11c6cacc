"""The relay, generic over aggregates: the relay itself (`relay`: change-feed documents in,
Service Bus batches out, poison events quarantined with a notice), the backlog estimate
(`backlog`), telemetry (`telemetry`: the metric names) and the operators' use cases
(`operators`), written once as the async API's coroutines. Nothing here knows a particular
aggregate; `cosmos_outbox._blueprints` serves it as Functions."""
