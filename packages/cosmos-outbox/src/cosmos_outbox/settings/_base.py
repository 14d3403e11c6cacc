"""The settings' defaults, their error, and the trigger settings read at indexing: what both
`cosmos_outbox.settings` (the public module, no pydantic-settings at import) and `_env` (the
settings read from the environment with pydantic-settings) need, so neither imports the other
(`cosmos_outbox.settings` loads `_env` on first use)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

# The host cannot resolve %SETTING% in int binding properties, but the Python worker indexes the
# app with the app settings in its environment: the trigger reads these at indexing time
# (`load_trigger_settings`), so the app settings take effect in Azure too.
DEFAULT_FEED_POLL_DELAY_MS = 1000
DEFAULT_MAX_ITEMS_PER_INVOCATION = 100
# NCRONTAB with seconds, as the timer trigger wants it: every minute.
DEFAULT_BACKLOG_ESTIMATE_SCHEDULE = "0 * * * * *"
#: When the relay's hosts look for bulk operations to work (`outbox_operations`): every 5 s
#: (one query in the operations' partition each time; a tick works up to 25 s).
DEFAULT_OPERATIONS_SCHEDULE = "*/5 * * * * *"
#: The relay's change feed processor's name (OUTBOX_PROCESSOR_NAME): what its lease documents
#: start with (the Functions trigger's `leaseContainerPrefix`, which the host passes to the
#: processor as its name; cosmos-changefeed's `processor_name`). A trigger of the app's own on
#: the same container and lease container, of another name, does not share the relay's leases
#: (in Azure two triggers sharing leases split the changes between them).
DEFAULT_PROCESSOR_NAME = "outbox."
#: The database and the relay's lease container when COSMOS_DATABASE, COSMOS_LEASE_CONTAINER
#: are not set.
DEFAULT_DATABASE = "outbox"
DEFAULT_LEASE_CONTAINER = "leases"

#: OUTBOX_FAILURE_INGEST's values, each with the spellings that give it (a boolean's, as
#: pydantic reads one, for `true` and `false`): drain here and read the records; read the
#: records another host drains (the relay runs elsewhere: a container app, another app);
#: neither.
FailureIngest = Literal["true", "elsewhere", "false"]
FAILURE_INGEST_VALUES: dict[FailureIngest, frozenset[str]] = {
    "true": frozenset({"true", "1", "on", "yes", "y", "t"}),
    "elsewhere": frozenset({"elsewhere"}),
    "false": frozenset({"false", "0", "off", "no", "n", "f"}),
}

#: The relay's lease intervals, by the change feed processor's keyword: the Cosmos DB trigger's
#: binding properties of those names (`leaseAcquireInterval`, `leaseExpirationInterval`,
#: `leaseRenewInterval`, milliseconds), which the trigger's binding and `cosmos-outbox relay` both
#: read from these app settings; 0 (their default) keeps the processor's own, as the trigger
#: does for a 0 (cosmos-changefeed's, .NET's: 13 s, 60 s, 17 s).
LEASE_INTERVAL_SETTINGS = {
    "lease_acquire_interval": "LEASE_ACQUIRE_INTERVAL_MS",
    "lease_expiration_interval": "LEASE_EXPIRATION_INTERVAL_MS",
    "lease_renew_interval": "LEASE_RENEW_INTERVAL_MS",
}
#: The same, as the local stack's Functions host (funcstack) takes them for a trigger that sets
#: none (milliseconds; local only: Azure's host has no such setting): `cosmos-outbox relay` reads
#: them when the settings above are 0, so a relay process beside a local trigger keeps its
#: intervals.
LOCAL_HOST_INTERVAL_SETTINGS = {
    "lease_acquire_interval": "FUNCTIONS_HOST_COSMOS_LEASE_ACQUIRE_INTERVAL",
    "lease_expiration_interval": "FUNCTIONS_HOST_COSMOS_LEASE_EXPIRATION_INTERVAL",
    "lease_renew_interval": "FUNCTIONS_HOST_COSMOS_LEASE_RENEW_INTERVAL",
}


def retired(field: str, why: str) -> Any:
    """The validator of a retired setting's field (read only to be refused): set, it is an
    error saying `why` (what replaced it)."""

    def refuse(cls: type, value: str | None) -> None:
        if value is not None:
            raise ValueError(why)

    return field_validator(field)(classmethod(refuse))


#: Settings that were replaced: read only to refuse them with a word on what replaced them.
RETIRED_SETTINGS = frozenset({"CLOUDEVENTS_SOURCE", "OUTBOX_LEASE_PREFIX"})
#: Ten days: event documents must outlive any relay outage, or they expire unrelayed.
DEFAULT_EVENT_TTL_SECONDS = 864000
#: The largest message (and batch) the relay sends: 256 KB, Service Bus Standard's limit. A link
#: that announces a smaller one wins; Premium namespaces raise it (1 MB: their batch limit).
DEFAULT_SERVICEBUS_MAX_MESSAGE_BYTES = 256 * 1024
#: The private blob container of the claim check: bodies too large for a message.
DEFAULT_PAYLOAD_CONTAINER = "outbox-payloads"
#: The largest body the relay offloads: 2 MiB, Cosmos DB's item limit (a larger event cannot be
#: stored in the first place). Larger bodies, and every large body when it is 0, are quarantined.
DEFAULT_PAYLOAD_MAX_BYTES = 2 * 1024 * 1024
#: One day: how long a write's Idempotency-Key is remembered (its record's TTL). A client's
#: retries of one request must all come within it; later, the key is a new key.
DEFAULT_IDEMPOTENCY_TTL_SECONDS = 86400
#: Two weeks: how long an archived or resolved failure record is kept.
DEFAULT_FAILURE_RETENTION_SECONDS = 14 * 86_400


class SettingsError(ValueError):
    """Settings are missing or invalid. The message names the settings, never their values."""


class TriggerSettings(BaseModel):
    """The settings binding metadata is built from, read when the worker indexes the app
    (`load_trigger_settings`; `OutboxSettings` holds them too)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=False, frozen=True)

    feed_poll_delay_ms: int = Field(
        default=DEFAULT_FEED_POLL_DELAY_MS, alias="FEED_POLL_DELAY_MS", ge=10, le=600_000
    )
    max_items_per_invocation: int = Field(
        default=DEFAULT_MAX_ITEMS_PER_INVOCATION, alias="MAX_ITEMS_PER_INVOCATION", ge=1, le=10_000
    )
    backlog_estimate_schedule: str = Field(
        default=DEFAULT_BACKLOG_ESTIMATE_SCHEDULE,
        alias="BACKLOG_ESTIMATE_SCHEDULE",
        pattern=r"^\s*\S+(\s+\S+){5}\s*$",  # six NCRONTAB fields
    )
    operations_schedule: str = Field(
        default=DEFAULT_OPERATIONS_SCHEDULE,
        alias="OUTBOX_OPERATIONS_SCHEDULE",
        pattern=r"^\s*\S+(\s+\S+){5}\s*$",  # six NCRONTAB fields
    )
    #: The relay's processor's name (`DEFAULT_PROCESSOR_NAME` says what it is); "" keeps the
    #: leases a relay deployed before 0.3 wrote (they have no prefix).
    processor_name: str = Field(
        default=DEFAULT_PROCESSOR_NAME,
        alias="OUTBOX_PROCESSOR_NAME",
        max_length=64,
        pattern=r"^[A-Za-z0-9._-]*$",
    )
    #: OUTBOX_LEASE_PREFIX, renamed OUTBOX_PROCESSOR_NAME in 0.5: read only to be refused.
    lease_prefix_renamed: str | None = Field(default=None, alias="OUTBOX_LEASE_PREFIX")
    #: The Service Bus queue (in the topic's namespace) the relay schedules scheduled events'
    #: releases on; read at indexing: set, the relay's blueprint registers `release_due_events`
    #: on it. None: no scheduled events relayed (one is quarantined, the reason naming this).
    schedule_queue: str | None = Field(
        default=None,
        alias="SERVICEBUS_SCHEDULE_QUEUE",
        min_length=1,
        max_length=260,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._/-]*$",
    )

    #: The relay's lease intervals in ms (`LEASE_INTERVAL_SETTINGS`); 0: the processor's own.
    lease_acquire_interval_ms: int = Field(
        default=0, alias="LEASE_ACQUIRE_INTERVAL_MS", ge=0, le=86_400_000
    )
    lease_expiration_interval_ms: int = Field(
        default=0, alias="LEASE_EXPIRATION_INTERVAL_MS", ge=0, le=86_400_000
    )
    lease_renew_interval_ms: int = Field(
        default=0, alias="LEASE_RENEW_INTERVAL_MS", ge=0, le=86_400_000
    )

    #: The relay trigger's database and lease container (`binding_name` says how it binds them).
    cosmos_database: str = Field(default=DEFAULT_DATABASE, alias="COSMOS_DATABASE", min_length=1)
    cosmos_lease_container: str = Field(
        default=DEFAULT_LEASE_CONTAINER, alias="COSMOS_LEASE_CONTAINER", min_length=1
    )

    # The topic's subscriptions whose dead letters the operators' routes count, list, resubmit
    # and discard, comma-separated; `name=container` (or `name=database/container`) names the
    # projection container of the library's subscriber on it (its inbox, held events and gaps:
    # the journey, the subscribers' status and what a re-drive will apply).
    watched_subscriptions: str = Field(default="", alias="OUTBOX_SUBSCRIPTIONS", max_length=4096)
    # Queues (an app's command queues) whose dead letters the operators' routes serve too.
    dead_letter_queues: str = Field(default="", alias="OUTBOX_DEAD_LETTER_QUEUES", max_length=4096)

    @field_validator("watched_subscriptions")
    @classmethod
    def _subscriptions(cls, value: str) -> str:
        for name, container in _entries(value):
            _entity_name(name)
            if container is not None and not _CONTAINER_PATH.fullmatch(container):
                raise ValueError(
                    f"{name}={container}: the container is a Cosmos DB container name, or "
                    "database/container"
                )
        return value

    @field_validator("dead_letter_queues")
    @classmethod
    def _queues(cls, value: str) -> str:
        for name, container in _entries(value):
            _entity_name(name)
            if container is not None:
                raise ValueError(f"{name}={container}: a queue names no container")
        return value

    def subscriptions(self) -> tuple[tuple[str, str | None, str | None], ...]:
        """The watched subscriptions: (name, its subscriber's database or None, container or
        None)."""
        found = []
        for name, container in _entries(self.watched_subscriptions):
            database, _, rest = (container or "").rpartition("/")
            found.append((name, database or None, rest or None))
        return tuple(found)

    def queues(self) -> tuple[str, ...]:
        return tuple(name for name, _ in _entries(self.dead_letter_queues))

    #: Whether the watched dead-letter queues are drained into the container
    #: (`cosmos_outbox.operations._failures`: one `failedMessage` record per failure), and
    #: where (`FAILURE_INGEST_VALUES`), read at indexing: `true`, here (the relay's blueprint
    #: registers `ingest_failures_*` on each dead-letter path, `cosmos-outbox relay` a receiver)
    #: and the operators' routes read the records; `elsewhere`, the routes read the records that
    #: another host drains, and nothing drains here; `false`, neither (the queues are peeked).
    failure_ingest_mode: FailureIngest = Field(default="true", alias="OUTBOX_FAILURE_INGEST")
    #: How long an archived or resolved failure record is kept (its TTL); an open one never
    #: expires.
    failure_retention_seconds: int = Field(
        default=DEFAULT_FAILURE_RETENTION_SECONDS,
        alias="OUTBOX_FAILURE_RETENTION_SECONDS",
        ge=3600,
        le=2_147_483_647,
    )

    @field_validator("failure_ingest_mode", mode="before")
    @classmethod
    def _failure_ingest(cls, value: object) -> FailureIngest:
        """`true`, `false` (or any of a boolean's spellings, as before it took a third value)
        or `elsewhere`."""
        text = str(value).strip().lower() if isinstance(value, (str, bool)) else ""
        for mode, spellings in FAILURE_INGEST_VALUES.items():
            if text in spellings:
                return mode
        raise ValueError(
            f"{value!r}: true (drain the watched dead-letter queues here and read the failure "
            "records), elsewhere (read the records another host drains, register no ingest "
            "here) or false (neither: the dead-letter queues are peeked)"
        )

    @property
    def failure_records(self) -> bool:
        """The failures are kept as records (OUTBOX_FAILURE_INGEST `true` or `elsewhere`): the
        dead letters' groups, routes and operations read and act on them."""
        return self.failure_ingest_mode != "false"

    @property
    def failure_ingest_here(self) -> bool:
        """This host drains the watched dead-letter queues into the records
        (OUTBOX_FAILURE_INGEST `true`): the `ingest_failures_*` triggers, the relay process's
        receivers."""
        return self.failure_ingest_mode == "true"

    _renamed = retired(
        "lease_prefix_renamed",
        "is renamed OUTBOX_PROCESSOR_NAME (the relay's processor's name, as the change feed "
        "processor calls it): set OUTBOX_PROCESSOR_NAME to the same value (the leases stay the "
        "relay's) and remove OUTBOX_LEASE_PREFIX",
    )

    @field_validator("schedule_queue", mode="before")
    @classmethod
    def _unset_when_empty(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    @model_validator(mode="after")
    def _renewed_before_it_expires(self) -> TriggerSettings:
        given = {name: self.lease_interval(name) for name in LEASE_INTERVAL_SETTINGS}
        if any(value is not None for value in given.values()):  # else the processor's own
            sources = {
                name: setting if given[name] is not None else "the processor's default"
                for name, setting in LEASE_INTERVAL_SETTINGS.items()
            }
            check_renewal(lease_intervals_of(given), sources)
        return self

    def lease_interval(self, name: str) -> float | None:
        """A lease interval in seconds (`name`: the processor's keyword), None when 0 (unset)."""
        milliseconds = int(getattr(self, f"{name}_ms"))
        return milliseconds / 1000 if milliseconds else None

    def binding_name(self, field: str) -> str:
        """What the relay trigger binds the setting of `field` with: its `%NAME%` expression
        when the app setting is set (the host resolves it, as for any binding), else the
        default's name. An expression whose app setting is missing is an error in Azure (the
        host cannot index the function: "'%COSMOS_LEASE_CONTAINER%' does not resolve to a
        value"), so a setting the README gives a default must not be bound as one when it is
        not set."""
        if field in self.model_fields_set:
            return f"%{type(self).model_fields[field].alias}%"
        return str(getattr(self, field))


#: Service Bus's entity names (subscriptions, queues): letters, digits, `.`, `-`, `_` (and `/`
#: in a queue's path), starting and ending with a letter or digit, at most 260 characters.
_ENTITY_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._/-]{0,258}[A-Za-z0-9])?")
#: A Cosmos DB container, or database/container: no `\\`, `#`, `?`, nor `/` but the one.
_CONTAINER_PATH = re.compile(r"(?:[^/\\#?\s]{1,255}/)?[^/\\#?\s]{1,255}")


