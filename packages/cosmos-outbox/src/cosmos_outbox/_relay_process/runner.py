"""The outbox's relay outside Functions: `RelayProcessor` runs the relay (`Relay`, the same
object the Functions trigger invokes) on cosmos-changefeed's change feed processor (aio), with
the app's settings as the Functions app reads them, and the leases the Functions trigger writes.

As the relay's blueprint declares its trigger (`_blueprints/relay_functions.py`), so the
processor is built:

* the processor's name is the trigger's `leaseContainerPrefix` (OUTBOX_PROCESSOR_NAME): the same
  lease documents, so the relay moves between the Functions trigger and these processes on its
  checkpoints (docs/relay-anywhere.md); the lease container COSMOS_LEASE_CONTAINER is created if
  missing when the connection has the account's key (`createLeaseContainerIfNotExists`; an
  identity cannot create one: the deploy templates do);
* a lease without a checkpoint starts from the beginning (`startFromBeginning`), the poll delay
  is FEED_POLL_DELAY_MS, a batch at most MAX_ITEMS_PER_INVOCATION documents;
* a batch whose relay fails is given again, after the trigger's retry policy's back-off
  (exponential, 1 s to 1 min, for ever: the processor's `min_retry_delay` / `max_retry_delay`)
  -- the processor keeps the lease and does not checkpoint it: nothing is lost, the topic
  drops what was sent twice;
* the backlog timer's work (`outbox_backlog`: the relay's check, the backlog's gauges and TTL
  guard) on BACKLOG_ESTIMATE_SCHEDULE; the console's backlog history recorded by one instance
  (the owner of the first lease), as the Functions timer runs on one instance at a time;
* scheduled events' releases received from SERVICEBUS_SCHEDULE_QUEUE when it is set
  (`release_due_events`'s work: `schedule_receiver.ReleaseReceiver`).

What it knows is `state()` (`ProcessState`: per lease its owner, continuation, when it last moved,
its last error, the estimator's lag; configured, listening). `stop()` stops the processor,
which releases its leases (another instance takes them at its next acquire round); a batch in
flight is cancelled and not checkpointed: its next owner sends it again (the topic's duplicate
detection drops what was sent already) -- re-sent is at most the batch in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import logging
import os
import socket
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from cosmos_outbox._mapper import read_feed
from cosmos_outbox._relay.backlog import record_backlog
from cosmos_outbox._relay_process.state import Facts, ProcessState
from cosmos_outbox.errors import RelayNotReadyError
from cosmos_outbox.telemetry import RelayTelemetry, error_type

if TYPE_CHECKING:
    from azure.cosmos.aio import ContainerProxy, CosmosClient
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import TracerProvider

    from cosmos_changefeed import LeaseContext
    from cosmos_changefeed.aio import ChangeFeedProcessor
    from cosmos_outbox._records import LegacyEvents
    from cosmos_outbox._relay_process.failure_receiver import FailureReceiver
    from cosmos_outbox._relay_process.schedule_receiver import ReleaseReceiver
    from cosmos_outbox._wiring import Services, Wiring
    from cosmos_outbox.cosmos._estimator import AsyncCosmosBacklogEstimator
    from cosmos_outbox.servicebus._target_rules import TargetRuleCheck
    from cosmos_outbox.settings import OutboxSettings

logger = logging.getLogger("cosmos_outbox.relay")

#: The trigger's retry policy (`relay_blueprint`): exponential back-off from 1 s to 1 min.
RETRY_MIN_SECONDS = 1.0
RETRY_MAX_SECONDS = 60.0
#: A processor that cannot start (its lease container missing, Cosmos DB away) tries again after.
START_RETRY_SECONDS = 2.0
#: How long a stop waits for the leases to be released (then they expire).
STOP_GRACE_SECONDS = 10.0
#: A lease that has not moved for this long while changes are pending is stalled (`/health`).
DEFAULT_STALL_AFTER_SECONDS = 300.0


def default_instance_name(environ: dict[str, str] | None = None) -> str:
    """This process's name among the relay's instances (a lease's `Owner`): Container Apps'
    replica name, else the host name and the process id (unique on one machine, where several
    processes share a host name)."""
    env = os.environ if environ is None else environ
    replica = env.get("CONTAINER_APP_REPLICA_NAME", "").strip()
    return replica or f"{socket.gethostname()}-{os.getpid()}"


def lease_intervals(**given: float | None) -> dict[str, float]:
    """The processor's lease intervals (seconds), by keyword: those `given`, else the change
    feed processor's own defaults, read from its signature (cosmos-changefeed says them once)."""
    from cosmos_outbox.settings._base import lease_intervals_of

    return lease_intervals_of(given)


def relay_lease_intervals(
    settings: OutboxSettings, environ: Mapping[str, str], **given: float | None
) -> dict[str, float]:
    """The relay's lease intervals (seconds), each from the first of: `given` (the command's
    flags), the app settings the Functions trigger's binding reads (LEASE_*_INTERVAL_MS), the
    local host's (FUNCTIONS_HOST_COSMOS_LEASE_*_INTERVAL, ms), the processor's own default;
    SettingsError naming where they came from when the renew interval is not under the
    expiration interval."""
    from cosmos_outbox.settings import SettingsError
    from cosmos_outbox.settings._base import (
        LEASE_INTERVAL_SETTINGS,
        LOCAL_HOST_INTERVAL_SETTINGS,
        check_renewal,
    )

    found: dict[str, float | None] = {}
    sources: dict[str, str] = {}
    for name, setting in LEASE_INTERVAL_SETTINGS.items():
        local = LOCAL_HOST_INTERVAL_SETTINGS[name]
        candidates = (
            (given.get(name), f"--{name.replace('_', '-')}"),
            (settings.lease_interval(name), setting),
            (_milliseconds(environ.get(local), local), local),
        )
        value, source = next(
            ((v, s) for v, s in candidates if v is not None), (None, "the processor's default")
        )
        found[name], sources[name] = value, source
    intervals = lease_intervals(**found)
    try:
        check_renewal(intervals, sources)
    except ValueError as exc:
        raise SettingsError(str(exc)) from None
    return intervals


def _milliseconds(raw: str | None, name: str) -> float | None:
    """A local host's interval setting (ms) in seconds; None when unset or 0."""
    if raw is None or not raw.strip():
        return None
    from cosmos_outbox.settings import SettingsError

    try:
        value = int(raw)
    except ValueError:
        raise SettingsError(f"{name}: milliseconds, a whole number, not {raw!r}") from None
    if value < 0:
        raise SettingsError(f"{name}: milliseconds, 0 or more, not {value}")
    return value / 1000 if value else None


class RelayProcessor:
    """The relay on the change feed processor (see the module). `settings`: the outbox's, read
    from the environment when not given (`cosmos_outbox.settings.load_settings`). Lease
    intervals in seconds; those not given are the change feed processor's own defaults
    (cosmos-changefeed's, .NET's: `lease_intervals`). `services` replaces
    what the settings would build (an app's own, as `Outbox(services=...)`); `meter_provider`
    and `tracer_provider` replace the global OpenTelemetry providers for the relay's telemetry.
    `async with RelayProcessor() as relay:` starts it and stops it."""

    def __init__(
        self,
        settings: OutboxSettings | None = None,
        *,
        instance_name: str | None = None,
        legacy_events: LegacyEvents | None = None,
        lease_renew_interval: float | None = None,
        lease_acquire_interval: float | None = None,
        lease_expiration_interval: float | None = None,
        stall_after: float = DEFAULT_STALL_AFTER_SECONDS,
        services: Services | None = None,
        meter_provider: MeterProvider | None = None,
        tracer_provider: TracerProvider | None = None,
    ) -> None:
        from cosmos_outbox.settings import load_settings

        self.settings = settings if settings is not None else load_settings()
        self.instance_name = instance_name or default_instance_name()
        self.processor_name = self.settings.processor_name
        self.stall_after = stall_after
        self._legacy = legacy_events
        self._intervals = relay_lease_intervals(
            self.settings,
            os.environ,
            lease_renew_interval=lease_renew_interval,
            lease_acquire_interval=lease_acquire_interval,
            lease_expiration_interval=lease_expiration_interval,
        )
        self._services = services
        self._meter_provider, self._tracer_provider = meter_provider, tracer_provider
        self._facts = Facts(self.processor_name, self.instance_name, _now())
        self._client: CosmosClient | None = None
        self._wiring: Wiring | None = None
        self._estimator: AsyncCosmosBacklogEstimator | None = None
        self._processor: ChangeFeedProcessor | None = None
        self._receiver: ReleaseReceiver | None = None
        #: the failures' ingest, one receiver per watched dead-letter queue
        self.failure_receivers: list[FailureReceiver] = []
        self._tasks: list[asyncio.Task[None]] = []
        #: The targeted-delivery rules' check at start (None until it ran: `_target_rules`).
        self.target_rules: TargetRuleCheck | None = None
        self._closing: list[Callable[[], Any]] = []
        self._listening = asyncio.Event()

    # -- what it knows -------------------------------------------------------------------------

    def state(self) -> ProcessState:
        """A snapshot of what this process knows (`ProcessState`)."""
        return self._facts.state()

    @property
    def owned_leases(self) -> list[str]:
        return self._processor.owned_leases if self._processor is not None else []

    async def wait_until_listening(self) -> None:
        """Return once the relay listens: its processor started (the lease store initialised),
        its first acquire round done and its leases' start fixed (bound the wait with
        `asyncio.timeout`)."""
        await self._listening.wait()

    # -- start and stop ------------------------------------------------------------------------

    async def start(self) -> None:
        """Build the relay (a settings error raises here: SettingsError naming it) and start the
        processor, the backlog timer, the operations' timer and the releases' receiver; returns
        at once (the processor starts, and retries, in the background: `wait_until_listening`)."""
        from cosmos_outbox._wiring import Wiring

        services = self._services if self._services is not None else self._services_from_settings()
        self._wiring = Wiring(services, legacy=self._legacy)
        if self._meter_provider is not None or self._tracer_provider is not None:
            self._wiring.telemetry = RelayTelemetry(
                destination=services.topic,
                meter_provider=self._meter_provider,
                tracer_provider=self._tracer_provider,
            )
        self._wiring.relay()  # the publisher the settings name, or SettingsError now
        self._tasks.append(asyncio.create_task(self._run_processor(), name="relay-processor"))
        self._tasks.append(asyncio.create_task(self._backlog_timer(), name="relay-backlog"))
        self._tasks.append(asyncio.create_task(self._operations_timer(), name="relay-operations"))
        self._tasks.append(asyncio.create_task(self._check_target_rules(), name="relay-rules"))
        queue = self.settings.schedule_queue
        if queue is not None:
            from cosmos_outbox._relay_process.schedule_receiver import ReleaseReceiver

            self._receiver = ReleaseReceiver(
                self._servicebus_client, queue, self._wiring.releases()
            )
            self._receiver.start()
        self._start_failure_receivers()
        logger.info(
            "relay process %s: processor '%s' over %s/%s, leases in %s; poll %gs, batch %d; "
            "acquire %gs, renew %gs, expiry %gs",
            self.instance_name,
            self.processor_name,
            self.settings.cosmos_database,
            self.settings.cosmos_container,
            self.settings.cosmos_lease_container,
            self.settings.feed_poll_delay_ms / 1000,
            self.settings.max_items_per_invocation,
            self._intervals["lease_acquire_interval"],
            self._intervals["lease_renew_interval"],
            self._intervals["lease_expiration_interval"],
            extra={"outbox.relay_instance": self.instance_name},
        )

    def _start_failure_receivers(self) -> None:
        """With OUTBOX_FAILURE_INGEST `true`, a receiver per watched dead-letter queue keeping
        each dead letter as a failure record (`failure_receiver`); `elsewhere`, none (another
        host drains them)."""
        if not self.settings.failure_ingest_here or self._wiring is None:
            return
        from cosmos_outbox._relay_process.failure_receiver import FailureReceiver

        for entity in self._wiring.services.watched:
            receiver = FailureReceiver(
                self._servicebus_client,
                self.settings.servicebus_topic or "",
                entity,
                self._wiring.failures,
            )
            receiver.start()
            self.failure_receivers.append(receiver)

    async def _check_target_rules(self) -> None:
        """Whether each subscription of the topic carries the targeted-delivery rule, logged
        once at start (a warning naming those lacking it, or why it was not checked);
        `target_rules` keeps it."""
        from cosmos_outbox.servicebus._target_rules import log_target_rules

        # a daemon thread of its own, not the loop's executor: a management API that hangs
        # (a frozen endpoint: its timeouts, up to 30 s) holds neither the stop nor the exit
        loop = asyncio.get_running_loop()
        found: asyncio.Future[TargetRuleCheck] = loop.create_future()

        def settle(result: TargetRuleCheck) -> None:
            if not found.done():
                found.set_result(result)

        def check() -> None:
            result = log_target_rules(self.settings)
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(settle, result)

        threading.Thread(target=check, name="relay-target-rules", daemon=True).start()
        self.target_rules = await found

    async def stop(self, grace: float = STOP_GRACE_SECONDS) -> None:
        """Stop the processor, releasing its leases (a batch in flight is not checkpointed: its
        next owner sends it again), then the timer and the receiver; close the clients."""
        self._facts.listening = False
        self._listening.clear()
        processor, self._processor = self._processor, None
        if processor is not None:
            await processor.stop(timeout=grace)
            kept = self._facts.state().held  # a lease's release is what takes it off
            if kept:
                logger.warning(
                    "relay process %s: stopped; lease(s) %s not released: another instance "
                    "takes them once they expire",
                    self.instance_name,
                    ", ".join(kept),
                )
            else:
                logger.info("relay process %s: stopped, its leases released", self.instance_name)
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()
        if self._receiver is not None:
            await self._receiver.stop()
        for failures in self.failure_receivers:
            await failures.stop()
        self.failure_receivers.clear()
        for close in reversed(self._closing):
            with contextlib.suppress(Exception):
                await close()
        self._closing.clear()

    async def __aenter__(self) -> RelayProcessor:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    # -- what it is built of ------------------------------------------------------------------

    def _services_from_settings(self) -> Services:
        """The settings' services, on this process's own Cosmos DB client (closed at the stop),
        their publisher, schedule queue and payload store closed at the stop too."""
        from cosmos_outbox._wiring import services_from_settings
        from cosmos_outbox.cosmos.aio import CosmosDocumentStore

        services = services_from_settings(self.settings, asynchronous=True)
        database = self._cosmos().get_database_client(self.settings.cosmos_database)
        return dataclasses.replace(
            services,
            store=CosmosDocumentStore(
                database.get_container_client(self.settings.cosmos_container)
            ),
            publisher=self._closed_at_stop(services.publisher),
            schedule=self._closed_at_stop(services.schedule),
            payloads=self._closed_at_stop(services.payloads),
        )

    def _closed_at_stop(self, make: Callable[[], Any]) -> Callable[[], Any]:
        def made() -> Any:
            leaf = make()
            if leaf is not None and hasattr(leaf, "close"):
                self._closing.append(leaf.close)
            return leaf

        return made

    def _cosmos(self) -> CosmosClient:
        if self._client is None:
            from cosmos_outbox.cosmos._client import async_cosmos_client

            settings = self.settings
            self._client = async_cosmos_client(
                connection_string=(
                    settings.cosmos_connection.get_secret_value()
                    if settings.cosmos_connection is not None
                    else None
                ),
                endpoint=settings.cosmos_account_endpoint,
                verify_tls=settings.cosmos_verify_tls,
            )
            self._closing.append(self._client.close)
        return self._client

    def _servicebus_client(self) -> Any:
        from azure.servicebus.aio import ServiceBusClient

        settings = self.settings
        if settings.servicebus_connection is not None:
            return ServiceBusClient.from_connection_string(
                settings.servicebus_connection.get_secret_value()
            )
        from azure.identity.aio import DefaultAzureCredential

        return ServiceBusClient(
            str(settings.servicebus_namespace), credential=DefaultAzureCredential()
        )

    async def _containers(self) -> tuple[ContainerProxy, ContainerProxy]:
        """The outbox's container and the lease container (created if missing, with the
        account's key, as the trigger's `createLeaseContainerIfNotExists`)."""
        from azure.cosmos import PartitionKey

        database = self._cosmos().get_database_client(self.settings.cosmos_database)
        monitored = database.get_container_client(self.settings.cosmos_container)
        name = self.settings.cosmos_lease_container
        if self.settings.cosmos_connection is not None:
            leases = await database.create_container_if_not_exists(
                id=name, partition_key=PartitionKey(path="/id"), default_ttl=-1
            )
        else:
            leases = database.get_container_client(name)
        return monitored, leases

    # -- the processor -----------------------------------------------------------------------

    async def _run_processor(self) -> None:
        from cosmos_changefeed.aio import ChangeFeedProcessor
        from cosmos_outbox.cosmos._estimator import AsyncCosmosBacklogEstimator

        settings = self.settings
        while True:
            try:
                monitored, leases = await self._containers()
                self._estimator = AsyncCosmosBacklogEstimator(
                    monitored, leases, processor_name=self.processor_name
                )
                processor = ChangeFeedProcessor(
                    monitored,
                    leases,
                    processor_name=self.processor_name,
                    instance_name=self.instance_name,
                    handler=self._handle,
                    start_from="beginning",
                    poll_delay=settings.feed_poll_delay_ms / 1000,
                    max_items=settings.max_items_per_invocation,
                    on_lease_acquired=lambda token: self._facts.acquired(token, _now()),
                    on_lease_released=self._released,
                    on_error=lambda failure: self._facts.failed(
                        failure.lease_token,
                        f"{error_type(failure.error)}: {failure.error}",
                        _now(),
                    ),
                    min_retry_delay=RETRY_MIN_SECONDS,
                    max_retry_delay=RETRY_MAX_SECONDS,
                    lease_renew_interval=self._intervals["lease_renew_interval"],
                    lease_acquire_interval=self._intervals["lease_acquire_interval"],
                    lease_expiration_interval=self._intervals["lease_expiration_interval"],
                )
                await processor.start()
                self._processor = processor
                self._facts.not_configured = None
                break
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._facts.not_configured = f"{error_type(exc)}: {_first_line(exc)}"
                logger.warning(
                    "relay process %s: the change feed processor cannot start yet (%s); "
                    "again in %gs",
                    self.instance_name,
                    self._facts.not_configured,
                    START_RETRY_SECONDS,
                )
                await asyncio.sleep(START_RETRY_SECONDS)
        await processor.wait_until_listening()
        self._facts.listening = True
        self._listening.set()
        logger.info(
            "relay process %s: listening, lease(s) %s",
            self.instance_name,
            ", ".join(processor.owned_leases) or "none yet",
        )

    def _released(self, token: str) -> None:
        self._facts.released(token)

    async def _handle(self, context: LeaseContext, changes: list[dict[str, Any]]) -> None:
        """One batch of a lease: relayed, or raised (the processor gives the same batch again
        after the retry policy's back-off, and does not checkpoint it)."""
        assert self._wiring is not None
        token = context.lease_token
        await self._wiring.relay().relay(read_feed(changes, legacy=self._legacy))
        self._facts.checkpointed(token, context.continuation, _now())

    # -- the backlog timer ------------------------------------------------------------------

    async def _backlog_timer(self) -> None:
        """The backlog timer's ticks (`outbox_backlog`'s work), on BACKLOG_ESTIMATE_SCHEDULE
        (NCRONTAB with seconds, as the Functions timer reads it); one at once, so the state has
        the leases' figures from the start."""
        from croniter import croniter

        schedule = croniter(
            self.settings.backlog_estimate_schedule,
            dt.datetime.now(dt.UTC),
            second_at_beginning=True,
        )
        while True:
            try:
                await self.tick()
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.warning("relay process: the backlog tick failed", exc_info=True)
            wait = (schedule.get_next(dt.datetime) - dt.datetime.now(dt.UTC)).total_seconds()
            await asyncio.sleep(max(0.0, wait))

    async def _operations_timer(self) -> None:
        """The bulk operations' worker (the Functions app's `outbox_operations`), on
        OUTBOX_OPERATIONS_SCHEDULE: each tick works the open operations for up to
        OPERATIONS_TICK_SECONDS (`cosmos_outbox.operations._bulk._worker`)."""
        from croniter import croniter

        from cosmos_outbox._blueprints.relay_functions import OPERATIONS_TICK_SECONDS

        expression = self.settings.operations_schedule
        while True:  # the next occurrence after now (a long tick skips those it overran)
            now = dt.datetime.now(dt.UTC)
            due = croniter(expression, now, second_at_beginning=True).get_next(dt.datetime)
            wait = (due - dt.datetime.now(dt.UTC)).total_seconds()
            await asyncio.sleep(max(0.0, wait))
            if self._wiring is None:
                continue
            try:
                await self._wiring.operations().bulk.work(budget_seconds=OPERATIONS_TICK_SECONDS)
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.warning("relay process: the operations' tick failed", exc_info=True)

    async def tick(self) -> None:
        """One tick: the relay's check, the leases read (the state's owners, continuations and
        lags; the backlog's gauges and TTL guard), the console's history when this instance
        owns the first lease."""
        wiring, estimator = self._wiring, self._estimator
        if wiring is None:
            return
        relay = wiring.relay()
        problem = await relay.check()
        self._facts.not_ready = problem
        if estimator is None:
            return
        from cosmos_outbox.cosmos._estimator import backlog_of

        try:
            found = await estimator.pending()
        except RelayNotReadyError as exc:
            await relay.not_ready(exc)
            self._facts.not_ready = str(exc)
            return
        self._facts.estimated(
            [
                (
                    p.lease_token,
                    p.instance_name,
                    p.lease.continuation if p.lease is not None else None,
                    p.estimated_lag,
                )
                for p in found
            ],
            _now(),
        )
        backlog = record_backlog(
            [backlog_of(p) for p in found],
            wiring.telemetry,
            event_ttl_seconds=wiring.event_ttl_seconds,
        )
        first = min(found, key=lambda p: _order(p.lease_token), default=None)
        if first is not None and first.instance_name == self.instance_name:
            await wiring.backlog_history.record(backlog.pending, backlog.oldest_age_seconds)
        if problem is None:
            await relay.ready()


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _order(token: str) -> tuple[int, str]:
    return (int(token), "") if token.isdigit() else (1 << 62, token)


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0][:300] if str(exc) else ""
