"""Deprecated (removed in 0.6): the test kit is cosmos-outbox-testing (`pip install
cosmos-outbox-testing`), imported as `cosmos_outbox_testing`, with the same names. Each name read
here warns (DeprecationWarning) and gives the kit's."""

from __future__ import annotations

from cosmos_outbox._lazy import lazy_exports

#: Each name of 0.4 and where it went: cosmos-outbox-testing's `cosmos_outbox_testing`.
_MOVED = {
    name: f"cosmos_outbox_testing.{name}"
    for name in (
        "EVENTS",
        "EventFields",
        "FakePublisher",
        "FixedBacklog",
        "FunctionClient",
        "InMemory",
        "InMemoryBacklogEstimator",
        "InMemoryDeadLetters",
        "InMemoryPayloadStore",
        "InMemoryScheduleQueue",
        "InMemoryStore",
        "InvocationContext",
        "KitClock",
        "ScheduledEvent",
        "SizeLimitedBatch",
        "as_async",
        "check_commands",
        "check_event_mappings",
        "check_fields",
        "check_openapi_events",
        "check_text_schemas",
        "delivered",
        "dispatch_all",
        "event_fields",
        "in_memory",
        "queue_message",
        "run_sync",
        "service_bus_message",
        "timer_request",
    )
}

__all__: list[str] = []
__getattr__, __dir__ = lazy_exports(__name__, {}, renamed=_MOVED)
