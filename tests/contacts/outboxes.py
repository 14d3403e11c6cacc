"""The Contacts app's outbox on a Cosmos DB store of a test's own (a container it created, a
client on a proxy): its units of work and its service write there as the app does. Nothing is
relayed from it (no publisher): the stack's Functions host relays."""

from __future__ import annotations

from cosmos_outbox import Outbox, Services
from cosmos_outbox.aggregates import Aggregate
from cosmos_outbox.cosmos import CosmosDocumentStore
from cosmos_outbox.ports import MessagePublisher
from cosmos_outbox.settings import OutboxSettings
from domain.contact import Contact
from entrypoints.bootstrap import LEGACY_EVENTS

#: The events' TTL (EVENT_TTL_SECONDS) unless a test sets one.
EVENT_TTL_SECONDS = OutboxSettings.model_fields["event_ttl_seconds"].default


def _no_publisher() -> MessagePublisher:
    raise AssertionError("this outbox relays nothing: the stack's Functions host does")


def outbox_on(
    store: CosmosDocumentStore,
    *aggregates: type[Aggregate],
    event_ttl_seconds: int = EVENT_TTL_SECONDS,
    failure_records: bool = False,
) -> Outbox:
    """The app's outbox (the contact, its legacy events) on `store`; with `aggregates`, an
    outbox of those (a second app's, on the same container); `failure_records`: failed messages
    kept as data (OUTBOX_FAILURE_INGEST on), so its quarantine keeps a failure record of each."""
    services = Services(
        store=store,
        publisher=_no_publisher,
        token_secret="tests",
        event_ttl_seconds=event_ttl_seconds,
        failure_ingest=failure_records,
    )
    return Outbox(aggregates or (Contact,), services=lambda: services, legacy_events=LEGACY_EVENTS)
