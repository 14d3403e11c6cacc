"""Outbox telemetry: the names of the relay's metrics and spans (the one source of truth the
code, the Bicep alert rules and the workbook share: `METRICS`, `BICEP_NAMES`), and
`RelayTelemetry`, the small recording facade over `opentelemetry-api` the relay records them
with; and its loggers (`LOGGERS`: each named for the public namespace whose work it logs, never
a private module's path, so an app sets one level per part it knows). For dashboards, alerts and
tests that read what the relay reports.

The app never configures an exporter. In Azure the Python worker does (host.json
`telemetryMode: OpenTelemetry` + `PYTHON_APPLICATIONINSIGHTS_ENABLE_TELEMETRY=true`); locally
the local Functions host installs the SDK with file exporters; without either, the API is a no-op.
Names follow the OpenTelemetry messaging semantic conventions where one exists.

`opentelemetry` is imported when a `RelayTelemetry` is built (the relay's first invocation), not
with this module: the HTTP API never needs it, and importing it is part of a cold start.
"""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, Final

from cosmos_outbox._records import per_event

if TYPE_CHECKING:
    from opentelemetry import metrics, trace
    from opentelemetry.metrics import Counter, Histogram
    from opentelemetry.metrics import _Gauge as Gauge  # what `create_gauge` returns
    from opentelemetry.trace import Link, SpanContext, TraceFlags

__all__ = [
    "ALL_LEASES",
    "BICEP_NAMES",
    "INSTRUMENTATION_SCOPE",
    "LOGGERS",
    "MESSAGING_SYSTEM",
    "METRICS",
    "OFFLOADED",
    "OFFLOADED_BYTES",
    "OLDEST_PENDING_AGE",
    "OPERATION_DURATION",
    "PENDING",
    "QUARANTINED",
    "RELAY_FAILURES",
    "RELAY_LAG",
    "RELAY_STALLED",
    "SENT_MESSAGES",
    "VANISHED_DEAD_LETTERS",
    "MetricSpec",
    "RelayTelemetry",
]

INSTRUMENTATION_SCOPE: Final = "cosmos_outbox"
MESSAGING_SYSTEM: Final = "servicebus"

RELAY_LAG: Final = "outbox.relay.lag"
SENT_MESSAGES: Final = "messaging.client.sent.messages"
OPERATION_DURATION: Final = "messaging.client.operation.duration"
RELAY_FAILURES: Final = "outbox.relay.failures"
QUARANTINED: Final = "outbox.events.quarantined"
OFFLOADED: Final = "outbox.events.offloaded"
OFFLOADED_BYTES: Final = "outbox.events.offloaded.bytes"
PENDING: Final = "outbox.events.pending"
OLDEST_PENDING_AGE: Final = "outbox.events.oldest_pending_age"
RELAY_STALLED: Final = "outbox.relay.stalled"
VANISHED_DEAD_LETTERS: Final = "outbox.dead_letters.vanished"

#: The outbox's loggers, each named for the public namespace whose work it logs (an app's
#: `logging.getLogger(name).setLevel(...)`), and what it logs. Every logger of cosmos-outbox
#: and cosmos-outbox-operators is one of these (tests/repository/test_loggers.py); a line's
#: values travel as fields (`extra=`: Application Insights keeps them as custom dimensions).
LOGGERS: Final[dict[str, str]] = {
    "cosmos_outbox": "the outbox's wiring: settings read, adapters built",
    "cosmos_outbox.aggregates": "the write path: an Idempotency-Key's retry answered or refused",
    "cosmos_outbox.relay": "one line per relay invocation, quarantines, releases, health",
    "cosmos_outbox.relay.backlog": "the backlog's estimate and its last hour",
    "cosmos_outbox.cosmos": "the Cosmos DB adapters: throttling, the backlog estimator",
    "cosmos_outbox.servicebus": "the Service Bus adapters: publisher, schedule queue, dead letters",
    "cosmos_outbox.blob": "the claim check's payload store",
    "cosmos_outbox.http": "the HTTP layer: unexpected errors, bounded calls over their time",
    "cosmos_outbox.subscriber": "the subscriber: dispatch, versions held and gaps",
    "cosmos_outbox.operators": "the operators' actions (the audit) and their ways in",
}

#: The `outbox.lease` attribute value of the total over all leases.
ALL_LEASES: Final = "all"


@dataclass(frozen=True)
class MetricSpec:
    name: str
    kind: str  # counter | histogram | gauge
    unit: str
    description: str


