"""An app's outbox, wired: `Outbox` is the composition root an app builds its functions from.

    outbox = Outbox(aggregates=[Order])                     # no I/O: built on first use
    app = outbox.function_app(orders_blueprint(outbox), title="Orders API")

`Outbox` takes its dependencies as a parameter (`services`, called once, on first use): by
default `cosmos_services`, the Cosmos DB and Service Bus adapters built from the validated
settings; tests pass the in-memory fakes of `cosmos_outbox.testing` instead. From them it gives
an app:

- `unit_of_work()` and `service(kind)`: the write path (one transactional batch per aggregate:
  the aggregate and its events);
- `function_app(*blueprints)`: a `FunctionApp` with the app's blueprints, the outbox's (the
  change-feed relay, the backlog timer, the operators' `/outbox/...` routes) and the docs'
  (`/health`, `/openapi.json` describing every route and the events of every aggregate
  registered here, and the 404/405 fallback).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import azure.functions as func

from cosmos_outbox._blueprints.docs import docs_blueprint
from cosmos_outbox._blueprints.operators import OperatorModels
from cosmos_outbox._blueprints.outbox import OutboxDependencies, outbox_blueprint
from cosmos_outbox._domain import Aggregate
from cosmos_outbox._service import AggregateService
from cosmos_outbox.http._paging import TokenCodec, derive_key
from cosmos_outbox.http._routing import FunctionApp
from cosmos_outbox.ports import UnitOfWork

if TYPE_CHECKING:
    from azure.cosmos import ContainerProxy

    from cosmos_outbox.settings import OutboxSettings

__all__ = ["QUARANTINE_TOKEN_PURPOSE", "Outbox", "Services", "cosmos_services", "token_secret"]

logger = logging.getLogger(__name__)
#: Key-derivation purpose of the quarantine list's tokens (a label, not a secret).
QUARANTINE_TOKEN_PURPOSE = "outbox-admin/quarantine-token/v1"  # noqa: S105


@dataclass(frozen=True)
class Services:
    """What an app's functions run on: the unit of work, the outbox's own dependencies, and the
    secret its paging tokens are sealed with (derive a key per purpose with
    `cosmos_outbox.http._paging.derive_key`). `container` is the Cosmos DB container, for an
    app's own queries (None on fakes)."""

    unit_of_work: Callable[[], UnitOfWork]
    outbox: OutboxDependencies
    token_secret: str
    container: ContainerProxy | None = None

    def ping(self) -> None:
        """Health: the store answers and the container exists (raises TransientStoreError)."""
        with self.unit_of_work() as unit:
            unit.ping()


def token_secret(settings: OutboxSettings) -> str:
    """What paging tokens are sealed with: the store's account key when there is one (the same
    on every instance); with a managed identity there is none, and the account, database and
    container names are used, so tokens are still strictly checked but not secret."""
    if settings.cosmos_connection is not None:
        return settings.cosmos_connection.get_secret_value()
    return "|".join((settings.cosmos_account_endpoint or "", settings.cosmos_database,
                     settings.cosmos_container))


def quarantine_tokens(secret: str) -> TokenCodec:
    return TokenCodec(derive_key(secret, purpose=QUARANTINE_TOKEN_PURPOSE))


