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
import os
from collections.abc import Callable, Mapping

import azure.functions as func

from application.contacts.ports import ContactList
from cosmos_outbox import Outbox, Services
from cosmos_outbox.aio import Outbox as AsyncOutbox
from cosmos_outbox.http import TokenCodec, bounded
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
#: The app setting of the bound of the app's bounded routes (/health, the operators' routes), in
#: seconds: unset, cosmos-outbox's `bounded.BOUND_SECONDS` (4 s). The test suite's stacks set a
#: longer one where a test does not test the bound (a busy machine's 503 is not what they test).
BOUND_SETTING = "HTTP_BOUND_SECONDS"


def bound_from_settings(settings: Mapping[str, str] = os.environ) -> float:
    """The bound the app setting `HTTP_BOUND_SECONDS` gives, when set (the library's default
    else): a number of seconds more than 0 and at most 230 (`bounded.checked_bound`), else an
    error naming the setting."""
    text = settings.get(BOUND_SETTING, "").strip()
    if not text:
        return bounded.BOUND_SECONDS
    try:
        return bounded.checked_bound(float(text), name=BOUND_SETTING)
    except ValueError:
        raise ValueError(
            f"{BOUND_SETTING}={text!r}: not a number of seconds more than 0 and at most "
            f"{bounded.MAX_BOUND_SECONDS:g} (Azure ends an HTTP request not answered in 230 s)"
        ) from None


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
    the SDKs' `aio` clients; their sync ones when not `asynchronous`). The bound of its bounded
    routes is the app setting `HTTP_BOUND_SECONDS`'s, when set (`bound_from_settings`), given
    to the outbox, which passes it to what it serves."""
    kind = AsyncOutbox if asynchronous else Outbox
    outbox = kind(
        (Contact,),
        services=services,
        legacy_events=LEGACY_EVENTS,
        bound_seconds=bound_from_settings(),
    )

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
