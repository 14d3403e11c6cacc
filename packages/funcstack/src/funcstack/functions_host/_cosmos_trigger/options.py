"""The Cosmos DB trigger's binding as the Cosmos DB extension reads it: names, start options,
lease intervals, and the triggers that would share one processor's leases.

Follows Azure/azure-webjobs-sdk-extensions, ``src/WebJobs.Extensions.CosmosDB/Trigger/``:
``CosmosDBTriggerAttribute`` (the properties and their defaults: feed poll delay 5 s; lease
renew 17 s, acquire 13 s, expiration 60 s, as ``ChangeFeedLeaseOptions`` in
Azure/azure-cosmos-dotnet-v3 has them -- the Functions docs swap acquire and renew),
``CosmosDBTriggerAttributeBindingProvider`` (the lease container defaults to the monitored
database; the prefix is the processor's name; the monitored container cannot hold the leases)
and ``CosmosDBTriggerListener.InitializeBuilder`` (``startFromTime`` parsed as .NET's
``DateTime.TryParse``, refused with ``startFromBeginning``; an interval of 0 keeps the
default).

``changeFeedMode`` (azure-functions 2.3's ``change_feed_mode``): ``LatestVersion`` (the default)
is served; ``AllVersionsAndDeletes`` is refused when the app is indexed
(``mode.change_feed_mode_refusal``): the trigger does not pass the mode to its processor (the
local endpoint serves that feed -- ``current`` and ``metadata`` with ``operationType``, ``lsn``,
``crts``, ``previousImageLSN``, ``timeToLiveExpired`` per change, "Change feed modes in Azure
Cosmos DB" -- to the SDKs and cosmos-changefeed; that page lists no Functions trigger support
for the mode). A function that would run and miss every delete must not start.

LOCAL ONLY: the app settings ``FUNCTIONS_HOST_COSMOS_LEASE_ACQUIRE_INTERVAL``,
``..._RENEW_INTERVAL`` and ``..._EXPIRATION_INTERVAL`` (ms) replace the processor's defaults for
a binding that sets none of its own, so a test can kill a host whose app it cannot change and
see its leases taken over in seconds (Azure has no such setting: there, the binding's
properties); the trigger's start line gives the intervals in force.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from funcstack.functions_host._config import SettingError, is_truthy, resolve
from funcstack.functions_host._functions import FunctionSpec

DEFAULT_FEED_POLL_DELAY_MS = 5000
DEFAULT_MAX_ITEMS = 100
#: ``ChangeFeedLeaseOptions``: DefaultAcquireInterval, DefaultRenewInterval,
#: DefaultExpirationInterval (seconds).
DEFAULT_ACQUIRE_INTERVAL = 13.0
DEFAULT_RENEW_INTERVAL = 17.0
DEFAULT_EXPIRATION_INTERVAL = 60.0
#: Local-only app settings (ms): defaults for a binding that sets no interval of its own.
LOCAL_INTERVAL_SETTINGS = {
    "leaseAcquireInterval": "FUNCTIONS_HOST_COSMOS_LEASE_ACQUIRE_INTERVAL",
    "leaseRenewInterval": "FUNCTIONS_HOST_COSMOS_LEASE_RENEW_INTERVAL",
    "leaseExpirationInterval": "FUNCTIONS_HOST_COSMOS_LEASE_EXPIRATION_INTERVAL",
}


@dataclass
class CosmosTriggerOptions:
    """The binding properties of a ``cosmosDBTrigger``, with app settings resolved."""

    connection: str
    database_name: str
    container_name: str
    lease_connection: str
    lease_database_name: str
    lease_container_name: str
    lease_container_prefix: str
    create_lease_container: bool
    feed_poll_delay: float
    max_items: int
    #: "Beginning", "Now" or a UTC time: where a lease without a checkpoint starts.
    start_time: dt.datetime | str
    #: Seconds (``leaseAcquireInterval``, ``leaseRenewInterval``, ``leaseExpirationInterval``,
    #: in ms in the binding; 0 or absent: the processor's defaults).
    acquire_interval: float = DEFAULT_ACQUIRE_INTERVAL
    renew_interval: float = DEFAULT_RENEW_INTERVAL
    expiration_interval: float = DEFAULT_EXPIRATION_INTERVAL
    #: Why the listener refuses to start (the extension's message), if it does.
    start_error: str | None = None

    @classmethod
    def from_binding(cls, binding: dict[str, Any]) -> CosmosTriggerOptions:
        def opt(key: str) -> Any:
            return resolve(binding.get(key))

        connection = str(opt("connection") or opt("connectionStringSetting") or "")
        if not connection:
            raise SettingError("cosmosDBTrigger needs 'connection'")
        database = str(opt("databaseName"))
        start, start_error = start_position(opt("startFromBeginning"), opt("startFromTime"))
        options = cls(
            connection=connection,
            database_name=database,
            container_name=str(opt("containerName") or opt("collectionName")),
            lease_connection=str(opt("leaseConnection") or connection),
            lease_database_name=str(opt("leaseDatabaseName") or database),
            # "leases" is the extension's documented default (leaseContainerName unset)
            lease_container_name=str(
                opt("leaseContainerName") or opt("leaseCollectionName") or "leases"
            ),
            lease_container_prefix=str(
                opt("leaseContainerPrefix") or opt("leaseCollectionPrefix") or ""
            ),
            create_lease_container=_as_bool(
                opt("createLeaseContainerIfNotExists")
                or opt("createLeaseCollectionIfNotExists")
                or False
            ),
            feed_poll_delay=_milliseconds(opt("feedPollDelay"), DEFAULT_FEED_POLL_DELAY_MS),
            max_items=int(opt("maxItemsPerInvocation") or DEFAULT_MAX_ITEMS),
            start_time=start,
            acquire_interval=_interval(binding, "leaseAcquireInterval", DEFAULT_ACQUIRE_INTERVAL),
            renew_interval=_interval(binding, "leaseRenewInterval", DEFAULT_RENEW_INTERVAL),
            expiration_interval=_interval(
                binding, "leaseExpirationInterval", DEFAULT_EXPIRATION_INTERVAL
            ),
            start_error=start_error,
        )
        if (
            options.lease_connection == options.connection
            and options.lease_database_name.lower() == database.lower()
            and options.lease_container_name.lower() == options.container_name.lower()
        ):
            # CosmosDBTriggerAttributeBindingProvider's refusal
            options.start_error = (
                "The monitored container cannot be the same as the container storing the leases."
            )
        return options

    @property
    def start_label(self) -> str:
        start = self.start_time
        return start if isinstance(start, str) else start.isoformat()


def start_position(from_beginning: Any, from_time: Any) -> tuple[dt.datetime | str, str | None]:
    """Where a lease without a checkpoint starts, as ``CosmosDBTriggerListener.InitializeBuilder``
    reads ``startFromBeginning`` / ``startFromTime``, and the error it stops at, if any.

    ``startFromTime`` is read as .NET's ``DateTime.TryParse``: a time with ``Z`` or an offset
    is that instant; one without a zone is ``DateTimeKind.Unspecified``, which the processor
    refuses (``ChangeFeedProcessorOptions.StartTime``); with ``startFromBeginning`` too the
    listener refuses to start."""
    beginning = from_beginning is not None and _as_bool(from_beginning)
    text = str(from_time or "").strip()
    if not text:
        return ("Beginning" if beginning else "Now"), None
    if beginning:
        return "Now", "Only one of StartFromBeginning or StartFromTime can be used"
    try:
        moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return "Now", (
            "The specified StartFromTime parameter is not in the correct format. "
            "Please use the ISO 8601 format with the UTC designator. For example: "
            "'2021-02-16T14:19:29Z'."
        )
    if moment.tzinfo is None:
        return "Now", "StartTime cannot have DateTimeKind.Unspecified (Parameter 'value')"
    return moment.astimezone(dt.UTC), None


def _interval(binding: dict[str, Any], key: str, default: float) -> float:
    """A lease interval in seconds: the binding's, else the local-only setting's, else the
    processor's default."""
    local = os.environ.get(LOCAL_INTERVAL_SETTINGS[key], "").strip()
    return _milliseconds(resolve(binding.get(key)), _milliseconds(local, default * 1000) * 1000)


