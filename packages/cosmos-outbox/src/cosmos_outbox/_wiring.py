"""What an outbox runs on and what is built from it, once per process: `Services` (the leaves:
a document store, a publisher, a payload store, a backlog estimator, the paging tokens' secret,
the TTLs, the targeted-delivery rule check), their factory from the app settings
(`services_from_settings`), and `Wiring` (the unit of work, the transaction, the relay and its
telemetry, the quarantine, the operators' use cases, the backlog's last hour, the quarantine
list's tokens), the same for the sync and the async outbox.

Below the blueprints: the relay's and the operators' blueprints take a `Wiring` to build their
functions on, and `_outbox` (the composition root an app holds) imports both, so nothing here
imports back up."""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, TypeVar, Unpack

from cosmos_outbox._records import LegacyEvents
from cosmos_outbox._sync_over_async import as_async
from cosmos_outbox._write.streams import Sequences
from cosmos_outbox._write.transaction import Transaction, TransactionOptions
from cosmos_outbox._write.unit_of_work import UnitOfWork
from cosmos_outbox.http._paging import derive_key
from cosmos_outbox.ports import (
    AsyncBacklogEstimator,
    AsyncDeadLetterQueues,
    AsyncDocumentStore,
    AsyncMessagePublisher,
    AsyncPayloadStore,
    AsyncScheduleQueue,
    AsyncTargetRules,
    BacklogEstimator,
    DeadLetterEntity,
    DeadLetterQueues,
    DocumentStore,
    MessagePublisher,
    PayloadStore,
    ScheduleQueue,
    TargetRules,
)
from cosmos_outbox.settings import (
    DEFAULT_EVENT_TTL_SECONDS,
    DEFAULT_IDEMPOTENCY_TTL_SECONDS,
    DEFAULT_PAYLOAD_MAX_BYTES,
)
from cosmos_outbox.settings._base import DEFAULT_FAILURE_RETENTION_SECONDS

if TYPE_CHECKING:
    from cosmos_outbox._quarantine import Quarantine
    from cosmos_outbox._relay.forwarding import Relay
    from cosmos_outbox._relay.scheduled import Releases
    from cosmos_outbox.operations._failures import Failures
    from cosmos_outbox.operations._operations import Operations
    from cosmos_outbox.settings import OutboxSettings
    from cosmos_outbox.telemetry import RelayTelemetry

logger = logging.getLogger("cosmos_outbox")
T = TypeVar("T")


def _no_backlog() -> BacklogEstimator:
    raise NotImplementedError("these services estimate no backlog")


def _no_dead_letters() -> DeadLetterQueues | AsyncDeadLetterQueues | None:
    return None


def _no_subscribers() -> Mapping[str, DocumentStore | AsyncDocumentStore]:
    return {}


#: The metadata key of a `Services` field that is a leaf adapter made on first use: the name of
#: its factory from the app settings in this module (None: built with the store's client, in
#: `services_from_settings`). The one place an adapter is wired in: `services_from_settings`
#: builds every leaf from it, `Wiring.made` makes each once (async), and the test kit gives each
#: a fake by its name (`leaves()`).
LEAF = "cosmos_outbox.leaf"


