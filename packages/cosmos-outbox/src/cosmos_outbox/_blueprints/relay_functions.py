"""The relay as a Functions blueprint, for any aggregate: the change-feed relay
(`relay_events`), the backlog estimate on a timer (`outbox_backlog`), the bulk operations'
worker on a timer (`outbox_operations`, OUTBOX_OPERATIONS_SCHEDULE), and, where a schedule queue
is set (SERVICEBUS_SCHEDULE_QUEUE), the release of scheduled events at their due time
(`release_due_events`, a Service Bus queue trigger: `cosmos_outbox._relay.scheduled`). It knows no
aggregate:
it relays every event document of the container, whatever its aggregate type. An app registers
it beside its own functions (`Outbox.relay_blueprint()`, or `Outbox.function_app`).

Container and database names are app-setting expressions (%COSMOS_CONTAINER%, ...), but for
a setting with a default (COSMOS_DATABASE: `outbox`, COSMOS_LEASE_CONTAINER: `leases`) that is
not set: the trigger then binds the default's name, since the host cannot resolve an expression
whose setting is missing (`TriggerSettings.binding_name`). The host cannot resolve %NAME% in int
binding properties either, but the worker indexes the app with the app settings in its
environment, so these, the poll delay, batch size and the timers' schedules are read (and validated)
from the app settings when the blueprint is built, at indexing; nothing else is read or opened
until a function runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import azure.functions as func

from cosmos_outbox._function_shell import shell
from cosmos_outbox._mapper import read_feed
from cosmos_outbox.ports import DeadLetter, DeadLetterEntity
from cosmos_outbox.settings import TriggerSettings, load_trigger_settings
from cosmos_outbox.settings._base import LEASE_INTERVAL_SETTINGS

if TYPE_CHECKING:  # imported when a function first runs, not at indexing (cold start)
    from cosmos_outbox._mapper.message import Headers
    from cosmos_outbox._wiring import Wiring

#: How long one tick of the operations' timer works at most (then the next tick goes on).
OPERATIONS_TICK_SECONDS = 25.0


def relay_blueprint(
    wiring: Callable[[], Wiring],
    *,
    asynchronous: bool,
    triggers: TriggerSettings | None = None,
) -> func.Blueprint:
    """The relay (`relay_events`), the backlog timer (`outbox_backlog`), the operations' timer
    (`outbox_operations`) and, with a schedule queue, the releases (`release_due_events`),
    served by `wiring()` (the outbox's objects, built once per process on first use).
    `asynchronous`: `async def` functions on the worker's event loop (an `aio` outbox's
    adapters), else sync ones. `triggers` default to the app settings (read now, at
    indexing)."""
    settings = triggers if triggers is not None else load_trigger_settings()
    bp = func.Blueprint()  # type: ignore[no-untyped-call]  # untyped in azure-functions

    @bp.retry(
        strategy="exponential_backoff",
        max_retry_count="-1",
        minimum_interval="00:00:01",
        maximum_interval="00:01:00",
    )
    @bp.cosmos_db_trigger(**feed_trigger(settings))
    @shell(asynchronous)
    async def relay_events(documents: func.DocumentList) -> None:
        """Relay one trigger invocation. Raises when a send fails, so the retry policy
        redelivers the same documents and the lease does not move."""
        from cosmos_outbox.servicebus._target_rules import log_target_rules_once_in_background

        wired = wiring()
        # once per process, in the background: does each subscription carry the rule?
        log_target_rules_once_in_background(wired.target_rules())
        await wired.relay().relay(
            read_feed((doc.to_dict() for doc in documents), legacy=wired.legacy)
        )

    @_timer(bp, settings.backlog_estimate_schedule)
    @shell(asynchronous)
    async def outbox_backlog(timer: func.TimerRequest) -> None:
        """One tick: until the relay has found what it needs (its topic, the claim check's
        container), check it, so that what is missing is said before any event; estimate the
        backlog (its lease container missing: said the same way), record the gauges, apply
        the TTL guard, keep the reading for the console's chart (`_relay.backlog_history`);
        once all is found, clear what an earlier tick said; record whether the relay moves
        (`outbox.relay.stalled`), and look for dead letters that left their queue without
        being applied (`outbox.dead_letters.vanished`)."""
        await backlog_tick(wiring())

    _operations_timer(bp, wiring, settings, asynchronous)
    if settings.failure_ingest_here:  # `elsewhere`: another host drains them
        for entity in watched_entities(settings):
            _failure_trigger(bp, wiring, entity, asynchronous)

    if settings.schedule_queue is not None:

        @bp.service_bus_queue_trigger(
            arg_name="message",
            queue_name="%SERVICEBUS_SCHEDULE_QUEUE%",
            connection="ServiceBusConnection",
        )
        @shell(asynchronous)
        async def release_due_events(message: func.ServiceBusMessage) -> None:
            """A scheduled event's release, come at its due time: the event released (the
            relay then sends it), unless it was cancelled or is not due yet by this clock
            (scheduled again). Raises when the store fails: the message is retried, then
            dead-lettered (the event waits: `/outbox/status` counts it overdue)."""
            from cosmos_outbox._mapper import release_of

            await wiring().releases().release(release_of(message.get_body()))

    return bp


def _timer(bp: func.Blueprint, schedule: str) -> Callable[[Any], Any]:
    """A timer trigger of the relay's on `bp`: no run at each host's start, no schedule monitor
    (a missed tick is not made up: the next one does its work)."""
    return bp.timer_trigger(
        arg_name="timer", schedule=schedule, run_on_startup=False, use_monitor=False
    )


def _operations_timer(
    bp: func.Blueprint,
    wiring: Callable[[], Wiring],
    settings: TriggerSettings,
    asynchronous: bool,
) -> None:
    """The operations' timer (`outbox_operations`) on `bp`."""

    @_timer(bp, settings.operations_schedule)
    @shell(asynchronous)
    async def outbox_operations(timer: func.TimerRequest) -> None:
        """One tick of the bulk operations' worker (`cosmos_outbox.operations._bulk._worker`): the
        open operations found by one query in their partition, and worked in batches for up
        to OPERATIONS_TICK_SECONDS (a batch begun is finished): a group's retry or discard, a
        subscription's dead letters resubmitted or discarded. Nothing open: nothing else is
        read."""
        await wiring().operations().bulk.work(budget_seconds=OPERATIONS_TICK_SECONDS)