def _entries(value: str) -> list[tuple[str, str | None]]:
    """`a, b=c` as [("a", None), ("b", "c")]; empty items skipped."""
    entries = []
    for item in value.split(","):
        name, sep, container = item.strip().partition("=")
        if name.strip():
            entries.append((name.strip(), container.strip() if sep else None))
    return entries


def _entity_name(name: str) -> None:
    if not _ENTITY_NAME.fullmatch(name):
        raise ValueError(
            f"{name!r} is not a Service Bus entity name (letters, digits, '.', '-', '_')"
        )


def lease_intervals_of(given: Mapping[str, float | None]) -> dict[str, float]:
    """Lease intervals in seconds, by the processor's keyword: those `given`, else the change
    feed processor's own defaults, read from its signature (cosmos-changefeed says them once)."""
    import inspect

    from cosmos_changefeed.aio import ChangeFeedProcessor

    parameters = inspect.signature(ChangeFeedProcessor).parameters
    return {
        name: float(value if value is not None else parameters[name].default)
        for name, value in given.items()
    }


def check_renewal(intervals: Mapping[str, float], sources: Mapping[str, str]) -> None:
    """Refuse a renew interval at or over the expiration interval (the change feed processor
    would refuse it, for ever, at each start): `sources` names where each came from."""
    renew, expiry = (
        intervals.get("lease_renew_interval"),
        intervals.get("lease_expiration_interval"),
    )
    if renew is not None and expiry is not None and renew >= expiry:
        raise ValueError(
            f"the lease renew interval ({renew:g} s, {sources['lease_renew_interval']}) must be "
            f"shorter than the expiration interval ({expiry:g} s, "
            f"{sources['lease_expiration_interval']}): a lease renewed less often than it expires "
            "is taken by another instance between two renewals"
        )