@dataclass(frozen=True)
class Services:
    """What an outbox runs on: its adapters (sync or async ones: the async API awaits sync
    ones as they are), the secret its paging tokens are sealed with (derive a key per purpose
    with `token_key`), and its TTLs. The leaves (`leaves()`: the publisher, the claim check's
    payload store, the backlog estimator, the schedule queue, the dead-letter queues) are made
    on first use, where the relay or the operators run."""

    store: DocumentStore | AsyncDocumentStore
    publisher: Callable[[], MessagePublisher | AsyncMessagePublisher] = field(
        metadata={LEAF: "publisher_from_settings"}
    )
    token_secret: str
    #: the claim check's store (None: no claim check)
    payloads: Callable[[], PayloadStore | AsyncPayloadStore | None] = field(
        default=lambda: None, metadata={LEAF: "payloads_from_settings"}
    )
    backlog: Callable[[], BacklogEstimator | AsyncBacklogEstimator] = field(
        default=_no_backlog, metadata={LEAF: None}
    )
    #: the topic (the relay's telemetry names it)
    topic: str = ""
    #: what the publisher puts before each CloudEvents source path (the previews' messages too)
    source_base: str = ""
    event_ttl_seconds: int = DEFAULT_EVENT_TTL_SECONDS
    idempotency_ttl_seconds: int = DEFAULT_IDEMPOTENCY_TTL_SECONDS
    #: how long a pending event may wait before the relay is stalled (the trigger's poll delay
    #: and OUTBOX_RELAY_STALL_SECONDS)
    stall_after_seconds: float = 61.0
    max_payload_bytes: int = DEFAULT_PAYLOAD_MAX_BYTES
    #: where the relay schedules scheduled events' releases (None: no schedule queue, a
    #: scheduled event is quarantined)
    schedule: Callable[[], ScheduleQueue | AsyncScheduleQueue | None] = field(
        default=lambda: None, metadata={LEAF: "schedule_from_settings"}
    )
    #: the dead-letter queues of `watched` (None: none can be read)
    dead_letters: Callable[[], DeadLetterQueues | AsyncDeadLetterQueues | None] = field(
        default=_no_dead_letters, metadata={LEAF: "dead_letters_from_settings"}
    )
    #: the topic's subscriptions (and queues) whose dead letters the operators watch
    watched: tuple[DeadLetterEntity, ...] = ()
    #: how long an archived or resolved failure record is kept (OUTBOX_FAILURE_RETENTION_SECONDS)
    failure_retention_seconds: int = DEFAULT_FAILURE_RETENTION_SECONDS
    #: whether the watched dead-letter queues are drained into failure records, here or
    #: elsewhere (OUTBOX_FAILURE_INGEST `true` or `elsewhere`): the groups and their operations
    #: then read the records
    failure_ingest: bool = False
    #: whether each subscription of the topic carries the targeted-delivery rule, read through
    #: the management API (None: nothing can read it; the operators' status says so)
    target_rules: Callable[[], TargetRules | AsyncTargetRules | None] = field(
        default=lambda: None, metadata={LEAF: "target_rules_from_settings"}
    )
    #: the projection containers of the library's subscribers, by the subscription each reads
    #: (made on first use): their inbox, held events and gaps, read by the operators' routes
    subscriber_stores: Callable[[], Mapping[str, DocumentStore | AsyncDocumentStore]] = (
        _no_subscribers
    )

    def token_key(self, purpose: str) -> bytes:
        """A key for one purpose derived from the secret (never the secret itself)."""
        return derive_key(self.token_secret, purpose=purpose)


def leaves() -> tuple[str, ...]:
    """The names of the `Services` fields that are leaf adapters made on first use (each wired
    in once, where it is declared): what a test kit gives a fake for."""
    return tuple(f.name for f in fields(Services) if LEAF in f.metadata)


def token_secret(settings: OutboxSettings) -> str:
    """What paging tokens are sealed with: the store's account key when there is one (the same
    on every instance); with a managed identity there is none, and the account, database and
    container names are used, so tokens are still strictly checked but not secret."""
    if settings.cosmos_connection is not None:
        return settings.cosmos_connection.get_secret_value()
    return "|".join(
        (
            settings.cosmos_account_endpoint or "",
            settings.cosmos_database,
            settings.cosmos_container,
        )
    )


#: What each adapter's SettingsError says when neither Service Bus connection setting is set.
_NO_CONNECTION: dict[str, str] = {
    "publisher": "invalid settings: set ServiceBusConnection (connection string) or "
    "ServiceBusConnection__fullyQualifiedNamespace (managed identity) to relay events",
    "schedule": "invalid settings: SERVICEBUS_SCHEDULE_QUEUE is set: set ServiceBusConnection "
    "(connection string) or ServiceBusConnection__fullyQualifiedNamespace (managed identity) "
    "too",
    "dead letters": "invalid settings: OUTBOX_SUBSCRIPTIONS / OUTBOX_DEAD_LETTER_QUEUES need "
    "ServiceBusConnection (or ServiceBusConnection__fullyQualifiedNamespace)",
}