def watched_entities(settings: TriggerSettings) -> list[DeadLetterEntity]:
    """The watched subscriptions and queues (OUTBOX_SUBSCRIPTIONS, OUTBOX_DEAD_LETTER_QUEUES)."""
    return [DeadLetterEntity(name, "subscription") for name, _, _ in settings.subscriptions()] + [
        DeadLetterEntity(name, "queue") for name in settings.queues()
    ]


def failure_function_name(entity: DeadLetterEntity) -> str:
    """The name of the trigger keeping `entity`'s dead letters: `ingest_failures_<name>` (what
    is not a letter, a digit or `_` made `_`; a short hash of the name after it when it
    changed, so two entities never share one)."""
    import hashlib
    import re

    name = re.sub(r"[^A-Za-z0-9_]", "_", entity.name)
    if name != entity.name or entity.kind == "queue":
        name += "_" + hashlib.sha256(f"{entity.kind}:{entity.name}".encode()).hexdigest()[:6]
    return f"ingest_failures_{name}"


def _failure_trigger(
    bp: func.Blueprint, wiring: Callable[[], Wiring], entity: DeadLetterEntity, asynchronous: bool
) -> None:
    """A Service Bus trigger on `entity`'s dead-letter queue (`<subscription>/$DeadLetterQueue`,
    as Azure's host binds one): each dead letter kept as a failure record before the host
    completes it (a write that fails raises: the host abandons it, the queue gives it again).
    One dead letter a call (`Failures.ingest`, `ingest_many` of one): the local stack's host
    (funcstack) serves no `cardinality: many`, so a batched trigger could not be run or tested
    here; `cosmos-outbox relay`'s receiver keeps them 100 at a time."""
    if entity.kind == "subscription":
        trigger = bp.service_bus_topic_trigger(
            arg_name="message",
            connection="ServiceBusConnection",
            topic_name="%SERVICEBUS_TOPIC%",
            subscription_name=f"{entity.name}/$DeadLetterQueue",
        )
    else:
        trigger = bp.service_bus_queue_trigger(
            arg_name="message",
            connection="ServiceBusConnection",
            queue_name=f"{entity.name}/$DeadLetterQueue",
        )

    async def ingest(message: func.ServiceBusMessage) -> None:
        from cosmos_outbox.operations._failures import received

        await wiring().failures.ingest(entity, received(dead_letter_of_trigger(message)))

    ingest.__name__ = ingest.__qualname__ = failure_function_name(entity)
    bp.function_name(failure_function_name(entity))(trigger(shell(asynchronous)(ingest)))


