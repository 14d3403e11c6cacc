"""A subscriber's telemetry through `opentelemetry-api` (a no-op unless the worker installs an
SDK: in Azure with `PYTHON_APPLICATIONINSIGHTS_ENABLE_TELEMETRY=true`)."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from opentelemetry.metrics import Counter

__all__ = ["IGNORED", "INSTRUMENTATION_SCOPE", "ignored"]

INSTRUMENTATION_SCOPE: Final = "cosmos_outbox.subscriber"
#: Events acknowledged without a projection change because this subscriber does not handle
#: them, by `subscriber.ignore_reason` and `cloudevents.event_type`.
IGNORED: Final = "subscriber.events.ignored"


@cache
def _ignored() -> Counter:
    from opentelemetry import metrics

    return metrics.get_meter(INSTRUMENTATION_SCOPE).create_counter(
        IGNORED,
        unit="{event}",
        description="Events acknowledged without a projection change: an action this "
        "subscriber does not handle, or another aggregate type",
    )


def ignored(event_type: str, reason: str, aggregate_type: str) -> None:
    _ignored().add(
        1,
        {
            "cloudevents.event_type": event_type,
            "subscriber.ignore_reason": reason,
            "outbox.aggregate_type": aggregate_type,
        },
    )