def _on_servicebus(
    settings: OutboxSettings, kind: type[T], entity: str, missing: str, **options: Any
) -> T:
    """A `kind` (a Service Bus adapter) on `entity`, over the connection string when it is set,
    else the namespace with the managed identity; SettingsError `missing` when neither is."""
    from cosmos_outbox.settings import SettingsError

    factory: Any = kind  # each adapter's from_connection_string / from_namespace
    made: T
    if settings.servicebus_connection is not None:
        secret = settings.servicebus_connection.get_secret_value()
        made = factory.from_connection_string(secret, entity, **options)
    elif settings.servicebus_namespace:
        made = factory.from_namespace(settings.servicebus_namespace, entity, **options)
    else:
        raise SettingsError(missing)
    return made


def publisher_from_settings(
    settings: OutboxSettings, *, asynchronous: bool = False
) -> MessagePublisher | AsyncMessagePublisher:
    """The relay's publisher the settings name (SettingsError naming what is missing: the topic,
    the connection). No I/O: the first send connects."""
    from cosmos_outbox.settings import SettingsError

    if not settings.servicebus_topic:
        raise SettingsError(
            "invalid settings: set SERVICEBUS_TOPIC (the topic the relay sends to) to relay events"
        )
    options: dict[str, Any] = {
        "max_message_bytes": settings.servicebus_max_message_bytes,
        "cloudevents_source_base": settings.cloudevents_source_base,
    }
    if asynchronous:
        from cosmos_outbox.servicebus.aio import ServiceBusPublisher as Publisher
    else:
        from cosmos_outbox.servicebus import ServiceBusPublisher as Publisher  # type: ignore[assignment]
    topic, missing = settings.servicebus_topic, _NO_CONNECTION["publisher"]
    return _on_servicebus(settings, Publisher, topic, missing, **options)


def schedule_from_settings(
    settings: OutboxSettings, *, asynchronous: bool = False
) -> ScheduleQueue | AsyncScheduleQueue | None:
    """The schedule queue the settings name (SERVICEBUS_SCHEDULE_QUEUE, on the topic's
    connection); None when it is not set. No I/O: the relay's first check opens its link."""
    queue = settings.schedule_queue
    if queue is None:
        return None
    if asynchronous:
        from cosmos_outbox.servicebus._schedule import AsyncServiceBusScheduleQueue as Queue
    else:
        from cosmos_outbox.servicebus._schedule import (  # type: ignore[assignment]
            ServiceBusScheduleQueue as Queue,
        )
    return _on_servicebus(settings, Queue, queue, _NO_CONNECTION["schedule"])


def dead_letters_from_settings(
    settings: OutboxSettings, *, asynchronous: bool = False
) -> DeadLetterQueues | AsyncDeadLetterQueues | None:
    """The dead-letter queues of the watched subscriptions and queues (OUTBOX_SUBSCRIPTIONS,
    OUTBOX_DEAD_LETTER_QUEUES) on the Service Bus connection the relay uses; None when none is
    watched. No I/O."""
    from cosmos_outbox.settings import SettingsError

    if not settings.subscriptions() and not settings.queues():
        return None
    if settings.subscriptions() and not settings.servicebus_topic:
        raise SettingsError(
            "invalid settings: OUTBOX_SUBSCRIPTIONS names subscriptions of the topic: set "
            "SERVICEBUS_TOPIC"
        )
    topic = settings.servicebus_topic or ""
    if asynchronous:
        from cosmos_outbox.servicebus.aio import ServiceBusDeadLetters as Queues
    else:
        from cosmos_outbox.servicebus import ServiceBusDeadLetters as Queues  # type: ignore[assignment]
    return _on_servicebus(settings, Queues, topic, _NO_CONNECTION["dead letters"])


