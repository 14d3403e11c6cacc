"""The write path's suite: one suite for both doors of the one write path (a transaction, an
aggregate's unit of work and service), as they share one batch assembly, one numbering rule,
one limit check and one Idempotency-Key protocol (`cosmos_outbox._write`). Its parts can be run
alone (`TransactionContract`, `UnitOfWorkContract`, `IdempotencyContract`); a store of your own
proves itself by passing the whole of it."""

from __future__ import annotations

from cosmos_outbox_testing.contracts._idempotency import IdempotencyContract
from cosmos_outbox_testing.contracts._transaction import TransactionContract
from cosmos_outbox_testing.contracts._unit_of_work import UnitOfWorkContract


class WritePathContract(TransactionContract, UnitOfWorkContract, IdempotencyContract):
    """The write path over the world's store: a transaction's documents and events, an
    aggregate's change and its events, each in one transactional batch, all or nothing, within
    Cosmos DB's limits; events numbered in order with no gap or repeat under racing writers; an
    Idempotency-Key's retry answered from its record. Needs a `world` (a `StoreWorld`) and an
    `example` (`examples(AggregateExample(...))`)."""
