"""The Orders app: an `Order` aggregate and its events (`orders.domain`), its HTTP API
(`orders.api`), on cosmos-outbox."""
