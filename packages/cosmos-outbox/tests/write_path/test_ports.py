"""The ports declare which of their methods stay sync in the async ports (`stays_sync`: no I/O),
and the sync API's bridge (`as_async`) reads that declaration: every other method of an async
port is a coroutine, and a sync adapter's declared method is handed on as it is."""

from __future__ import annotations

import inspect

from cosmos_outbox.ports import (
    STAYS_SYNC,
    AsyncBacklogEstimator,
    AsyncDocumentStore,
    AsyncMessagePublisher,
    AsyncPayloadStore,
    MessageBatch,
    PayloadStore,
    sync_methods,
)
from cosmos_outbox_testing import InMemoryPayloadStore, as_async, run_sync

ASYNC_PORTS = (AsyncDocumentStore, AsyncMessagePublisher, AsyncPayloadStore, AsyncBacklogEstimator)


def test_an_async_ports_sync_methods_are_the_declared_ones() -> None:
    for port in ASYNC_PORTS:
        for name, member in vars(port).items():
            if name.startswith("_") or not inspect.isfunction(member):
                continue
            declared = getattr(member, STAYS_SYNC, False)
            assert inspect.iscoroutinefunction(member) is not declared, (
                f"{port.__name__}.{name}: a sync method of an async port is declared "
                "@stays_sync, every other one is async"
            )


def test_the_declared_methods_are_the_reference_and_the_batchs_try_add() -> None:
    assert sync_methods() == {"reference", "try_add"}
    assert "reference" in vars(PayloadStore) and "try_add" in vars(MessageBatch)


def test_as_async_hands_a_declared_method_on_as_it_is_and_awaits_the_others() -> None:
    store = InMemoryPayloadStore()
    view = as_async(store)
    assert view.reference("a/b/c") == store.reference("a/b/c")  # a string, not a coroutine
    stored = view.put("a/b/c", b"{}", content_type="application/json")
    assert inspect.iscoroutine(stored)
    run_sync(stored)
    assert store.bodies
