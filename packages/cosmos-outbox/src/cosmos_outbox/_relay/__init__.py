"""The relay, generic over aggregates: the relay itself (`forwarding`: change-feed documents in,
Service Bus batches out, poison events quarantined with a notice), the backlog estimate
(`backlog`), the relay's health record (`health`) and the operators' use cases
(`operator_actions`), written once as the async API's coroutines; its telemetry is the public
`cosmos_outbox.telemetry`. Nothing here knows a particular aggregate; `cosmos_outbox._blueprints`
serves it as Functions."""
