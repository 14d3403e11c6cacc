"""The subscriber's composition root. `bootstrap(services)` takes what the app runs on as a
parameter: by default `cosmos_services` (the projection container on Cosmos DB, from the
validated settings, built once per process on first use); tests pass their own. Nothing is read
or opened before a function runs."""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import azure.functions as func
from azure.cosmos import CosmosClient

from contacts_projection import http
from contacts_projection.http import Tokens
from contacts_projection.projection import IGNORED_ACTIONS, ContactProjection
from contacts_projection.reads import CosmosProjectionReads, ProjectionReads
from contacts_projection.settings import SubscriberSettings, load_settings
from cosmos_outbox.subscriber import Dispatcher, Projector

#: The aggregate type this subscriber projects. Messages name theirs in the `aggregateType`
#: application property; those sent before it existed were all contact events.
CONTACT = "contact"


def cosmos_client(settings: SubscriberSettings) -> CosmosClient:
    verify = settings.cosmos_verify_tls
    if not verify:
        # Only for local emulators with self-signed certificates: one warning per request
        # otherwise.
        warnings.filterwarnings("ignore", message="Unverified HTTPS request")
    if settings.cosmos_connection is not None:
        return CosmosClient.from_connection_string(
            settings.cosmos_connection.get_secret_value(), connection_verify=verify
        )
    from azure.identity import DefaultAzureCredential

    assert settings.cosmos_account_endpoint
    return CosmosClient(
        settings.cosmos_account_endpoint, credential=DefaultAzureCredential(),
        connection_verify=verify,
    )


@dataclass(frozen=True)
class Services:
    """What the subscriber's functions run on: the projector (events in), the projection's
    reads and the key its paging tokens are sealed with (HTTP)."""

    projector: Projector
    reads: ProjectionReads
    tokens: Tokens


def cosmos_services() -> Services:
    """The projection container on Cosmos DB, from the settings (read and validated here)."""
    settings = load_settings()
    container = (cosmos_client(settings).get_database_client(settings.cosmos_database)
                 .get_container_client(settings.projection_container))
    return Services(
        projector=Projector(container, ContactProjection(),
                            inbox_ttl_seconds=settings.inbox_ttl_seconds),
        reads=CosmosProjectionReads(container),
        tokens=token_codec(settings),
    )


def token_codec(settings: SubscriberSettings) -> Tokens:
    """Paging tokens sealed with the account key when there is one (the same on every
    instance); with a managed identity, with the account, database and container names:
    strictly checked, not secret."""
    if settings.cosmos_connection is not None:
        return Tokens.from_secret(settings.cosmos_connection.get_secret_value())
    return Tokens.from_secret("|".join((settings.cosmos_account_endpoint or "",
                                        settings.cosmos_database,
                                        settings.projection_container)))


def bootstrap(services: Callable[[], Services] = cosmos_services) -> func.FunctionApp:
    """The app: the projection fed by its subscription, and read over HTTP."""
    lock = threading.Lock()
    built: list[Services] = []

    def current() -> Services:
        """The services, built once per process on first use."""
        if not built:
            with lock:
                if not built:
                    built.append(services())
        return built[0]

    # Contact events to the projector; the rest recorded and skipped (cosmos-outbox's dispatch).
    dispatcher = Dispatcher(CONTACT, lambda: current().projector,
                            ignored_actions=IGNORED_ACTIONS, default_aggregate_type=CONTACT)
    app = func.FunctionApp(http_auth_level=func.AuthLevel.FUNCTION)

    @app.function_name("read_contact_projection")
    @app.route(route="projections/contacts/{id}", methods=["GET"])
    def read_contact_projection(req: func.HttpRequest) -> func.HttpResponse:
        return http.read_projection(req, current().reads)

    @app.function_name("list_contact_projections")
    @app.route(route="projections/contacts", methods=["GET"])
    def list_contact_projections(req: func.HttpRequest) -> func.HttpResponse:
        return http.list_projections(req, current().reads, current().tokens)

    @app.function_name("project_contact_events")
    @app.service_bus_topic_trigger(
        arg_name="msg",
        connection="ServiceBusConnection",
        topic_name="%SERVICEBUS_TOPIC%",
        subscription_name="%SUBSCRIBER_SUBSCRIPTION%",
        is_sessions_enabled=True,
    )
    def project_contact_events(msg: func.ServiceBusMessage) -> None:
        dispatcher.handle(msg)

    return app