METRICS: Final[tuple[MetricSpec, ...]] = (
    MetricSpec(
        RELAY_LAG,
        "histogram",
        "s",
        "Event creation to acceptance by Service Bus, one value per event sent",
    ),
    MetricSpec(SENT_MESSAGES, "counter", "{message}", "Messages accepted by Service Bus"),
    MetricSpec(OPERATION_DURATION, "histogram", "s", "Duration of each send of a batch"),
    MetricSpec(
        RELAY_FAILURES,
        "counter",
        "{invocation}",
        "Relay invocations that raised (retried by the trigger), by error.type",
    ),
    MetricSpec(
        QUARANTINED,
        "counter",
        "{event}",
        "Event documents set aside because they cannot become a message",
    ),
    MetricSpec(
        OFFLOADED,
        "counter",
        "{event}",
        "Events sent as a claim check: the body in the payload store, the message "
        "with its dataref (counted when Service Bus accepted the message)",
    ),
    MetricSpec(
        OFFLOADED_BYTES,
        "counter",
        "By",
        "Bytes of the bodies those events put in the payload store",
    ),
    MetricSpec(
        PENDING,
        "gauge",
        "{change}",
        "Estimated change-feed changes not yet relayed, per lease and in total (all)",
    ),
    MetricSpec(
        OLDEST_PENDING_AGE,
        "gauge",
        "s",
        "Age of the first unprocessed change, per lease and the oldest of all (all)",
    ),
    MetricSpec(
        RELAY_STALLED,
        "gauge",
        "{relay}",
        "1 while the relay does not move (pending events wait longer than the poll delay and "
        "OUTBOX_RELAY_STALL_SECONDS, or it cannot start), else 0: one series, so that the value "
        "after a recovery replaces the stalled one (the state is in the backlog timer's log line)",
    ),
    MetricSpec(
        VANISHED_DEAD_LETTERS,
        "gauge",
        "{message}",
        "Dead letters that left their dead-letter queue without being applied by their "
        "subscriber (resent with the same MessageId inside the duplicate window, deleted): "
        "each waits for an operator's re-drive or release",
    ),
)

#: The names as deploy/modules/metric-names.json gives them to the Bicep alert rules and the
#: workbook (`loadJsonContent`); tests/deploy/test_monitoring.py holds the file equal to this.
BICEP_NAMES: Final[dict[str, str]] = {
    "relayLag": RELAY_LAG,
    "sentMessages": SENT_MESSAGES,
    "operationDuration": OPERATION_DURATION,
    "relayFailures": RELAY_FAILURES,
    "quarantined": QUARANTINED,
    "offloaded": OFFLOADED,
    "offloadedBytes": OFFLOADED_BYTES,
    "pending": PENDING,
    "oldestPendingAge": OLDEST_PENDING_AGE,
    "relayStalled": RELAY_STALLED,
    "vanishedDeadLetters": VANISHED_DEAD_LETTERS,
    "allLeases": ALL_LEASES,
}

#: Seconds, 10 ms to 30 s: the buckets both histograms share.
_SHARED_BUCKETS: Final = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
# Seconds: from a fast relay (tens of ms) to an outage of hours.
LAG_BUCKETS: Final = (
    *_SHARED_BUCKETS,
    60.0,
    120.0,
    300.0,
    600.0,
    1800.0,
    3600.0,
    21600.0,
    86400.0,
)
DURATION_BUCKETS: Final = (0.001, 0.0025, 0.005, *_SHARED_BUCKETS)

_TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")


@cache
def _trace_flags() -> dict[str, TraceFlags]:
    """Every trace-flags byte, by its two hex digits (built once, not per event)."""
    from opentelemetry.trace import TraceFlags

    return {f"{flags:02x}": TraceFlags(flags) for flags in range(256)}


def _span_context(
    traceparent: str, span_context_type: type[SpanContext], flags: dict[str, TraceFlags]
) -> SpanContext | None:
    """The remote span context a W3C `traceparent` names, or None when it is not valid."""
    match = _TRACEPARENT.fullmatch(traceparent)
    if match is None:
        return None
    trace_id, span_id, trace_flags = match.groups()
    ctx = span_context_type(int(trace_id, 16), int(span_id, 16), True, flags[trace_flags])
    return ctx if ctx.is_valid else None


def error_type(exc: BaseException) -> str:
    """`error.type` as the semantic conventions want it: the exception's qualified class name."""
    cls = type(exc)
    if cls.__module__ == "builtins":
        return cls.__qualname__
    return f"{cls.__module__}.{cls.__qualname__}"


@per_event
class SentEvent:
    """What telemetry needs of one message in a batch."""

    traceparent: str | None
    created_at: float | None


