"""An app of the package's public API (transactions, the relay, the operators' routes) on the test
kit's fakes, with two watched subscriptions (`projections`, whose subscriber is the library's
projector over an in-memory projection container, and `other`, whose is not known), for the
recovery tests: what the relay sent, what the subscriber did with it, and the operators' routes
called as the host calls them."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import azure.functions as func
from deadlines import SHORT

from cosmos_outbox import Outbox
from cosmos_outbox.documents import EVENT_TYPE, read_feed
from cosmos_outbox.ports import Outgoing
from cosmos_outbox.relay import OutboxMessage
from cosmos_outbox.subscriber import Dispatcher, IncomingEvent, Projection, Projector, Result
from cosmos_outbox_operators import operators_blueprint
from cosmos_outbox_testing import (
    FunctionClient,
    InMemory,
    InMemoryPayloadStore,
    InMemoryStore,
    delivered,
    in_memory,
    run_sync,
    service_bus_message,
)

SUBSCRIPTION, OTHER = "projections", "other"
KIND = "warehouse"

#: The routes' bound in the test worlds: a slow machine's (the product's 4 s is a bound for
#: Azure; a test of exactness, not of the bound, would otherwise see a loaded machine's honest
#: "not read within the call's bound"). A test of the bound sets its own (`bound_seconds`).
ROUTES_BOUND = SHORT


class Stock(Projection):
    """A warehouse's stock: the versions it applied, in order (notices are version steps)."""

    def handles(self, action: str) -> bool:
        return action.startswith("Stock")

    def apply(self, projection: Mapping[str, Any] | None, event: IncomingEvent) -> dict[str, Any]:
        base: dict[str, Any] = (
            {k: v for k, v in projection.items() if not k.startswith("_")}
            if projection is not None
            else {
                "id": event.aggregate_id,
                "partitionKey": event.aggregate_id,
                "type": "stock",
                "applied": [],
            }
        )
        if self.handles(event.type):
            base["applied"] = [*base["applied"], event.version]
        base["version"] = event.version
        return base


class RecoveryWorld:
    """The stock app's outbox on in-memory services, with the relay's and the operators'
    routes. Their bound is `ROUTES_BOUND` unless a test of the bound sets its own."""

    def __init__(self, *, bound_seconds: float = ROUTES_BOUND, **options: Any) -> None:
        self.projections = InMemoryStore()
        self.memory: InMemory = in_memory(
            max_payload_bytes=0,
            subscriptions={SUBSCRIPTION: self.projections, OTHER: None},
            **options,
        )
        self.outbox = Outbox(services=lambda: self.memory.services, bound_seconds=bound_seconds)
        app = func.FunctionApp(http_auth_level=func.AuthLevel.FUNCTION)
        app.register_functions(self.outbox.relay_blueprint())
        app.register_functions(operators_blueprint(self.outbox))
        self.app = app
        self.client = FunctionClient(app)
        self.projector = Projector(self.projections, Stock(), inbox_ttl_seconds=3600)
        self.subscriber = Dispatcher(
            KIND,
            lambda: self.projector,
            payloads=InMemoryPayloadStore,
            subscription=SUBSCRIPTION,
        )
        #: how many of the publisher's messages the subscriber was handed so far
        self.seen = 0
        self._relayed: set[Any] = set()

    # -- the app --------------------------------------------------------------------------------

    def publish(self, warehouse: str, *actions: str, session_id: str | None = None) -> list[str]:
        """One commit of `actions` for `warehouse` (in session `session_id` when given: a
        transaction on that partition key with a session id of its own); their event ids."""
        with self.outbox.transaction(warehouse, entity=KIND, session_id=session_id) as tx:
            for action in actions:
                tx.publish(action, {"sku": "a", "action": action})
            committed = tx.commit()
        return list(committed.events)

    def poison(self, event_id: str) -> None:
        """The stored event made larger than any message (no claim check: quarantined)."""
        [doc] = [d for d in self.memory.store.of_type(EVENT_TYPE) if d["id"] == event_id]
        self.memory.store.put({**doc, "body": json.dumps({"sku": "x" * 10_000})})

    def relay(self) -> None:
        """The documents written since the last call to the relay, as the change feed hands
        them over."""
        documents = [
            d
            for key, d in self.memory.store.documents.items()
            if (key, d.get("_etag")) not in self._relayed
        ]
        self._relayed |= {(key, d.get("_etag")) for key, d in self.memory.store.documents.items()}
        run_sync(self.outbox.wiring().relay().relay(read_feed(documents)))

    def call(self, method: str, path: str, **options: Any) -> func.HttpResponse:
        return self.client.request(method, path, **options)

    # -- the subscriber -------------------------------------------------------------------------

    @property
    def sent(self) -> list[OutboxMessage]:
        return self.memory.publisher.messages

    def deliver_new(self, *, skip: set[str] | None = None) -> list[Result | None]:
        """The messages the relay sent since the last call, to the subscriber, in order (those
        whose event id is in `skip` dead-lettered at the subscription instead)."""
        results = []
        for message in self.sent[self.seen :]:
            self.seen += 1
            if skip and (message.event_id or message.message_id) in skip:
                self.memory.dead_letters.dead_letter_message(
                    SUBSCRIPTION, message, description="handler failed: KeyError 'sku'"
                )
                continue
            results.append(self.subscriber.handle(delivered(message)))
        return results

    def deliver(self, outgoing: Outgoing, dispatcher: Dispatcher | None = None) -> Result | None:
        """A message a move sent (a resubmission, a notice) as the subscription delivers it."""
        message = service_bus_message(
            outgoing.body,
            message_id=outgoing.message_id,
            session_id=outgoing.session_id,
            subject=outgoing.subject,
            content_type=outgoing.content_type,
            application_properties=dict(outgoing.application_properties),
        )
        return (dispatcher or self.subscriber).handle(message)

    def stock(self, warehouse: str) -> dict[str, Any] | None:
        return self.projections.read(warehouse, warehouse)

    def close(self) -> None:
        self.client.close()

    @classmethod
    def running(cls, **options: Any) -> Iterator[RecoveryWorld]:
        """A world for a test's fixture (`yield from RecoveryWorld.running()`), closed after."""
        world = cls(**options)
        try:
            yield world
        finally:
            world.close()


def outcomes(results: list[Any]) -> list[str]:
    """Each result's outcome, "skipped" where the subscriber returned none."""
    return [r.outcome.value if r is not None else "skipped" for r in results]