def cosmos_services(settings: OutboxSettings | None = None) -> Services:
    """The Cosmos DB, Service Bus and Blob Storage adapters, from the settings (read and
    validated here, once, unless given). Cosmos DB is reached now (the client reads the
    account); Service Bus on the relay's first send; Blob Storage on its first offload."""
    from cosmos_outbox._relay import Relay
    from cosmos_outbox._relay.telemetry import RelayTelemetry
    from cosmos_outbox.cosmos import (
        CosmosBacklogEstimator,
        CosmosEventStore,
        CosmosQuarantine,
        CosmosUnitOfWork,
        cosmos_client,
        lease_container,
        outbox_container,
    )
    from cosmos_outbox.settings import load_settings

    settings = settings if settings is not None else load_settings()
    client = cosmos_client(settings)
    container = outbox_container(client, settings)
    ttl = settings.event_ttl_seconds
    telemetry = RelayTelemetry(destination=settings.servicebus_topic or "")

    def relay() -> Relay:
        from cosmos_outbox.blob import blob_payload_store
        from cosmos_outbox.servicebus import ServiceBusPublisher

        # The claim check: bodies too large for a message go to the payload container
        # (OutboxPayloadStorage, else AzureWebJobsStorage); without storage they are quarantined.
        payloads = blob_payload_store(settings) if settings.payload_max_bytes else None
        return Relay(ServiceBusPublisher(settings), CosmosQuarantine(container), telemetry,
                     payloads=payloads, max_payload_bytes=settings.payload_max_bytes)

    def backlog() -> CosmosBacklogEstimator:
        return CosmosBacklogEstimator(container, lease_container(client, settings))

    secret = token_secret(settings)
    logger.info(
        "outbox services built: database=%s container=%s topic=%s identity_cosmos=%s",
        settings.cosmos_database, settings.cosmos_container, settings.servicebus_topic,
        settings.cosmos_connection is None,
        extra={"outbox.database": settings.cosmos_database,
               "outbox.container": settings.cosmos_container,
               "outbox.topic": settings.servicebus_topic})
    return Services(
        unit_of_work=lambda: CosmosUnitOfWork(
            container, event_ttl_seconds=ttl,
            idempotency_ttl_seconds=settings.idempotency_ttl_seconds),
        outbox=OutboxDependencies(
            relay_factory=relay,
            quarantine=lambda: CosmosQuarantine(container),
            events=lambda: CosmosEventStore(container),
            backlog=backlog,
            tokens=quarantine_tokens(secret),
            telemetry=telemetry,
            event_ttl_seconds=ttl,
        ),
        token_secret=secret,
        container=container,
    )


class Outbox:
    """The outbox of one app: the aggregates it writes and relays, and the services its
    functions run on (`services()`, built once per process on first use; no I/O before)."""

    def __init__(self, aggregates: Iterable[type[Aggregate]], *,
                 services: Callable[[], Services] = cosmos_services) -> None:
        self.aggregates: tuple[type[Aggregate], ...] = tuple(aggregates)
        if not self.aggregates:
            raise ValueError("an outbox needs at least one aggregate type")
        self._build = services
        self._services: Services | None = None
        self._lock = threading.Lock()

    def services(self) -> Services:
        with self._lock:
            if self._services is None:
                self._services = self._build()
            return self._services

    def unit_of_work(self) -> UnitOfWork:
        return self.services().unit_of_work()

    def service[A: Aggregate](self, kind: type[A]) -> AggregateService[A]:
        """Create, read and change aggregates of `kind` (one of this outbox's aggregates)."""
        if kind not in self.aggregates:
            raise ValueError(f"{kind.__qualname__} is not an aggregate of this outbox: "
                             "add it to Outbox(aggregates=...)")
        return AggregateService(kind, self.unit_of_work)

    def blueprint(self, *, models: OperatorModels = OperatorModels()  # noqa: B008
                  ) -> func.Blueprint:
        """The relay, the backlog timer and the operators' routes (their trigger settings are
        read from the app settings now, at indexing)."""
        return outbox_blueprint(lambda: self.services().outbox, models=models)

    def function_app(
        self,
        *blueprints: func.Blueprint,
        title: str,
        description: str = "",
        http_auth_level: func.AuthLevel = func.AuthLevel.FUNCTION,
        operator_models: OperatorModels = OperatorModels(),  # noqa: B008
        **options: Any,
    ) -> FunctionApp:
        """The app: `blueprints`, then the outbox's, then the docs' (health, the OpenAPI
        document of every route and of the events of every aggregate of this outbox, the
        404/405 fallback)."""
        app = FunctionApp(http_auth_level=http_auth_level, **options)
        for blueprint in blueprints:
            app.register_functions(blueprint)
        app.register_functions(self.blueprint(models=operator_models))
        app.register_functions(self.docs_blueprint(app.get_functions, title=title,
                                                   description=description))
        return app

    def docs_blueprint(self, functions: Callable[[], Sequence[Any]], *, title: str,
                       description: str = "") -> func.Blueprint:
        return docs_blueprint(functions, ping=lambda: self.services().ping(), title=title,
                              description=description, aggregates=self.aggregates)