def target_rules_from_settings(
    settings: OutboxSettings, *, asynchronous: bool = False
) -> TargetRules | AsyncTargetRules | None:
    """The targeted-delivery rule check on the relay's topic and Service Bus connection (the
    management API: Manage rights, or the role Azure Service Bus Data Owner); None without a
    topic. No I/O: each `check()` asks."""
    if not settings.servicebus_topic:
        return None
    if asynchronous:
        from cosmos_outbox.servicebus.aio import ServiceBusTargetRules as Rules
    else:
        from cosmos_outbox.servicebus import ServiceBusTargetRules as Rules  # type: ignore[assignment]
    connection = settings.servicebus_connection
    return Rules(
        settings.servicebus_topic,
        connection_string=connection.get_secret_value() if connection is not None else None,
        namespace=settings.servicebus_namespace,
    )


def watched_from_settings(settings: OutboxSettings) -> tuple[DeadLetterEntity, ...]:
    """The entities whose dead letters the operators watch, from the settings."""
    return tuple(
        [DeadLetterEntity(name, "subscription") for name, _, _ in settings.subscriptions()]
        + [DeadLetterEntity(name, "queue") for name in settings.queues()]
    )


def payloads_from_settings(
    settings: OutboxSettings, *, asynchronous: bool = False
) -> PayloadStore | AsyncPayloadStore | None:
    """The claim check's payload store the settings name (OutboxPayloadStorage, else
    AzureWebJobsStorage); None when there is none, or OUTBOX_PAYLOAD_MAX_BYTES is 0. No I/O."""
    payload = settings.payload_storage() if settings.payload_max_bytes else None
    if payload is None:
        return None
    logger.info(
        "claim check: payloads go to container %s (from %s); the relay checks that it "
        "exists before it first relays",
        payload.container,
        payload.setting,
        extra={
            "outbox.payload_container": payload.container,
            "outbox.payload_setting": payload.setting,
        },
    )
    if asynchronous:
        from cosmos_outbox.blob.aio import BlobPayloadStore as Store
    else:
        from cosmos_outbox.blob import BlobPayloadStore as Store  # type: ignore[assignment]
    if payload.connection_string is not None:
        return Store.from_connection_string(
            payload.connection_string.get_secret_value(), payload.container
        )
    assert payload.service_uri is not None
    return Store.from_service_uri(payload.service_uri, payload.container)


