"""The write path: the transaction and its staging, the unit of work and the aggregate service,
the Idempotency-Key's records, the sequences, the cancels (`sync` the sync API over them)."""
