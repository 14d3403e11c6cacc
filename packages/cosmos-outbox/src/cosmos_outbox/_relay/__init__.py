"""The relay, generic over aggregates: the relay itself (`forwarding`: change-feed documents in,
Service Bus batches out, poison events quarantined with a notice), scheduled events' releases
(`scheduled`), the backlog estimate (`backlog`) and its last hour (`backlog_history`), and the
relay's health record (`health`), written once as the async API's coroutines; its telemetry is
the public `cosmos_outbox.telemetry`. Nothing here knows a particular aggregate, nor what runs
it: `cosmos_outbox._wiring` builds it, `cosmos_outbox._blueprints` serves it as Functions and
`cosmos_outbox._relay_process` as a process of its own."""
