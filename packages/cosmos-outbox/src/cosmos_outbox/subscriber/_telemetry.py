"""A subscriber's telemetry through `opentelemetry-api` (a no-op unless the worker installs an
SDK: in Azure with `PYTHON_APPLICATIONINSIGHTS_ENABLE_TELEMETRY=true`)."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from opentelemetry.metrics import Counter, Meter, UpDownCounter

__all__ = [
    "GAPS_ACCEPTED",
    "HELD",
    "IGNORED",
    "INSTRUMENTATION_SCOPE",
    "gap_accepted",
    "held",
    "ignored",
    "released",
]

INSTRUMENTATION_SCOPE: Final = "cosmos_outbox.subscriber"
#: Events acknowledged without a projection change because this subscriber does not handle
#: them, by `subscriber.ignore_reason` and `cloudevents.event_type`.
IGNORED: Final = "subscriber.events.ignored"
#: Events held behind a missing version (up when one is held, down when it is applied), by
#: `outbox.aggregate_type`: a sum above 0 that does not come down is a subscriber waiting; its
#: log line at each hold and its status say on what, and what releases it.
HELD: Final = "subscriber.events.held"
#: Versions given up by an operator that this subscriber moved past (an accepted gap).
GAPS_ACCEPTED: Final = "subscriber.gaps.accepted"


#: Each instrument's unit and description, by name.
_DECLARED: Final = {
    IGNORED: (
        "{event}",
        "Events acknowledged without a projection change: an action this "
        "subscriber does not handle, or another aggregate type",
    ),
    HELD: (
        "{event}",
        "Events held behind a missing version, waiting for it (or for an operator to give it up)",
    ),
    GAPS_ACCEPTED: ("{version}", "Versions an operator gave up that this subscriber moved past"),
}


@cache
def _meter() -> Meter:
    from opentelemetry import metrics

    return metrics.get_meter(INSTRUMENTATION_SCOPE)


@cache
def _counter(name: str) -> Counter:
    unit, description = _DECLARED[name]
    return _meter().create_counter(name, unit=unit, description=description)


@cache
def _up_down_counter(name: str) -> UpDownCounter:
    unit, description = _DECLARED[name]
    return _meter().create_up_down_counter(name, unit=unit, description=description)


def ignored(event_type: str, reason: str, aggregate_type: str) -> None:
    _counter(IGNORED).add(
        1,
        {
            "cloudevents.event_type": event_type,
            "subscriber.ignore_reason": reason,
            "outbox.aggregate_type": aggregate_type,
        },
    )


def held(aggregate_type: str) -> None:
    _up_down_counter(HELD).add(1, {"outbox.aggregate_type": aggregate_type})


def released(aggregate_type: str, count: int) -> None:
    if count:
        _up_down_counter(HELD).add(-count, {"outbox.aggregate_type": aggregate_type})


def gap_accepted(aggregate_type: str) -> None:
    _counter(GAPS_ACCEPTED).add(1, {"outbox.aggregate_type": aggregate_type})
