"""The subscriber's side of the outbox: a read model (projection) of contacts kept from the
events on the topic, each event applied exactly once and in version order (docs/subscriber.md)."""
