"""The composition root: everything the functions use, built lazily once per process from the
validated settings. Tests install their own (`override`) with in-memory fakes."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from application.admin import OutboxAdmin
from application.backlog import BacklogEstimator
from application.ports import EventStore, Quarantine, UnitOfWork
from application.relay import Relay
from application.service import ContactService
from application.telemetry import RelayTelemetry
from entrypoints.paging import TokenCodec, derive_key

if TYPE_CHECKING:
    from infra.settings import Settings

logger = logging.getLogger(__name__)
#: Key-derivation purpose of the quarantine list tokens (a label, not a secret).
QUARANTINE_TOKEN_PURPOSE = "outbox-admin/quarantine-token/v1"  # noqa: S105


@dataclass
class Dependencies:
    uow: Callable[[], UnitOfWork]
    relay_factory: Callable[[], Relay]
    backlog_factory: Callable[[], BacklogEstimator] | None = None
    telemetry: RelayTelemetry = field(
        default_factory=lambda: RelayTelemetry(destination="unknown"))
    event_ttl_seconds: int = 864000
    _relay: Relay | None = None
    #: Seals the API's paging tokens. Production derives the key from the store's secret.
    tokens: TokenCodec = field(default_factory=lambda: TokenCodec(derive_key("local-tests")))
    #: The operators' use cases (the admin routes) read the quarantine and the stored events.
    quarantine_factory: Callable[[], Quarantine] | None = None
    events_factory: Callable[[], EventStore] | None = None
    #: Seals the quarantine list's tokens: another purpose, so a contacts token is refused.
    quarantine_tokens: TokenCodec = field(default_factory=lambda: TokenCodec(
        derive_key("local-tests", purpose=QUARANTINE_TOKEN_PURPOSE)))

    def __post_init__(self) -> None:
        self.service = ContactService(lambda: self.uow())
        self._relay_lock = threading.Lock()

    @property
    def relay(self) -> Relay:
        with self._relay_lock:
            if self._relay is None:
                self._relay = self.relay_factory()
            return self._relay

    @property
    def admin(self) -> OutboxAdmin:
        if self.quarantine_factory is None or self.events_factory is None:
            raise RuntimeError("no quarantine or event store is configured")
        return OutboxAdmin(
            quarantine=self.quarantine_factory(), events=self.events_factory(),
            relay=lambda: self.relay, backlog=lambda: self.backlog,
            event_ttl_seconds=self.event_ttl_seconds)

    @property
    def backlog(self) -> BacklogEstimator:
        if self.backlog_factory is None:
            raise RuntimeError("no backlog estimator is configured")
        return self.backlog_factory()


_lock = threading.Lock()
_current: Dependencies | None = None


def production() -> Dependencies:
    """Wire the Cosmos and Service Bus adapters from the settings (validated here, once)."""
    from infra.cosmos.client import contacts_container, cosmos_client
    from infra.cosmos.estimator import CosmosBacklogEstimator
    from infra.cosmos.unit_of_work import CosmosEventStore, CosmosQuarantine, CosmosUnitOfWork
    from infra.servicebus.publisher import ServiceBusPublisher
    from infra.settings import load_settings

    settings = load_settings()
    cosmos = cosmos_client(settings)
    container = contacts_container(cosmos, settings)
    logger.info(
        "dependencies built: database=%s container=%s topic=%s identity_cosmos=%s",
        settings.cosmos_database,
        settings.cosmos_container,
        settings.servicebus_topic,
        settings.cosmos_connection is None,
    )

    telemetry = RelayTelemetry(destination=settings.servicebus_topic)

    def relay() -> Relay:
        return Relay(ServiceBusPublisher(settings), CosmosQuarantine(container), telemetry)

    def backlog() -> BacklogEstimator:
        database = cosmos.get_database_client(settings.cosmos_database)
        return CosmosBacklogEstimator(
            container, database.get_container_client(settings.cosmos_lease_container))

    return Dependencies(
        uow=lambda: CosmosUnitOfWork(container, event_ttl_seconds=settings.event_ttl_seconds),
        relay_factory=relay,
        backlog_factory=backlog,
        telemetry=telemetry,
        event_ttl_seconds=settings.event_ttl_seconds,
        tokens=TokenCodec(derive_key(token_secret(settings))),
        quarantine_factory=lambda: CosmosQuarantine(container),
        events_factory=lambda: CosmosEventStore(container),
        quarantine_tokens=TokenCodec(derive_key(token_secret(settings),
                                                purpose=QUARANTINE_TOKEN_PURPOSE)),
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


def dependencies() -> Dependencies:
    global _current
    with _lock:
        if _current is None:
            _current = production()
        return _current


def override(deps: Dependencies | None) -> None:
    """Install (or with None, forget) the dependencies; for tests and local tools."""
    global _current
    with _lock:
        _current = deps
