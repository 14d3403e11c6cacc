"""An app's outbox, wired: `Outbox` is the composition root an app builds its functions from.

    outbox = Outbox([Order])                        # no I/O: built on first use
    orders = outbox.routes(Order)                   # the route helper
    ...
    app = outbox.function_app(orders, title="Orders API")

One composition path. What an outbox runs on is `Services`: the leaves (a document store, a
publisher, a payload store, a backlog estimator, the secret paging tokens are sealed with and
the TTLs), with two implementations, both made by one factory each: `services_from_settings`
(Cosmos DB, Service Bus and Blob Storage, from the validated app settings: the default) and the
test kit's `in_memory()`. Everything else (the unit of work, the relay and its telemetry, the
quarantine, the operators' use cases, the paging tokens) is built from the leaves by `Wiring`,
the same for both, once per process, on first use.

`Outbox` is the sync API (sync functions, the SDKs' sync clients, run by the worker's thread
pool); `cosmos_outbox.aio.Outbox` the async one (`async def` functions, the SDKs' `aio` clients,
on the worker's event loop). The logic is the same coroutines for both (`cosmos_outbox._aio`).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, TypeAlias, TypeVar

import azure.functions as func

from cosmos_outbox._aio import as_async, run_sync
from cosmos_outbox._blueprints.docs import docs_blueprint
from cosmos_outbox._blueprints.operators import OperatorModels, operators_blueprint
from cosmos_outbox._blueprints.relay import relay_blueprint
from cosmos_outbox._domain import Aggregate
from cosmos_outbox._records import LegacyEvents
from cosmos_outbox._service import AggregateService as AsyncAggregateService
from cosmos_outbox._session import Session as AsyncSession
from cosmos_outbox._session import _Sequences
from cosmos_outbox._sync import AggregateService, Session, UnitOfWork
from cosmos_outbox._unit_of_work import UnitOfWork as AsyncUnitOfWork
from cosmos_outbox.http._api import HttpApi
from cosmos_outbox.http._declaration import PathParameter
from cosmos_outbox.http._models import View
from cosmos_outbox.http._paging import TokenCodec, derive_key
from cosmos_outbox.http._routes import AggregateRoutes
from cosmos_outbox.http._routing import IndexedFunctionApp
from cosmos_outbox.ports import (
    AsyncBacklogEstimator,
    AsyncDocumentStore,
    AsyncMessagePublisher,
    AsyncPayloadStore,
    BacklogEstimator,
    DocumentStore,
    MessagePublisher,
    PayloadStore,
)
from cosmos_outbox.settings import (
    DEFAULT_EVENT_TTL_SECONDS,
    DEFAULT_IDEMPOTENCY_TTL_SECONDS,
    DEFAULT_PAYLOAD_MAX_BYTES,
)

if TYPE_CHECKING:
    from cosmos_outbox._quarantine import Quarantine
    from cosmos_outbox._relay.operators import OutboxOperators
    from cosmos_outbox._relay.relay import Relay
    from cosmos_outbox._relay.telemetry import RelayTelemetry
    from cosmos_outbox.settings import OutboxSettings, TriggerSettings

A = TypeVar("A", bound="Aggregate")

logger = logging.getLogger("cosmos_outbox")
#: Key-derivation purpose of the quarantine list's tokens (a label, not a secret).
QUARANTINE_TOKEN_PURPOSE = "outbox-admin/quarantine-token/v1"  # noqa: S105
#: A part of an app: a blueprint, or what holds one.
Functions: TypeAlias = func.Blueprint | HttpApi | AggregateRoutes[Any]


def _no_backlog() -> BacklogEstimator:
    raise NotImplementedError("these services estimate no backlog")


@dataclass(frozen=True)
class Services:
    """What an outbox runs on: its adapters (sync or async ones: the async API awaits sync
    ones as they are), the secret its paging tokens are sealed with (derive a key per purpose
    with `token_key`), and its TTLs. `publisher`, `payloads` and `backlog` are made on first
    use (where the relay runs; the claim check's store, None: no claim check)."""

    store: DocumentStore | AsyncDocumentStore
    publisher: Callable[[], MessagePublisher | AsyncMessagePublisher]
    token_secret: str
    payloads: Callable[[], PayloadStore | AsyncPayloadStore | None] = lambda: None
    backlog: Callable[[], BacklogEstimator | AsyncBacklogEstimator] = _no_backlog
    #: the topic (the relay's telemetry names it)
    topic: str = ""
    event_ttl_seconds: int = DEFAULT_EVENT_TTL_SECONDS
    idempotency_ttl_seconds: int = DEFAULT_IDEMPOTENCY_TTL_SECONDS
    max_payload_bytes: int = DEFAULT_PAYLOAD_MAX_BYTES

    def token_key(self, purpose: str) -> bytes:
        """A key for one purpose derived from the secret (never the secret itself)."""
        return derive_key(self.token_secret, purpose=purpose)


def token_secret(settings: OutboxSettings) -> str:
    """What paging tokens are sealed with: the store's account key when there is one (the same
    on every instance); with a managed identity there is none, and the account, database and
    container names are used, so tokens are still strictly checked but not secret."""
    if settings.cosmos_connection is not None:
        return settings.cosmos_connection.get_secret_value()
    return "|".join((settings.cosmos_account_endpoint or "", settings.cosmos_database,
                     settings.cosmos_container))


def publisher_from_settings(settings: OutboxSettings, *, asynchronous: bool = False
                            ) -> MessagePublisher | AsyncMessagePublisher:
    """The relay's publisher the settings name (SettingsError naming what is missing: the topic,
    the connection). No I/O: the first send connects."""
    from cosmos_outbox.settings import SettingsError

    if not settings.servicebus_topic:
        raise SettingsError("invalid settings: set SERVICEBUS_TOPIC (the topic the relay "
                            "sends to) to relay events")
    options: dict[str, Any] = {"max_message_bytes": settings.servicebus_max_message_bytes,
                               "cloudevents_source_base": settings.cloudevents_source_base}
    if asynchronous:
        from cosmos_outbox.servicebus import AsyncServiceBusPublisher as Publisher
    else:
        from cosmos_outbox.servicebus import ServiceBusPublisher as Publisher  # type: ignore[assignment]
    if settings.servicebus_connection is not None:
        return Publisher.from_connection_string(
            settings.servicebus_connection.get_secret_value(), settings.servicebus_topic,
            **options)
    if settings.servicebus_namespace:
        return Publisher.from_namespace(settings.servicebus_namespace,
                                        settings.servicebus_topic, **options)
    raise SettingsError(
        "invalid settings: set ServiceBusConnection (connection string) or "
        "ServiceBusConnection__fullyQualifiedNamespace (managed identity) to relay events")


def payloads_from_settings(settings: OutboxSettings, *, asynchronous: bool = False
                           ) -> PayloadStore | AsyncPayloadStore | None:
    """The claim check's payload store the settings name (OutboxPayloadStorage, else
    AzureWebJobsStorage); None when there is none, or OUTBOX_PAYLOAD_MAX_BYTES is 0. No I/O."""
    payload = settings.payload_storage() if settings.payload_max_bytes else None
    if payload is None:
        return None
    logger.info("claim check: payloads go to container %s (from %s); the relay checks that it "
                "exists before it first relays", payload.container,
                payload.setting, extra={"outbox.payload_container": payload.container,
                                        "outbox.payload_setting": payload.setting})
    if asynchronous:
        from cosmos_outbox.blob import AsyncBlobPayloadStore as Store
    else:
        from cosmos_outbox.blob import BlobPayloadStore as Store  # type: ignore[assignment]
    if payload.connection_string is not None:
        return Store.from_connection_string(payload.connection_string.get_secret_value(),
                                            payload.container)
    assert payload.service_uri is not None
    return Store.from_service_uri(payload.service_uri, payload.container)


def services_from_settings(settings: OutboxSettings | None = None, *,
                           asynchronous: bool = False) -> Services:
    """Cosmos DB, Service Bus and Blob Storage, from the settings (read and validated here,
    once, unless given): the SDKs' sync clients, or their `aio` ones when `asynchronous`. The
    sync Cosmos DB client reads the account now; Service Bus is reached on the relay's first
    send; Blob Storage on its first offload."""
    from cosmos_outbox.settings import load_settings

    settings = settings if settings is not None else load_settings()
    connection = (settings.cosmos_connection.get_secret_value()
                  if settings.cosmos_connection is not None else None)
    database, container = settings.cosmos_database, settings.cosmos_container
    leases = settings.cosmos_lease_container
    store: DocumentStore | AsyncDocumentStore
    backlog: Callable[[], BacklogEstimator | AsyncBacklogEstimator]
    if asynchronous:
        from cosmos_outbox.cosmos import AsyncCosmosBacklogEstimator, AsyncCosmosDocumentStore
        from cosmos_outbox.cosmos._client import async_cosmos_client

        adatabase = async_cosmos_client(
            connection_string=connection, endpoint=settings.cosmos_account_endpoint,
            verify_tls=settings.cosmos_verify_tls).get_database_client(database)
        store = AsyncCosmosDocumentStore(adatabase.get_container_client(container))
        backlog = lambda: AsyncCosmosBacklogEstimator(  # noqa: E731
            adatabase.get_container_client(container), adatabase.get_container_client(leases),
            lease_prefix=settings.lease_prefix)
    else:
        from cosmos_outbox.cosmos import CosmosBacklogEstimator, CosmosDocumentStore
        from cosmos_outbox.cosmos._client import cosmos_client

        sdatabase = cosmos_client(
            connection_string=connection, endpoint=settings.cosmos_account_endpoint,
            verify_tls=settings.cosmos_verify_tls).get_database_client(database)
        store = CosmosDocumentStore(sdatabase.get_container_client(container))
        backlog = lambda: CosmosBacklogEstimator(  # noqa: E731
            sdatabase.get_container_client(container), sdatabase.get_container_client(leases),
            lease_prefix=settings.lease_prefix)
    logger.info(
        "outbox services built: database=%s container=%s topic=%s identity_cosmos=%s async=%s",
        database, container, settings.servicebus_topic, connection is None, asynchronous,
        extra={"outbox.database": database, "outbox.container": container,
               "outbox.topic": settings.servicebus_topic})
    return Services(
        store=store, backlog=backlog,
        publisher=lambda: publisher_from_settings(settings, asynchronous=asynchronous),
        payloads=lambda: payloads_from_settings(settings, asynchronous=asynchronous),
        token_secret=token_secret(settings), topic=settings.servicebus_topic or "",
        event_ttl_seconds=settings.event_ttl_seconds,
        idempotency_ttl_seconds=settings.idempotency_ttl_seconds,
        max_payload_bytes=settings.payload_max_bytes)


class Wiring:
    """The outbox's objects, built from its services (the one composition path): the unit of
    work, the relay and its telemetry, the quarantine, the operators' use cases, the quarantine
    list's tokens. The relay and the backlog estimator are made once, on first use."""

    def __init__(self, services: Services, *, legacy: LegacyEvents | None = None) -> None:
        from cosmos_outbox._quarantine import Quarantine
        from cosmos_outbox._relay.health import RelayHealth
        from cosmos_outbox._relay.telemetry import RelayTelemetry

        self.services = services
        self.legacy = legacy
        self.store: AsyncDocumentStore = as_async(services.store)
        self.telemetry: RelayTelemetry = RelayTelemetry(destination=services.topic)
        self.quarantine: Quarantine = Quarantine(self.store, legacy=legacy)
        self.relay_health = RelayHealth(self.store)
        self.quarantine_tokens = TokenCodec(services.token_key(QUARANTINE_TOKEN_PURPOSE))
        self.event_ttl_seconds = services.event_ttl_seconds
        self._lock = threading.Lock()
        self._relay: Relay | None = None
        self._backlog: AsyncBacklogEstimator | None = None
        self.sequences = _Sequences()

    def session(self, partition_key: str, *, entity: str, session_id: str | None = None,
                source: str | None = None, traceparent: str | None = None) -> AsyncSession:
        return AsyncSession(
            self.store, partition_key, entity=entity, session_id=session_id, source=source,
            event_ttl_seconds=self.services.event_ttl_seconds,
            idempotency_ttl_seconds=self.services.idempotency_ttl_seconds,
            sequences=self.sequences, traceparent=traceparent)

    def unit_of_work(self) -> AsyncUnitOfWork:
        return AsyncUnitOfWork(self.store, event_ttl_seconds=self.services.event_ttl_seconds,
                               idempotency_ttl_seconds=self.services.idempotency_ttl_seconds)

    def relay(self) -> Relay:
        with self._lock:
            if self._relay is None:
                from cosmos_outbox._relay.relay import Relay

                payloads = self.services.payloads()
                self._relay = Relay(self.services.publisher(), self.quarantine, self.telemetry,
                                    payloads=payloads,
                                    max_payload_bytes=self.services.max_payload_bytes,
                                    health=self.relay_health, topic=self.services.topic)
            return self._relay

    def backlog(self) -> AsyncBacklogEstimator:
        with self._lock:
            if self._backlog is None:
                self._backlog = as_async(self.services.backlog())
            return self._backlog

    def operators(self) -> OutboxOperators:
        from cosmos_outbox._relay.operators import OutboxOperators

        return OutboxOperators(store=self.store, quarantine=self.quarantine, relay=self.relay,
                               backlog=self.backlog, event_ttl_seconds=self.event_ttl_seconds,
                               legacy=self.legacy, health=self.relay_health)


class OutboxBase:
    """What the sync and the async outbox share: the aggregates, the services (built once per
    process on first use; no I/O before), the wiring, and the functions it registers."""

    #: whether its functions are `async def` ones, on the SDKs' `aio` clients
    asynchronous: ClassVar[bool] = False

    def __init__(self, aggregates: Iterable[type[Aggregate]] = (), *,
                 services: Callable[[], Services] | None = None,
                 legacy_events: LegacyEvents | None = None) -> None:
        self.aggregates: tuple[type[Aggregate], ...] = tuple(aggregates)
        asynchronous = self.asynchronous
        self._build = services if services is not None else (
            lambda: services_from_settings(asynchronous=asynchronous))
        self.legacy_events = legacy_events
        self._wiring: Wiring | None = None
        self._lock = threading.Lock()

    def services(self) -> Services:
        """The services, built on first use (once per process)."""
        return self.wiring().services

    def wiring(self) -> Wiring:
        wiring = self._wiring  # built once: every request after the first finds it here
        if wiring is not None:
            return wiring
        with self._lock:
            if self._wiring is None:
                self._wiring = Wiring(self._build(), legacy=self.legacy_events)
            return self._wiring

    @contextlib.contextmanager
    def override(self, services: Services) -> Iterator[Services]:
        """Run on `services` inside the block (a test's in-memory ones), then on what it ran on
        before."""
        with self._lock:
            before, self._wiring = self._wiring, Wiring(services, legacy=self.legacy_events)
        try:
            yield services
        finally:
            with self._lock:
                self._wiring = before

    def _checked(self, kind: type[A]) -> type[A]:
        if kind not in self.aggregates:
            raise ValueError(f"{kind.__qualname__} is not an aggregate of this outbox: "
                             "add it to Outbox(aggregates=...)")
        return kind

    def _core_service(self, kind: type[A]) -> AsyncAggregateService[A]:
        return AsyncAggregateService(self._checked(kind), lambda: self.wiring().unit_of_work())

    def routes(self, kind: type[A], *, view: type[View] | None = None,
                             id_parameter: PathParameter | None = None,
                             auth_level: func.AuthLevel = func.AuthLevel.FUNCTION,
                             etag_request_header: bool = False) -> AggregateRoutes[A]:
        """The route helper for `kind`: its `create`, `read` and `update` declare routes on a
        blueprint of their own (its route parameter `id`: `id_parameter`, else "the <type>
        id"), served by this outbox; answers show `view` (default: every field)."""
        parameter = id_parameter or PathParameter("id", f"the {kind.aggregate_type} id")
        api = HttpApi(parameters={parameter.name: parameter}, auth_level=auth_level,
                      etag_request_header=etag_request_header)
        return AggregateRoutes(api, self._checked(kind), lambda: self._core_service(kind),
                               view=view, asynchronous=self.asynchronous)

    def relay_blueprint(self, *, triggers: TriggerSettings | None = None) -> func.Blueprint:
        """The relay (`relay_events`, the change-feed trigger) and the backlog timer
        (`outbox_backlog`); their trigger settings read from the app settings now, at
        indexing, unless given."""
        return relay_blueprint(self.wiring, asynchronous=self.asynchronous, triggers=triggers)

    def operators_blueprint(self, *, models: OperatorModels = OperatorModels(),  # noqa: B008
                            route_prefix: str = "outbox",
                            auth_level: func.AuthLevel = func.AuthLevel.ADMIN
                            ) -> func.Blueprint:
        """The operators' routes (status, quarantine, re-drive) under `route_prefix`, at
        `auth_level` (ADMIN: the host's master key)."""
        return operators_blueprint(self.wiring, asynchronous=self.asynchronous, models=models,
                                   route_prefix=route_prefix, auth_level=auth_level)

    def docs_blueprint(self, functions: Callable[[], Sequence[Any]], *, title: str,
                       description: str = "") -> func.Blueprint:
        """/health (the store answers; "degraded", with what the relay is stuck on, when the
        relay says it is blocked), /openapi.json (every route of `functions()` and the events
        of this outbox's aggregates) and the 404/405 fallback."""
        return docs_blueprint(functions, ping=lambda: self.wiring().store.ping(),
                              relay_blocked=lambda: self.wiring().relay_health.current(),
                              title=title, description=description,
                              aggregates=self.aggregates, asynchronous=self.asynchronous)

    def function_app(
        self,
        *parts: Functions,
        title: str,
        description: str = "",
        http_auth_level: func.AuthLevel = func.AuthLevel.FUNCTION,
        relay: bool = True,
        operators: OperatorModels | bool = True,
        **options: Any,
    ) -> func.FunctionApp:
        """The app: `parts` (blueprints, or the route helper's routes), then the relay's (unless
        `relay=False`: it runs in another app), the operators' (unless `operators=False`; their
        models when given) and the docs' (health, the OpenAPI document of every route and of the
        events of this outbox's aggregates, the 404/405 fallback)."""
        app = IndexedFunctionApp(http_auth_level=http_auth_level, **options)
        for part in parts:
            app.register_functions(_blueprint_of(part))
        if relay:
            app.register_functions(self.relay_blueprint())
        if operators is not False:
            models = operators if isinstance(operators, OperatorModels) else OperatorModels()
            app.register_functions(self.operators_blueprint(models=models))
        app.register_functions(self.docs_blueprint(app.get_functions, title=title,
                                                   description=description))
        return app


def _blueprint_of(part: Functions) -> func.Blueprint:
    if isinstance(part, AggregateRoutes):
        part = part.api
    if isinstance(part, HttpApi):
        return part.blueprint
    return part


class Outbox(OutboxBase):
    """The outbox of one app (the sync API): the aggregates it writes and relays, the services
    its functions run on, and the functions: the route helper's (`routes`), the relay's, the
    operators', the docs' (`function_app`, or each blueprint à la carte).

    `services`: the services factory (default: Cosmos DB, Service Bus and Blob Storage from the
    app settings); `legacy_events`: how to read event documents written before documents named
    their aggregate type and source (an older app's)."""

    asynchronous: ClassVar[bool] = False

    def unit_of_work(self) -> UnitOfWork:
        """A unit of work on this outbox's store (`with outbox.unit_of_work() as uow:`): for a
        command handled outside the route helper (a queue- or timer-triggered function, ...)."""
        return UnitOfWork(self.wiring().unit_of_work())

    def service(self, kind: type[A]) -> AggregateService[A]:
        """Create, read and change aggregates of `kind` (one of this outbox's aggregates)."""
        return AggregateService(self._core_service(kind))

    def session(self, partition_key: str, *, entity: str, session_id: str | None = None,
                source: str | None = None, traceparent: str | None = None) -> Session:
        """A transactional session on `partition_key` of the outbox's container: your own
        documents and the events you publish (about `entity`: their `aggregateType`; their
        SessionId `session_id`, the partition key unless given; their CloudEvents source
        `source`, `/<entity>s` unless given), committed in one transactional batch."""
        return Session(self.wiring().session(partition_key, entity=entity, session_id=session_id,
                                             source=source, traceparent=traceparent))

    @property
    def store(self) -> DocumentStore:
        """The outbox's container (`cosmos_outbox.ports.DocumentStore`: point reads, documents
        of a type, a page at a time), for reads of your own that must see what your sessions
        wrote, on Azure and on the test kit's fakes alike."""
        store = self.services().store
        if not isinstance(store, DocumentStore):
            raise TypeError("this outbox's services are async: use cosmos_outbox.aio.Outbox")
        return store

    def ping(self) -> None:
        """Health: the store answers and its container exists (TransientStoreError if not)."""
        run_sync(self.wiring().store.ping())


class AsyncOutbox(OutboxBase):
    """`Outbox`, async (`cosmos_outbox.aio.Outbox`): its functions are `async def` ones on the
    worker's event loop, over the SDKs' `aio` clients (one client per process, one Service Bus
    sender per running invocation, reused); its unit of work, services and sessions are awaited.
    The route helper's `build` / `apply` may be async."""

    asynchronous: ClassVar[bool] = True

    def unit_of_work(self) -> AsyncUnitOfWork:
        """`async with outbox.unit_of_work() as uow:` (see `Outbox.unit_of_work`)."""
        return self.wiring().unit_of_work()

    def service(self, kind: type[A]) -> AsyncAggregateService[A]:
        return self._core_service(kind)

    def session(self, partition_key: str, *, entity: str, session_id: str | None = None,
                source: str | None = None, traceparent: str | None = None) -> AsyncSession:
        """`async with outbox.session(...) as session:` (see `Outbox.session`)."""
        return self.wiring().session(partition_key, entity=entity, session_id=session_id,
                                     source=source, traceparent=traceparent)

    @property
    def store(self) -> AsyncDocumentStore:
        """The outbox's container (`cosmos_outbox.ports.AsyncDocumentStore`), for reads of your
        own that must see what your sessions wrote (see `Outbox.store`)."""
        return self.wiring().store

    async def ping(self) -> None:
        await self.wiring().store.ping()
