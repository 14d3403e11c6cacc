"""The subscriber's composition root. `bootstrap(services)` takes what the app runs on as a
parameter: by default `cosmos_services` (the projection container on Cosmos DB, from the
validated settings, built once per process on first use); tests pass their own. Nothing is read
or opened before a function runs.

Its functions are `async def` ones, run on the worker's event loop, over the SDKs' `aio` clients
(cosmos-outbox's async API, `cosmos_outbox.aio`): one Cosmos DB client per process, made by the
first invocation (on that loop); the claim check's payloads are fetched with the `aio` Blob
Storage client (the dispatcher's default, from the app settings)."""

from __future__ import annotations

import hashlib
import hmac
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import azure.functions as func

from contacts_projection.http import projection_routes
from contacts_projection.projection import IGNORED_ACTIONS, ContactProjection
from contacts_projection.reads import ProjectionReads, StoreProjectionReads
from cosmos_outbox.http import TokenCodec
from cosmos_outbox.subscriber.aio import Dispatcher, Projector

if TYPE_CHECKING:
    # Imported by the first invocation (`cosmos_services`), not when the worker indexes the
    # app: the Cosmos DB SDK, the store and the settings are a fifth of the worker's start.
    from azure.cosmos.aio import CosmosClient

    from contacts_projection.settings import SubscriberSettings

#: The aggregate type this subscriber projects. Messages name theirs in the `aggregateType`
#: application property; those sent before it existed were all contact events.
CONTACT = "contact"
#: Key-derivation purpose of the projection list's paging tokens (a label, not a secret).
TOKEN_PURPOSE = b"contacts-projection/continuation-token/v1"


def cosmos_client(settings: SubscriberSettings) -> CosmosClient:
    """The SDK's `aio` client (no I/O here: it reads the account on its first request). TLS
    verification off only where COSMOS_VERIFY_TLS=false says (an emulator whose certificate
    cannot be trusted)."""
    from azure.cosmos.aio import CosmosClient

    verify = settings.cosmos_verify_tls
    if settings.cosmos_connection is not None:
        return CosmosClient.from_connection_string(
            settings.cosmos_connection.get_secret_value(), connection_verify=verify
        )
    from azure.identity.aio import DefaultAzureCredential

    assert settings.cosmos_account_endpoint
    return CosmosClient(
        settings.cosmos_account_endpoint,
        credential=DefaultAzureCredential(),
        connection_verify=verify,
    )


@dataclass(frozen=True)
class Services:
    """What the subscriber's functions run on: the projector (events in), the projection's
    reads and the key its paging tokens are sealed with (HTTP)."""

    projector: Projector
    reads: ProjectionReads
    tokens: TokenCodec


def cosmos_services() -> Services:
    """The projection container on Cosmos DB, from the settings (read and validated here)."""
    from contacts_projection.settings import load_settings
    from cosmos_outbox.cosmos.aio import CosmosDocumentStore as AsyncCosmosDocumentStore

    settings = load_settings()
    store = AsyncCosmosDocumentStore(
        cosmos_client(settings)
        .get_database_client(settings.cosmos_database)
        .get_container_client(settings.projection_container)
    )
    return Services(
        projector=Projector(
            store, ContactProjection(), inbox_ttl_seconds=settings.inbox_ttl_seconds
        ),
        reads=StoreProjectionReads(store),
        tokens=token_codec(settings),
    )


def token_codec(settings: SubscriberSettings) -> TokenCodec:
    """Paging tokens sealed with a key derived from the account key when there is one (the
    same on every instance); with a managed identity, from the account, database and container
    names: strictly checked, not secret."""
    secret = (
        settings.cosmos_connection.get_secret_value()
        if settings.cosmos_connection is not None
        else "|".join(
            (
                settings.cosmos_account_endpoint or "",
                settings.cosmos_database,
                settings.projection_container,
            )
        )
    )
    return TokenCodec(hmac.new(secret.encode("utf-8"), TOKEN_PURPOSE, hashlib.sha256).digest())


def bootstrap(services: Callable[[], Services] = cosmos_services) -> func.FunctionApp:
    """The app: the projection fed by its subscription, and read over HTTP."""
    lock = threading.Lock()
    built: list[Services] = []

    def current() -> Services:
        """The services, built once per process on first use (no I/O: nothing waits here)."""
        if not built:
            with lock:
                if not built:
                    built.append(services())
        return built[0]

    # Contact events to the projector; the rest recorded and skipped (cosmos-outbox's dispatch).
    dispatcher = Dispatcher(
        CONTACT,
        lambda: current().projector,
        ignored_actions=IGNORED_ACTIONS,
        default_aggregate_type=CONTACT,
    )
    app = func.FunctionApp(http_auth_level=func.AuthLevel.FUNCTION)
    # The projection read over HTTP (cosmos-outbox's HTTP layer).
    app.register_functions(
        projection_routes(lambda: current().reads, lambda: current().tokens).blueprint
    )

    @app.function_name("project_contact_events")
    @app.service_bus_topic_trigger(
        arg_name="msg",
        connection="ServiceBusConnection",
        topic_name="%SERVICEBUS_TOPIC%",
        subscription_name="%SUBSCRIBER_SUBSCRIPTION%",
        is_sessions_enabled=True,
    )
    async def project_contact_events(msg: func.ServiceBusMessage) -> None:
        await dispatcher.handle(msg)

    return app
