"""The Contacts app's composition root. `bootstrap(...)` takes what the app runs on as parameters:
the services of its outbox (cosmos-outbox's Cosmos DB, Service Bus and Blob Storage adapters by
default, built from the settings once per process on first use; tests pass in-memory ones) and
the contact list on them. Nothing is read or opened before a function runs.

The app is async (`cosmos_outbox.aio.Outbox`: `async def` functions on the worker's event loop,
over the SDKs' `aio` clients): measured against its sync shape on the local stack, it serves
more requests at every concurrency (docs/benchmarks.md, "Concurrent clients"). Its sync shape
(`bootstrap(asynchronous=False)`: plain functions on the worker's thread pool, the SDKs' sync
clients) is the same routes, kept for that benchmark; examples/orders shows a sync app."""

from __future__ import annotations

import functools
from collections.abc import Callable

import azure.functions as func

from application.contacts.ports import ContactList
from cosmos_outbox import Outbox, Services
from cosmos_outbox.aio import Outbox as AsyncOutbox
from cosmos_outbox.http import TokenCodec
from cosmos_outbox.settings import LegacyEvents
from cosmos_outbox_operators import Operators
from domain.contact import Contact
from entrypoints.contacts import ContactsDependencies, contact_routes
from entrypoints.operators import MODELS

#: Key-derivation purpose of the contact list's paging tokens (a label, not a secret).
CONTACTS_TOKEN_PURPOSE = "contacts-api/continuation-token/v1"  # noqa: S105
TITLE = "Contacts outbox API"
DESCRIPTION = (
    "Contacts saved with their domain events in one Cosmos DB transactional batch; "
    "events relayed to Service Bus."
)
#: Events this app stored before event documents named their aggregate type and source (the
#: Contacts outbox app before the library): contact events, from /contacts.
LEGACY_EVENTS = LegacyEvents(aggregate_type=Contact.aggregate_type, source=Contact.source())


def cosmos_contact_list(services: Services) -> ContactList:
    """The contact list on the services' Cosmos DB container (the `aio` one, or the sync one)."""
    from cosmos_outbox.cosmos import CosmosDocumentStore
    from cosmos_outbox.cosmos.aio import CosmosDocumentStore as AsyncCosmosDocumentStore
    from infra.cosmos.contacts import CosmosContactList, SyncCosmosContactList

    if isinstance(services.store, AsyncCosmosDocumentStore):
        return CosmosContactList(services.store.container)
    if isinstance(services.store, CosmosDocumentStore):
        return SyncCosmosContactList(services.store.container)
    raise ValueError(
        "the services' store is not Cosmos DB: give bootstrap() the contact list of their store"
    )


def bootstrap(
    services: Callable[[], Services] | None = None,
    contact_list: Callable[[Services], ContactList] = cosmos_contact_list,
    *,
    asynchronous: bool = True,
) -> func.FunctionApp:
    """The app: the contact API, the outbox (relay, backlog timer, operators' routes, with this
    app's `contactId` alias) and the docs, on `services()` (default: from the app settings, on
    the SDKs' `aio` clients; their sync ones when not `asynchronous`)."""
    kind = AsyncOutbox if asynchronous else Outbox
    outbox = kind((Contact,), services=services, legacy_events=LEGACY_EVENTS)

    @functools.cache
    def dependencies() -> ContactsDependencies:
        current = outbox.services()
        return ContactsDependencies(
            contacts=lambda: contact_list(current),
            tokens=TokenCodec(current.token_key(CONTACTS_TOKEN_PURPOSE)),
        )

    return outbox.function_app(
        contact_routes(outbox, dependencies),
        Operators(models=MODELS),
        title=TITLE,
        description=DESCRIPTION,
    )
