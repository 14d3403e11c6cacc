"""The bookkeeping every repository implementation shares (the Cosmos adapter and the tests'
in-memory fake): which aggregates a unit of work loaded or added, and the etag of each."""

from __future__ import annotations

import abc
from collections.abc import Iterator

from cosmos_outbox.domain import Aggregate, DomainEvent
from cosmos_outbox.ports import Repository


class TrackingRepository[A: Aggregate](Repository[A]):
    """Tracks what this unit of work loaded or added, and the etag each was read or written
    with. Subclasses only read."""

    def __init__(self, kind: type[A]) -> None:
        self.kind = kind
        self.tracked: dict[str, A] = {}
        self.new: set[str] = set()
        self.etags: dict[str, str] = {}

    def add(self, aggregate: A) -> None:
        self.tracked[aggregate.id] = aggregate
        self.new.add(aggregate.id)

    def get(self, aggregate_id: str) -> A:
        aggregate, etag = self.read(aggregate_id)
        self.tracked[aggregate.id] = aggregate
        self.etags[aggregate.id] = etag
        return aggregate

    @abc.abstractmethod
    def read(self, aggregate_id: str) -> tuple[A, str]:
        """The stored aggregate and its etag. Raises NotFoundError."""

    def etag(self, aggregate_id: str) -> str:
        return self.etags[aggregate_id]

    def pending(self) -> Iterator[tuple[A, list[DomainEvent], str | None]]:
        """Each aggregate to write, the events it raised, and the etag to condition on (None
        for a new one). Unchanged aggregates are skipped."""
        for aggregate_id, aggregate in self.tracked.items():
            events = aggregate.collect_events()
            if events or aggregate_id in self.new:
                etag = None if aggregate_id in self.new else self.etags[aggregate_id]
                yield aggregate, events, etag

    def written(self, aggregate_id: str, etag: str) -> None:
        self.new.discard(aggregate_id)
        self.etags[aggregate_id] = etag

    def forget(self) -> None:
        for aggregate in self.tracked.values():
            aggregate.collect_events()
        self.tracked.clear()
        self.new.clear()
