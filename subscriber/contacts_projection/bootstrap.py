"""The composition root: the Cosmos container and the projector, built once, lazily."""

from __future__ import annotations

import functools
import warnings

from azure.cosmos import CosmosClient

from contacts_projection.settings import SubscriberSettings, load_settings
from contacts_projection.store import Projector


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
def projector() -> Projector:
    settings = load_settings()
    container = (
        cosmos_client(settings)
        .get_database_client(settings.cosmos_database)
        .get_container_client(settings.projection_container)
    )
    return Projector(container, inbox_ttl_seconds=settings.inbox_ttl_seconds)
