"""The Contacts app's composition root. `bootstrap(...)` takes what the app runs on as parameters:
the services of its outbox (cosmos-outbox's Cosmos DB and Service Bus adapters by default,
built from the settings once per process on first use; tests pass in-memory fakes) and the
contact list on them. Nothing is read or opened before a function runs."""

from __future__ import annotations

import functools
from collections.abc import Callable

import azure.functions as func

from application.contacts.ports import ContactList
from cosmos_outbox._outbox import Outbox, Services, cosmos_services
from cosmos_outbox.http._paging import TokenCodec, derive_key
from domain.contact import Contact
from entrypoints.contacts import ContactsDependencies, contacts_blueprint
from entrypoints.operators import MODELS

#: Key-derivation purpose of the contact list's paging tokens (a label, not a secret).
CONTACTS_TOKEN_PURPOSE = "contacts-api/continuation-token/v1"  # noqa: S105
TITLE = "Contacts outbox API"
DESCRIPTION = ("Contacts saved with their domain events in one Cosmos DB transactional batch; "
               "events relayed to Service Bus.")


def cosmos_contact_list(services: Services) -> ContactList:
    """The contact list on the services' Cosmos DB container."""
    from infra.cosmos.contacts import CosmosContactList

    if services.container is None:
        raise ValueError("the services have no Cosmos DB container: give bootstrap() the "
                         "contact list of their store")
    return CosmosContactList(services.container)


def bootstrap(
    services: Callable[[], Services] = cosmos_services,
    contact_list: Callable[[Services], ContactList] = cosmos_contact_list,
) -> func.FunctionApp:
    """The app: the contact API, the outbox (relay, backlog timer, operators' routes, with this
    app's `contactId` alias) and the docs, on `services()`."""
    outbox = Outbox((Contact,), services=services)

    @functools.cache
    def dependencies() -> ContactsDependencies:
        current = outbox.services()
        return ContactsDependencies(
            contacts=lambda: contact_list(current),
            tokens=TokenCodec(derive_key(current.token_secret, purpose=CONTACTS_TOKEN_PURPOSE)))

    return outbox.function_app(
        contacts_blueprint(lambda: outbox.service(Contact), dependencies),
        title=TITLE, description=DESCRIPTION, operator_models=MODELS)
