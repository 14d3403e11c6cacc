"""The contact use cases beyond the generic ones (create, read, change:
`cosmos_outbox.aggregates.AggregateService`): commands (request bodies), views (responses), and
the one contact-specific port (the list of live contacts)."""