def problems(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'settings'}: {e['msg']}" for e in exc.errors()
    )


def load_trigger_settings(environ: Mapping[str, str] | None = None) -> TriggerSettings:
    """The trigger settings from the environment (no I/O): defaults when unset; a bad value fails
    indexing with a message naming the setting."""
    env = os.environ if environ is None else environ
    names = (
        "FEED_POLL_DELAY_MS",
        "MAX_ITEMS_PER_INVOCATION",
        "BACKLOG_ESTIMATE_SCHEDULE",
        "OUTBOX_OPERATIONS_SCHEDULE",
        "COSMOS_DATABASE",
        "COSMOS_LEASE_CONTAINER",
        *LEASE_INTERVAL_SETTINGS.values(),
    )
    values = {n: env[n] for n in names if env.get(n)}
    for name in ("OUTBOX_PROCESSOR_NAME", "OUTBOX_LEASE_PREFIX"):  # "" on purpose: before 0.3
        if name in env:
            values[name] = env[name].strip()
    for name in (
        "OUTBOX_SUBSCRIPTIONS",
        "OUTBOX_DEAD_LETTER_QUEUES",
        "OUTBOX_FAILURE_INGEST",
        "OUTBOX_FAILURE_RETENTION_SECONDS",
    ):
        if env.get(name, "").strip():
            values[name] = env[name].strip()
    if env.get("SERVICEBUS_SCHEDULE_QUEUE", "").strip():
        values["SERVICEBUS_SCHEDULE_QUEUE"] = env["SERVICEBUS_SCHEDULE_QUEUE"].strip()
    try:
        return TriggerSettings.model_validate(values)
    except ValidationError as exc:
        raise SettingsError(f"invalid settings: {problems(exc)}") from None