def services_from_settings(
    settings: OutboxSettings | None = None, *, asynchronous: bool = False
) -> Services:
    """Cosmos DB, Service Bus and Blob Storage, from the settings (read and validated here,
    once, unless given): the SDKs' sync clients, or their `aio` ones when `asynchronous`. The
    sync Cosmos DB client reads the account now; Service Bus is reached on the relay's first
    send; Blob Storage on its first offload."""
    from cosmos_outbox.settings import load_settings

    settings = settings if settings is not None else load_settings()
    connection = (
        settings.cosmos_connection.get_secret_value()
        if settings.cosmos_connection is not None
        else None
    )
    database, container = settings.cosmos_database, settings.cosmos_container
    leases = settings.cosmos_lease_container
    store: DocumentStore | AsyncDocumentStore
    backlog: Callable[[], BacklogEstimator | AsyncBacklogEstimator]
    subscribers: Callable[[], Mapping[str, DocumentStore | AsyncDocumentStore]]
    watched_containers = [
        (name, db or database, projections)
        for name, db, projections in settings.subscriptions()
        if projections is not None
    ]
    make_client: Callable[..., Any]
    if asynchronous:  # the same adapters' aio twins, on the SDK's aio client
        from cosmos_outbox.cosmos._client import async_cosmos_client as make_client
        from cosmos_outbox.cosmos.aio import CosmosBacklogEstimator as Estimator
        from cosmos_outbox.cosmos.aio import CosmosDocumentStore as Store
    else:
        from cosmos_outbox.cosmos import CosmosBacklogEstimator as Estimator  # type: ignore[assignment]
        from cosmos_outbox.cosmos import CosmosDocumentStore as Store  # type: ignore[assignment]
        from cosmos_outbox.cosmos._client import cosmos_client as make_client
    client = make_client(
        connection_string=connection,
        endpoint=settings.cosmos_account_endpoint,
        verify_tls=settings.cosmos_verify_tls,
    )
    outbox_database = client.get_database_client(database)
    store = Store(outbox_database.get_container_client(container))
    backlog = lambda: Estimator(  # noqa: E731
        outbox_database.get_container_client(container),
        outbox_database.get_container_client(leases),
        processor_name=settings.processor_name,
    )
    subscribers = lambda: {  # noqa: E731
        name: Store(client.get_database_client(db).get_container_client(projections))
        for name, db, projections in watched_containers
    }
    _log_built(settings, identity=connection is None, asynchronous=asynchronous)
    return Services(
        store=store,
        backlog=backlog,
        token_secret=token_secret(settings),
        topic=settings.servicebus_topic or "",
        source_base=settings.cloudevents_source_base,
        event_ttl_seconds=settings.event_ttl_seconds,
        idempotency_ttl_seconds=settings.idempotency_ttl_seconds,
        stall_after_seconds=settings.feed_poll_delay_ms / 1000 + settings.relay_stall_seconds,
        max_payload_bytes=settings.payload_max_bytes,
        **{
            f.name: functools.partial(
                globals()[f.metadata[LEAF]], settings, asynchronous=asynchronous
            )
            for f in fields(Services)
            if f.metadata.get(LEAF) is not None
        },
        watched=watched_from_settings(settings),
        failure_retention_seconds=settings.failure_retention_seconds,
        failure_ingest=settings.failure_records,
        subscriber_stores=subscribers,
    )


def _log_built(settings: OutboxSettings, *, identity: bool, asynchronous: bool) -> None:
    database, container = settings.cosmos_database, settings.cosmos_container
    logger.info(
        "outbox services built: database=%s container=%s topic=%s identity_cosmos=%s async=%s",
        database,
        container,
        settings.servicebus_topic,
        identity,
        asynchronous,
        extra={
            "outbox.database": database,
            "outbox.container": container,
            "outbox.topic": settings.servicebus_topic,
        },
    )


