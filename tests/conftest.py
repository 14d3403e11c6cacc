"""Shared fixtures. The Functions app is indexed once per process (`get_functions()` may be
called only once), and its dependencies are replaced by in-memory fakes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from azure.functions.decorators.function_app import Function
from hypothesis import settings

from application.outbox.relay import Relay
from entrypoints import bootstrap
from entrypoints.outbox import OutboxDependencies
from tests.fakes import (
    FakePublisher,
    FixedBacklog,
    InMemoryContactList,
    InMemoryEventStore,
    InMemoryQuarantine,
    InMemoryStore,
    uow_factory,
)

# No deadline on generated examples: a per-example time limit is a timed assertion, and under
# `make test`'s parallel jobs an example may wait for a core (speed lives in `make bench`).
settings.register_profile("suite", deadline=None)
settings.load_profile("suite")

_INDEXED: dict[str, Function] | None = None


def indexed_functions() -> dict[str, Function]:
    global _INDEXED
    if _INDEXED is None:
        import function_app

        _INDEXED = {str(f.get_function_name()): f for f in function_app.app.get_functions()}
    return _INDEXED


@pytest.fixture(scope="session")
def functions() -> dict[str, Function]:
    return indexed_functions()


class FakeWorld:
    def __init__(self) -> None:
        self.store = InMemoryStore()
        self.publisher = FakePublisher()
        self.quarantine = InMemoryQuarantine(self.store)
        self.backlog = FixedBacklog()
        self.deps = bootstrap.Dependencies(
            uow=uow_factory(self.store),
            contacts=lambda: InMemoryContactList(self.store),
            outbox=OutboxDependencies(
                relay_factory=lambda: Relay(self.publisher, self.quarantine),
                quarantine=lambda: self.quarantine,
                events=lambda: InMemoryEventStore(self.store),
                backlog=lambda: self.backlog,
                tokens=bootstrap.quarantine_tokens("local-tests"),
            ),
        )


@pytest.fixture
def world() -> Iterator[FakeWorld]:
    w = FakeWorld()
    bootstrap.override(w.deps)
    try:
        yield w
    finally:
        bootstrap.override(None)
