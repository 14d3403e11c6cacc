"""The composition root: everything the functions use, built lazily once per process from the
validated settings. Tests install their own (`override`) with in-memory fakes."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from application.contacts.ports import ContactList
from application.contacts.service import ContactService
from application.ports import UnitOfWork
from entrypoints.contacts import ContactsDependencies
from entrypoints.http.paging import TokenCodec, derive_key
from entrypoints.outbox import OutboxDependencies

if TYPE_CHECKING:
    from azure.cosmos import CosmosClient

    from infra.settings import Settings

logger = logging.getLogger(__name__)
#: Key-derivation purpose of the quarantine list tokens (a label, not a secret).
QUARANTINE_TOKEN_PURPOSE = "outbox-admin/quarantine-token/v1"  # noqa: S105


@dataclass
class Dependencies:
    """This app's dependencies: the contact API's and the outbox's, on one store."""

    uow: Callable[[], UnitOfWork]
    contacts: Callable[[], ContactList]
    outbox: OutboxDependencies
    #: Seals the contact list's paging tokens. Production derives the key from the store's
    #: secret.
    tokens: TokenCodec = field(default_factory=lambda: TokenCodec(derive_key("local-tests")))

    def __post_init__(self) -> None:
        self.api = ContactsDependencies(
            service=ContactService(lambda: self.uow(), lambda: self.contacts()),
            tokens=self.tokens)

    def ping(self) -> None:
        """Health: the store answers and the container exists."""
        with self.uow() as unit:
            unit.ping()


def quarantine_tokens(secret: str) -> TokenCodec:
    return TokenCodec(derive_key(secret, purpose=QUARANTINE_TOKEN_PURPOSE))


def production_outbox(settings: Settings, client: CosmosClient) -> OutboxDependencies:
    """The outbox's adapters on Cosmos DB and Service Bus (Service Bus is reached on first
    use)."""
    from application.outbox.relay import Relay
    from application.outbox.telemetry import RelayTelemetry
    from infra.cosmos.client import contacts_container, lease_container
    from infra.cosmos.estimator import CosmosBacklogEstimator
    from infra.cosmos.outbox import CosmosEventStore, CosmosQuarantine
    from infra.servicebus.publisher import ServiceBusPublisher

    telemetry = RelayTelemetry(destination=settings.servicebus_topic)
    container = contacts_container(client, settings)

    def backlog() -> CosmosBacklogEstimator:
        return CosmosBacklogEstimator(container, lease_container(client, settings))

    return OutboxDependencies(
        relay_factory=lambda: Relay(ServiceBusPublisher(settings), CosmosQuarantine(container),
                                    telemetry),
        quarantine=lambda: CosmosQuarantine(container),
        events=lambda: CosmosEventStore(container),
        backlog=backlog,
        tokens=quarantine_tokens(token_secret(settings)),
        telemetry=telemetry,
        event_ttl_seconds=settings.event_ttl_seconds,
    )


def production() -> Dependencies:
    """Wire the Cosmos and Service Bus adapters from the settings (validated here, once)."""
    from infra.cosmos.client import contacts_container, cosmos_client
    from infra.cosmos.contacts import CosmosContactList
    from infra.cosmos.unit_of_work import CosmosUnitOfWork
    from infra.settings import load_settings

    settings = load_settings()
    client = cosmos_client(settings)
    container = contacts_container(client, settings)
    logger.info(
        "dependencies built: database=%s container=%s topic=%s identity_cosmos=%s",
        settings.cosmos_database, settings.cosmos_container, settings.servicebus_topic,
        settings.cosmos_connection is None,
    )
    return Dependencies(
        uow=lambda: CosmosUnitOfWork(container, event_ttl_seconds=settings.event_ttl_seconds),
        contacts=lambda: CosmosContactList(container),
        outbox=production_outbox(settings, client),
        tokens=TokenCodec(derive_key(token_secret(settings))),
    )


def token_secret(settings: Settings) -> str:
    """What paging tokens are sealed with: the store's account key when there is one (the same
    on every instance); with a managed identity there is none, and the account, database and
    container names are used, so tokens are still strictly checked but not secret."""
    if settings.cosmos_connection is not None:
        return settings.cosmos_connection.get_secret_value()
    return "|".join(
        (settings.cosmos_account_endpoint or "", settings.cosmos_database,
         settings.cosmos_container)
    )


_lock = threading.Lock()
_current: Dependencies | None = None


def dependencies() -> Dependencies:
    global _current
    with _lock:
        if _current is None:
            _current = production()
        return _current


def outbox_dependencies() -> OutboxDependencies:
    """The outbox's dependencies (the default of `outbox_blueprint()`): those of the one
    composition root, so an app's own routes (`dependencies().uow`) and the outbox share one
    Cosmos client, and a test's `override` reaches both."""
    return dependencies().outbox


def override(deps: Dependencies | None) -> None:
    """Install (or with None, forget) the dependencies; for tests and local tools."""
    global _current
    with _lock:
        _current = deps