class Wiring:
    """The outbox's objects, built from its services (the one composition path): the unit of
    work, the relay and its telemetry, the quarantine, the operators' use cases. The relay and
    the backlog estimator are made once, on first use."""

    def __init__(self, services: Services, *, legacy: LegacyEvents | None = None) -> None:
        from cosmos_outbox._quarantine import Quarantine
        from cosmos_outbox._relay.backlog_history import BacklogHistory
        from cosmos_outbox._relay.health import RelayHealth
        from cosmos_outbox.operations._failures import Failures
        from cosmos_outbox.telemetry import RelayTelemetry

        self.services = services
        self.legacy = legacy
        self.store: AsyncDocumentStore = as_async(services.store)
        self.telemetry: RelayTelemetry = RelayTelemetry(destination=services.topic)
        self.relay_health = RelayHealth(self.store)
        #: the backlog timer's last hour of readings (the console's chart)
        self.backlog_history = BacklogHistory(self.store)
        self._made: dict[str, Any] = {}
        self._subscriber_stores: dict[str, AsyncDocumentStore] | None = None
        self.event_ttl_seconds = services.event_ttl_seconds
        self._lock = threading.RLock()  # `relay()` makes its leaves (`made`) under it
        self._relay: Relay | None = None
        self._releases: Releases | None = None
        self._operations: Operations | None = None
        self.sequences = Sequences()
        #: the failed messages kept as data (`cosmos_outbox.operations._failures`)
        self.failures: Failures = Failures(
            self.store, retention_seconds=services.failure_retention_seconds
        )
        #: the quarantine; each quarantine kept as a failure record too while they are kept
        self.quarantine: Quarantine = Quarantine(
            self.store, legacy=legacy, failures=self.failures if services.failure_ingest else None
        )

    def transaction(
        self, partition_key: str, *, entity: str, **options: Unpack[TransactionOptions]
    ) -> Transaction:
        return Transaction(
            self.store,
            partition_key,
            entity=entity,
            event_ttl_seconds=self.services.event_ttl_seconds,
            idempotency_ttl_seconds=self.services.idempotency_ttl_seconds,
            sequences=self.sequences,
            **options,
        )

    def unit_of_work(self) -> UnitOfWork:
        return UnitOfWork(
            self.store,
            event_ttl_seconds=self.services.event_ttl_seconds,
            idempotency_ttl_seconds=self.services.idempotency_ttl_seconds,
        )

    def relay(self) -> Relay:
        with self._lock:
            if self._relay is None:
                from cosmos_outbox._relay.forwarding import Relay

                payloads = self.services.payloads()
                self._relay = Relay(
                    self.services.publisher(),
                    self.quarantine,
                    self.telemetry,
                    payloads=payloads,
                    max_payload_bytes=self.services.max_payload_bytes,
                    health=self.relay_health,
                    topic=self.services.topic,
                    schedule=self._schedule(),
                )
            return self._relay

    def releases(self) -> Releases:
        """Scheduled events' releases at their due time (`release_due_events`)."""
        with self._lock:
            if self._releases is None:
                from cosmos_outbox._relay.scheduled import Releases

                self._releases = Releases(
                    self.store,
                    self._schedule(),
                    event_ttl_seconds=self.services.event_ttl_seconds,
                )
            return self._releases

    def made(self, leaf: str) -> Any:
        """The leaf adapter `leaf` of the services (`leaves()`), made once, on first use, as its
        async port (a sync one wrapped); None where the services have none."""
        with self._lock:
            if leaf not in self._made:
                made = getattr(self.services, leaf)()
                self._made[leaf] = as_async(made) if made is not None else None
            return self._made[leaf]

    def _schedule(self) -> AsyncScheduleQueue | None:
        """The schedule queue (the relay and the releases share it)."""
        queue: AsyncScheduleQueue | None = self.made("schedule")
        return queue

    def backlog(self) -> AsyncBacklogEstimator:
        estimator: AsyncBacklogEstimator = self.made("backlog")
        return estimator

    def dead_letters(self) -> AsyncDeadLetterQueues | None:
        """The watched entities' dead-letter queues (made once, on first use; None: none)."""
        queues: AsyncDeadLetterQueues | None = self.made("dead_letters")
        return queues

    def target_rules(self) -> AsyncTargetRules | None:
        """The targeted-delivery rule check (made once, on first use; None: none)."""
        rules: AsyncTargetRules | None = self.made("target_rules")
        return rules

    def subscriber_stores(self) -> dict[str, AsyncDocumentStore]:
        """The subscribers' projection containers the app knows, by subscription (made once)."""
        with self._lock:
            if self._subscriber_stores is None:
                self._subscriber_stores = {
                    name: as_async(store)
                    for name, store in self.services.subscriber_stores().items()
                }
            return self._subscriber_stores

    def operations(self) -> Operations:
        """The operators' one API (`cosmos_outbox.operations`), made once, on first use."""
        with self._lock:
            if self._operations is None:
                from cosmos_outbox.operations import _operations as made
                from cosmos_outbox.operations import _parts

                self._operations = made.Operations(
                    _parts.Parts(
                        store=self.store,
                        quarantine=self.quarantine,
                        relay=self.relay,
                        backlog=self.backlog,
                        history=self.backlog_history,
                        event_ttl_seconds=self.event_ttl_seconds,
                        tokens=_parts.PagingTokens.derived(self.services.token_key),
                        legacy=self.legacy,
                        health=self.relay_health,
                        dead_letters=self.dead_letters,
                        watched=self.services.watched,
                        subscribers=self.subscriber_stores,
                        target_rules=self.target_rules,
                        stall_after_seconds=self.services.stall_after_seconds,
                        source_base=self.services.source_base,
                        failures=self.failures if self.services.failure_ingest else None,
                    )
                )
            return self._operations
