"""What an outbox runs on (`Services`, also `cosmos_outbox.Services`) and its factories from the
validated app settings: all of it (`services_from_settings`: Cosmos DB, Service Bus and Blob
Storage, sync or `aio`), the relay's publisher alone (`publisher_from_settings`), the claim
check's payload store alone (`payloads_from_settings`), the schedule queue alone
(`schedule_from_settings`); the subscriptions and queues whose dead letters the operators watch
(`watched_from_settings`). No I/O until first use.

An adapter is wired in once: its `Services` field, which names its factory from the settings
(`leaves()` lists them); `services_from_settings` builds each leaf from there, the outbox makes
each once, and the test kit gives each a fake by its name."""

from __future__ import annotations

from cosmos_outbox._wiring import (
    Services,
    leaves,
    payloads_from_settings,
    publisher_from_settings,
    schedule_from_settings,
    services_from_settings,
    watched_from_settings,
)

__all__ = [
    "Services",
    "leaves",
    "payloads_from_settings",
    "publisher_from_settings",
    "schedule_from_settings",
    "services_from_settings",
    "watched_from_settings",
]