class RelayTelemetry:
    """Records what the relay does. Providers default to the global ones (no-op unless the
    worker or the local stack installed an SDK); tests pass in-memory ones."""

    def __init__(
        self,
        *,
        destination: str,
        meter_provider: metrics.MeterProvider | None = None,
        tracer_provider: trace.TracerProvider | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        from opentelemetry import metrics, trace
        from opentelemetry.context import Context
        from opentelemetry.trace import Link, SpanContext, SpanKind

        self._link, self._span_context_type, self._producer = Link, SpanContext, SpanKind.PRODUCER
        #: The context the per-event lag values are recorded in: none, so no span (no exemplar).
        self._no_span = Context()
        meter = metrics.get_meter(INSTRUMENTATION_SCOPE, meter_provider=meter_provider)
        self._tracer = trace.get_tracer(INSTRUMENTATION_SCOPE, tracer_provider=tracer_provider)
        self._clock = clock
        self.destination = destination
        self._attrs = {
            "messaging.system": MESSAGING_SYSTEM,
            "messaging.destination.name": destination,
        }
        self._send_attrs = {
            **self._attrs,
            "messaging.operation.name": "send",
            "messaging.operation.type": "send",
        }
        self._span_name = f"send {destination}"
        spec = {m.name: m for m in METRICS}

        def instrument(name: str, **kwargs: Any) -> Any:
            """The instrument `METRICS` declares under `name`, with its kind, unit and text."""
            m = spec[name]
            create = getattr(meter, f"create_{m.kind}")
            return create(name, unit=m.unit, description=m.description, **kwargs)

        self._lag: Histogram = instrument(
            RELAY_LAG, explicit_bucket_boundaries_advisory=list(LAG_BUCKETS)
        )
        self._sent: Counter = instrument(SENT_MESSAGES)
        self._duration: Histogram = instrument(
            OPERATION_DURATION, explicit_bucket_boundaries_advisory=list(DURATION_BUCKETS)
        )
        self._failures: Counter = instrument(RELAY_FAILURES)
        self._quarantined: Counter = instrument(QUARANTINED)
        self._offloaded: Counter = instrument(OFFLOADED)
        self._offloaded_bytes: Counter = instrument(OFFLOADED_BYTES)
        self._pending: Gauge = instrument(PENDING)
        self._oldest: Gauge = instrument(OLDEST_PENDING_AGE)
        self._stalled: Gauge = instrument(RELAY_STALLED)
        self._vanished: Gauge = instrument(VANISHED_DEAD_LETTERS)

    async def send(self, events: Sequence[SentEvent], send: Callable[[], Awaitable[None]]) -> None:
        """Run `send` (one batch) inside a PRODUCER span linked to each event's context, and
        record its duration, the messages sent and each event's lag once it was accepted."""
        links: list[Link] = []
        #: the trace and span ids linked, as their hex digits: a valid `traceparent` has them
        #: lowercase at a fixed place, so the same digits are the same ids (a context linked
        #: already is not parsed again)
        linked: set[str] = set()
        link, span_context_type, flags = self._link, self._span_context_type, _trace_flags()
        for event in events:
            traceparent = event.traceparent
            if traceparent is None or (ids := traceparent[3:52]) in linked:
                continue
            ctx = _span_context(traceparent, span_context_type, flags)
            if ctx is not None:
                linked.add(ids)
                links.append(link(ctx))
        with self._tracer.start_as_current_span(
            self._span_name,
            kind=self._producer,
            links=links,
            attributes={**self._send_attrs, "messaging.batch.message_count": len(events)},
            record_exception=True,
            set_status_on_exception=True,
        ) as span:
            start = time.perf_counter()
            try:
                await send()
            except BaseException as exc:
                kind = error_type(exc)
                span.set_attribute("error.type", kind)
                self._duration.record(
                    time.perf_counter() - start, {**self._send_attrs, "error.type": kind}
                )
                raise
            self._duration.record(time.perf_counter() - start, self._send_attrs)
            self._sent.add(len(events), self._send_attrs)
        # In an empty context: per-event values get no trace exemplars (the span is linked to
        # the events anyway), and the SDK need not look up the current context per value.
        now, lag, attrs, context = self._clock(), self._lag, self._attrs, self._no_span
        for event in events:
            if event.created_at is not None:
                lag.record(max(0.0, now - event.created_at), attrs, context)

    def offloaded(self, count: int, size: int) -> None:
        """`count` claim-check messages accepted, their bodies `size` bytes in all."""
        self._offloaded.add(count, self._attrs)
        self._offloaded_bytes.add(size, self._attrs)

    def quarantined(self, count: int = 1) -> None:
        self._quarantined.add(count, self._attrs)

    def failed(self, exc: BaseException) -> None:
        self._failures.add(1, {**self._attrs, "error.type": error_type(exc)})

    def relay_state(self, state: str) -> None:
        """The relay's state (`healthy`, `stalled`, `not ready`): 0 while it moves, else 1. One
        series (no state attribute): a gauge keeps exporting each attribute set's last value, so
        a `stalled` series would stay at 1 after the relay moved again and its alert never
        resolve."""
        self._stalled.set(0 if state == "healthy" else 1, self._attrs)

    def vanished(self, count: int) -> None:
        """How many dead letters left their queue without being applied, unresolved."""
        self._vanished.set(count, self._attrs)

    def backlog(self, leases: Iterable[tuple[str, int, float | None]]) -> None:
        """Gauges per lease (`outbox.lease` = lease token) and in total (`outbox.lease` = all):
        (lease, pending changes, age in seconds of its first unprocessed change)."""
        total, oldest = 0, 0.0
        for lease, pending, age in leases:
            attrs = {**self._attrs, "outbox.lease": lease}
            self._pending.set(pending, attrs)
            self._oldest.set(age or 0.0, attrs)
            total += pending
            oldest = max(oldest, age or 0.0)
        attrs = {**self._attrs, "outbox.lease": ALL_LEASES}
        self._pending.set(total, attrs)
        self._oldest.set(oldest, attrs)