def dead_letter_of_trigger(message: func.ServiceBusMessage) -> DeadLetter:
    """A dead letter as the trigger hands it, as the port's `DeadLetter`."""
    from cosmos_outbox.servicebus._dead_letters import dead_letter_with

    headers: Headers = {
        "message_id": message.message_id,
        "session_id": message.session_id,
        "subject": message.subject or message.label,
        "content_type": message.content_type,
        "correlation_id": message.correlation_id,
    }
    return dead_letter_with(message, message.get_body(), headers)


async def backlog_tick(wired: Wiring) -> None:
    """The backlog timer's tick (`outbox_backlog`, said there), on the outbox's objects."""
    from cosmos_outbox._relay.backlog import report_backlog
    from cosmos_outbox.errors import RelayNotReadyError

    relay = wired.relay()
    problem = await relay.check()
    try:
        backlog = await report_backlog(
            wired.backlog(), wired.telemetry, event_ttl_seconds=wired.event_ttl_seconds
        )
    except RelayNotReadyError as exc:
        await relay.not_ready(exc)
        wired.telemetry.relay_state("not ready")
        raise
    await wired.backlog_history.record(backlog.pending, backlog.oldest_age_seconds)
    if problem is None:
        await relay.ready()
    # healthy means moving: the relay's state (stalled, with what does not answer) as a
    # gauge and, while it does not move, a log line each tick (`operations._status`)
    operations = wired.operations()
    state = await operations.status.relay(backlog.leases, not_ready=problem)
    wired.telemetry.relay_state(state.state)
    if state.state == "stalled":  # not ready: said by `not_ready` already
        import logging

        logging.getLogger("cosmos_outbox.relay").error(
            "relay %s since %s: %s",
            state.state,
            state.since.isoformat() if state.since else "-",
            state.summary,
            extra={
                "outbox.relay_state": state.state,
                "outbox.not_answering": state.not_answering,
            },
        )
    # a dead letter that left its queue without being applied is said (`_watch`)
    await operations.dead_letters.watch()


def feed_trigger(settings: TriggerSettings) -> dict[str, Any]:
    """The relay's Cosmos DB trigger binding, from the settings."""
    return {
        "arg_name": "documents",
        "connection": "CosmosDBConnection",
        "database_name": settings.binding_name("cosmos_database"),
        "container_name": "%COSMOS_CONTAINER%",
        "lease_container_name": settings.binding_name("cosmos_lease_container"),
        "create_lease_container_if_not_exists": True,
        # The relay's processor (its leases apart from those of an app's own trigger on the same
        # container): the host names the processor by the lease container prefix.
        "lease_container_prefix": settings.processor_name or None,
        # A new lease (first deployment, lease container reset) starts from the oldest event
        # still stored, not from "now": events written before the relay first ran are not lost.
        "start_from_beginning": True,  # azure-functions 2.3 types it `time`
        "feed_poll_delay": settings.feed_poll_delay_ms,
        "max_items_per_invocation": settings.max_items_per_invocation,
        # LEASE_*_INTERVAL_MS, the settings `cosmos-outbox relay` reads too; unset (0): the
        # property is left out and the host's processor keeps its own
        **{
            name: getattr(settings, f"{name}_ms")
            for name in LEASE_INTERVAL_SETTINGS
            if getattr(settings, f"{name}_ms")
        },
    }
