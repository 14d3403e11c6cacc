"""The outbox's settings, validated once. Names are the app-setting names (the package README,
"Settings"). No name of any app is a default: the container and the topic are the app's to
name; the database defaults to `outbox` and the lease container to `leases` (the Cosmos DB
trigger's documented default)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cosmos_outbox._records import LegacyEvents

# The defaults, the error and the trigger settings (public here; `_settings_base` holds them so
# that `_settings_env` need not import this module).
from cosmos_outbox._settings_base import (
    DEFAULT_BACKLOG_ESTIMATE_SCHEDULE as DEFAULT_BACKLOG_ESTIMATE_SCHEDULE,
)
from cosmos_outbox._settings_base import (
    DEFAULT_EVENT_TTL_SECONDS as DEFAULT_EVENT_TTL_SECONDS,
)
from cosmos_outbox._settings_base import (
    DEFAULT_FEED_POLL_DELAY_MS as DEFAULT_FEED_POLL_DELAY_MS,
)
from cosmos_outbox._settings_base import (
    DEFAULT_IDEMPOTENCY_TTL_SECONDS as DEFAULT_IDEMPOTENCY_TTL_SECONDS,
)
from cosmos_outbox._settings_base import (
    DEFAULT_LEASE_PREFIX as DEFAULT_LEASE_PREFIX,
)
from cosmos_outbox._settings_base import (
    DEFAULT_MAX_ITEMS_PER_INVOCATION as DEFAULT_MAX_ITEMS_PER_INVOCATION,
)
from cosmos_outbox._settings_base import (
    DEFAULT_PAYLOAD_CONTAINER as DEFAULT_PAYLOAD_CONTAINER,
)
from cosmos_outbox._settings_base import (
    DEFAULT_PAYLOAD_MAX_BYTES as DEFAULT_PAYLOAD_MAX_BYTES,
)
from cosmos_outbox._settings_base import (
    DEFAULT_SERVICEBUS_MAX_MESSAGE_BYTES as DEFAULT_SERVICEBUS_MAX_MESSAGE_BYTES,
)
from cosmos_outbox._settings_base import (
    RETIRED_SETTINGS as RETIRED_SETTINGS,
)
from cosmos_outbox._settings_base import (
    SettingsError as SettingsError,
)
from cosmos_outbox._settings_base import (
    TriggerSettings as TriggerSettings,
)
from cosmos_outbox._settings_base import (
    load_trigger_settings as load_trigger_settings,
)

if TYPE_CHECKING:
    from cosmos_outbox._settings_env import (
        CosmosSettings,
        OutboxSettings,
        PayloadConnection,  # noqa: F401  # public, not in __all__
        PayloadSettings,
        load_payload_settings,  # noqa: F401  # public, not in __all__
        load_settings,
        read_settings,
    )

__all__ = [
    "CosmosSettings",
    "LegacyEvents",
    "OutboxSettings",
    "PayloadSettings",
    "SettingsError",
    "TriggerSettings",
    "load_settings",
    "read_settings",
]

#: Read from the environment by pydantic-settings, imported on first use: the worker's indexing
#: of an app needs only the trigger settings, so `import function_app` does not pay for it.
_ON_FIRST_USE = frozenset(
    {
        "CosmosSettings",
        "OutboxSettings",
        "PayloadConnection",
        "PayloadSettings",
        "load_payload_settings",
        "load_settings",
        "read_settings",
    }
)


def __getattr__(name: str) -> Any:
    if name in _ON_FIRST_USE:
        from cosmos_outbox import _settings_env

        return getattr(_settings_env, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
