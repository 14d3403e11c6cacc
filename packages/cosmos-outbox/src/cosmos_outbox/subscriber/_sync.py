"""The subscriber's sync API: `Projector` and `Dispatcher` run the async ones' coroutines to
their end in the caller's thread (`run_sync`), over the SDKs' sync clients: no logic here, as
`cosmos_outbox._write.sync` is for the write path."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Unpack

import azure.functions as func

from cosmos_outbox._sync_over_async import run_sync
from cosmos_outbox.ports import DocumentStore, PayloadStore
from cosmos_outbox.subscriber._dispatch import AsyncDispatcher, DispatcherOptions, settings_payloads
from cosmos_outbox.subscriber._events import IncomingEvent
from cosmos_outbox.subscriber._projector import AsyncProjector, Projection, Result
from cosmos_outbox.subscriber._status import SubscriberStatus

__all__ = ["Dispatcher", "Projector"]


class Projector:
    """`AsyncProjector`, sync: over the SDK's sync client (`cosmos_outbox.cosmos.
    CosmosDocumentStore`, or the sync container itself)."""

    def __init__(
        self, store: DocumentStore | Any, projection: Projection, *, inbox_ttl_seconds: int
    ) -> None:
        if not isinstance(store, DocumentStore):
            from cosmos_outbox.cosmos import CosmosDocumentStore

            store = CosmosDocumentStore(store)  # a ContainerProxy
        self.core = AsyncProjector(store, projection, inbox_ttl_seconds=inbox_ttl_seconds)

    def handle(self, event: IncomingEvent) -> Result:
        """Apply one event (see `AsyncProjector`)."""
        return run_sync(self.core.handle(event))

    def status(self, *, aggregate_id: str | None = None) -> SubscriberStatus:
        """What it holds, why and what releases it; the gaps operators accepted."""
        return run_sync(self.core.status(aggregate_id=aggregate_id))


class Dispatcher:
    """`AsyncDispatcher`, sync: its projector a sync `Projector`, its payload store the
    settings' on the SDK's sync client unless given."""

    def __init__(
        self,
        aggregate_type: str,
        projector: Callable[[], Projector],
        *,
        payloads: Callable[[], PayloadStore] | None = None,
        **options: Unpack[DispatcherOptions],
    ) -> None:
        self.aggregate_type = aggregate_type
        self.core = AsyncDispatcher(
            aggregate_type,
            lambda: projector().core,
            payloads=payloads or settings_payloads(asynchronous=False),
            **options,
        )

    def handle(self, message: func.ServiceBusMessage | Any, *, settle: Any = None) -> Result | None:
        """Handle one message (see `AsyncDispatcher.handle`; `settle` a sync one: the
        function's message actions, or a sync receiver)."""
        return run_sync(self.core.handle(message, settle=settle))
