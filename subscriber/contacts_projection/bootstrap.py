"""The composition root: the Cosmos container, the projector and the projection's reads,
built once, lazily."""

from __future__ import annotations

import functools
import warnings

from azure.cosmos import ContainerProxy, CosmosClient

from contacts_projection.http import Tokens
from contacts_projection.projection import IGNORED_ACTIONS, ContactProjection
from contacts_projection.reads import CosmosProjectionReads
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


@functools.cache
def projection_container() -> ContainerProxy:
    settings = load_settings()
    return (
        cosmos_client(settings)
        .get_database_client(settings.cosmos_database)
        .get_container_client(settings.projection_container)
    )


@functools.cache
def projector() -> Projector:
    return Projector(projection_container(), ContactProjection(),
                     inbox_ttl_seconds=load_settings().inbox_ttl_seconds)


#: Contact events to the projector; the rest recorded and skipped (cosmos-outbox's dispatch).
DISPATCHER = Dispatcher(CONTACT, projector, ignored_actions=IGNORED_ACTIONS,
                        default_aggregate_type=CONTACT)


@functools.cache
def reads() -> CosmosProjectionReads:
    return CosmosProjectionReads(projection_container())


@functools.cache
def tokens() -> Tokens:
    """Paging tokens sealed with the account key when there is one (the same on every
    instance); with a managed identity, with the account, database and container names:
    strictly checked, not secret."""
    settings = load_settings()
    if settings.cosmos_connection is not None:
        return Tokens.from_secret(settings.cosmos_connection.get_secret_value())
    return Tokens.from_secret("|".join((settings.cosmos_account_endpoint or "",
                                        settings.cosmos_database,
                                        settings.projection_container)))