def _milliseconds(value: Any, default_ms: float) -> float:
    """A binding interval in ms as seconds; 0, absent or negative: the default."""
    try:
        number = float(value) if value not in (None, "") else 0.0
    except (TypeError, ValueError):
        raise SettingError(f"not a number of milliseconds: {value!r}") from None
    return (number if number > 0 else default_ms) / 1000.0


def _as_bool(value: Any) -> bool:
    return value if isinstance(value, bool) else is_truthy(str(value))


def shared_leases(specs: Iterable[FunctionSpec]) -> list[tuple[str, str, CosmosTriggerOptions]]:
    """Pairs of Cosmos DB triggers of one app that would run one processor's leases: the same
    monitored container, the same lease container and the same prefix. In Azure each is a
    processor instance of its own, so they compete for the leases and each gets part of the
    changes, or none."""
    seen: dict[tuple[str, ...], str] = {}
    found: list[tuple[str, str, CosmosTriggerOptions]] = []
    for spec in specs:
        if spec.trigger_type != "cosmosDBTrigger":
            continue
        try:
            opts = CosmosTriggerOptions.from_binding(spec.trigger)
        except SettingError:
            continue  # said when its listener starts
        key = (
            _setting_value(opts.connection),
            opts.database_name.lower(),
            opts.container_name.lower(),
            _setting_value(opts.lease_connection),
            opts.lease_database_name.lower(),
            opts.lease_container_name.lower(),
            opts.lease_container_prefix,
        )
        if key in seen:
            found.append((seen[key], spec.name, opts))
        else:
            seen[key] = spec.name
    return found


def lease_intervals(specs: Iterable[FunctionSpec]) -> dict[str, dict[str, Any]]:
    """Each Cosmos DB trigger's container, lease container and lease intervals in force
    (seconds), by function: what the host's ready line hands the banner of ``funcstack
    run``. A binding the listener would refuse is left out (its start says why)."""
    found: dict[str, dict[str, Any]] = {}
    for spec in specs:
        if spec.trigger_type != "cosmosDBTrigger":
            continue
        try:
            opts = CosmosTriggerOptions.from_binding(spec.trigger)
        except SettingError:
            continue
        found[spec.name] = {
            "container": f"{opts.database_name}/{opts.container_name}",
            "leases": f"{opts.lease_database_name}/{opts.lease_container_name}",
            "acquire": opts.acquire_interval,
            "renew": opts.renew_interval,
            "expiration": opts.expiration_interval,
        }
    return found


def _setting_value(name: str) -> str:
    """What a connection setting names (two settings holding one account are one account)."""
    return os.environ.get(name) or os.environ.get(f"{name}__accountEndpoint") or name
