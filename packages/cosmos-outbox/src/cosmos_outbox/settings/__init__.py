"""The outbox's settings, validated once. Names are the app-setting names (the package README,
"Settings"). No name of any app is a default: the container and the topic are the app's to
name; the database defaults to `outbox` and the lease container to `leases` (the Cosmos DB
trigger's documented default).

The settings are this package, in three parts for a cold start: this module (public: what
indexing needs, the trigger settings, and the defaults), `_env` (the settings read from the
environment with pydantic-settings, 80 ms to import: declared here, imported on first use,
`cosmos_outbox._lazy`) and `_base` (what both need: the defaults, the error, the trigger
settings), so that neither of the two imports the other."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cosmos_outbox._lazy import lazy_exports
from cosmos_outbox._records import LegacyEvents

# public here, held by `_base` (`X as X`: re-exported)
from cosmos_outbox.settings._base import (
    DEFAULT_BACKLOG_ESTIMATE_SCHEDULE as DEFAULT_BACKLOG_ESTIMATE_SCHEDULE,
)
from cosmos_outbox.settings._base import (
    DEFAULT_EVENT_TTL_SECONDS as DEFAULT_EVENT_TTL_SECONDS,
)
from cosmos_outbox.settings._base import (
    DEFAULT_FEED_POLL_DELAY_MS as DEFAULT_FEED_POLL_DELAY_MS,
)
from cosmos_outbox.settings._base import (
    DEFAULT_IDEMPOTENCY_TTL_SECONDS as DEFAULT_IDEMPOTENCY_TTL_SECONDS,
)
from cosmos_outbox.settings._base import (
    DEFAULT_MAX_ITEMS_PER_INVOCATION as DEFAULT_MAX_ITEMS_PER_INVOCATION,
)
from cosmos_outbox.settings._base import (
    DEFAULT_OPERATIONS_SCHEDULE as DEFAULT_OPERATIONS_SCHEDULE,
)
from cosmos_outbox.settings._base import (
    DEFAULT_PAYLOAD_CONTAINER as DEFAULT_PAYLOAD_CONTAINER,
)
from cosmos_outbox.settings._base import (
    DEFAULT_PAYLOAD_MAX_BYTES as DEFAULT_PAYLOAD_MAX_BYTES,
)
from cosmos_outbox.settings._base import (
    DEFAULT_PROCESSOR_NAME as DEFAULT_PROCESSOR_NAME,
)
from cosmos_outbox.settings._base import (
    DEFAULT_SERVICEBUS_MAX_MESSAGE_BYTES as DEFAULT_SERVICEBUS_MAX_MESSAGE_BYTES,
)
from cosmos_outbox.settings._base import (
    RETIRED_SETTINGS as RETIRED_SETTINGS,
)
from cosmos_outbox.settings._base import (
    SettingsError as SettingsError,
)
from cosmos_outbox.settings._base import (
    TriggerSettings as TriggerSettings,
)
from cosmos_outbox.settings._base import (
    load_trigger_settings as load_trigger_settings,
)

if TYPE_CHECKING:  # what type checkers read; at run time: `_EXPORTS`
    from cosmos_outbox.settings._env import CosmosSettings as CosmosSettings
    from cosmos_outbox.settings._env import OutboxSettings as OutboxSettings
    from cosmos_outbox.settings._env import PayloadConnection as PayloadConnection
    from cosmos_outbox.settings._env import PayloadSettings as PayloadSettings
    from cosmos_outbox.settings._env import load_payload_settings as load_payload_settings
    from cosmos_outbox.settings._env import load_settings as load_settings
    from cosmos_outbox.settings._env import read_settings as read_settings

#: Read from the environment by pydantic-settings, imported on first use: the worker's indexing
#: of an app needs only the trigger settings, so `import function_app` does not pay for it.
_EXPORTS = {
    "CosmosSettings": "cosmos_outbox.settings._env",
    "OutboxSettings": "cosmos_outbox.settings._env",
    "PayloadConnection": "cosmos_outbox.settings._env",
    "PayloadSettings": "cosmos_outbox.settings._env",
    "load_payload_settings": "cosmos_outbox.settings._env",
    "load_settings": "cosmos_outbox.settings._env",
    "read_settings": "cosmos_outbox.settings._env",
}

#: The public names listed (the `DEFAULT_*` values, `RETIRED_SETTINGS`,
#: `load_trigger_settings`, `PayloadConnection` and `load_payload_settings` are public too).
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
#: Renamed in 0.5 (one name per idea: the processor's name): warns, naming the new one.
_RENAMED = {"DEFAULT_LEASE_PREFIX": "cosmos_outbox.settings.DEFAULT_PROCESSOR_NAME"}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, renamed=_RENAMED)
