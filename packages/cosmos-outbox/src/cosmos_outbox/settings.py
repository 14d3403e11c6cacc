"""The outbox's settings, validated once. Names are the app-setting names (the package README,
"Settings"). No name of any app is a default: the container and the topic are the app's to
name; the database defaults to `outbox` and the lease container to `leases` (the Cosmos DB
trigger's documented default)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Self
from urllib.parse import urlsplit

from pydantic import (
    AliasChoices,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

# The host cannot resolve %SETTING% in int binding properties, but the Python worker indexes the
# app with the app settings in its environment: the trigger reads these at indexing time
# (`load_trigger_settings`), so the app settings take effect in Azure too.
DEFAULT_FEED_POLL_DELAY_MS = 1000
DEFAULT_MAX_ITEMS_PER_INVOCATION = 100
# NCRONTAB with seconds, as the timer trigger wants it: every minute.
DEFAULT_BACKLOG_ESTIMATE_SCHEDULE = "0 * * * * *"


__all__ = [
    "DEFAULT_BACKLOG_ESTIMATE_SCHEDULE",
    "DEFAULT_EVENT_TTL_SECONDS",
    "DEFAULT_FEED_POLL_DELAY_MS",
    "DEFAULT_IDEMPOTENCY_TTL_SECONDS",
    "DEFAULT_MAX_ITEMS_PER_INVOCATION",
    "RETIRED_SETTINGS",
    "OutboxSettings",
    "SettingsError",
    "TriggerSettings",
    "load_settings",
    "load_trigger_settings",
]

#: Settings that were replaced: read only to refuse them with a word on what replaced them.
RETIRED_SETTINGS = frozenset({"CLOUDEVENTS_SOURCE"})
#: Ten days: event documents must outlive any relay outage, or they expire unrelayed.
DEFAULT_EVENT_TTL_SECONDS = 864000
#: One day: how long a write's Idempotency-Key is remembered (its record's TTL). A client's
#: retries of one request must all come within it; later, the key is a new key.
DEFAULT_IDEMPOTENCY_TTL_SECONDS = 86400


class SettingsError(ValueError):
    """Settings are missing or invalid. The message names the settings, never their values."""


class TriggerSettings(BaseSettings):
    """The settings binding metadata is built from, read when the worker indexes the app."""

    model_config = SettingsConfigDict(
        case_sensitive=True, extra="ignore", populate_by_name=False, frozen=True
    )

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


class OutboxSettings(TriggerSettings):
    """Every setting of the outbox: the store (Cosmos DB), the broker (Service Bus, needed only
    where the relay runs), event and idempotency-record lifetimes and CloudEvents source."""

    cosmos_connection: SecretStr | None = Field(default=None, alias="CosmosDBConnection")
    cosmos_account_endpoint: str | None = Field(
        default=None, alias="CosmosDBConnection__accountEndpoint"
    )
    cosmos_database: str = Field(default="outbox", alias="COSMOS_DATABASE", min_length=1)
    cosmos_container: str = Field(alias="COSMOS_CONTAINER", min_length=1)
    cosmos_lease_container: str = Field(
        default="leases", alias="COSMOS_LEASE_CONTAINER", min_length=1
    )
    cosmos_verify_tls: bool = Field(default=True, alias="COSMOS_VERIFY_TLS")
    servicebus_connection: SecretStr | None = Field(default=None, alias="ServiceBusConnection")
    servicebus_namespace: str | None = Field(
        default=None,
        validation_alias=AliasChoices(
            "ServiceBusConnection__fullyQualifiedNamespace",
        ),
        alias="ServiceBusConnection__fullyQualifiedNamespace",
    )
    #: The topic the relay sends to (needed where the relay runs; an API-only app has none).
    servicebus_topic: str | None = Field(default=None, alias="SERVICEBUS_TOPIC", min_length=1)
    event_ttl_seconds: int = Field(default=DEFAULT_EVENT_TTL_SECONDS, alias="EVENT_TTL_SECONDS",
                                   ge=60)
    # How long an Idempotency-Key is remembered (the TTL of its record): the window in which a
    # retry of a write answers what the write answered instead of writing again.
    idempotency_ttl_seconds: int = Field(
        default=DEFAULT_IDEMPOTENCY_TTL_SECONDS, alias="IDEMPOTENCY_TTL_SECONDS", ge=1,
        le=2_147_483_647)
    # Put before each aggregate type's CloudEvents source path (`/orders`): empty (the path
    # alone), an absolute URI naming this service (`https://shop.example.com`) or a path.
    cloudevents_source_base: str = Field(
        default="", alias="CLOUDEVENTS_SOURCE_BASE", max_length=2048)
    # The setting this one replaced; set, it is refused with a word on what changed.
    cloudevents_source_replaced: str | None = Field(default=None, alias="CLOUDEVENTS_SOURCE")

    @field_validator("cloudevents_source_base")
    @classmethod
    def _uri_reference(cls, value: str) -> str:
        """Empty, or a URI-reference (RFC 3986) with no whitespace or control characters: an
        absolute URI (`https://...`, `urn:...`) or an absolute path (`/api`), never a bare
        word. A trailing `/` is dropped (the source path brings its own)."""
        if not value:
            return value
        if any(c.isspace() or ord(c) < 0x20 or c in '"<>\\^`{|}?#' for c in value):
            raise ValueError("must be a URI-reference with no query or fragment: no spaces "
                             "or reserved characters")
        try:
            parts = urlsplit(value)
        except ValueError:
            raise ValueError("must be a URI-reference") from None
        if not parts.scheme and not value.startswith("/"):
            raise ValueError("must be an absolute URI (https://..., urn:...) or a path (/...)")
        return value.rstrip("/")

    @field_validator("cloudevents_source_replaced")
    @classmethod
    def _replaced(cls, value: str | None) -> None:
        if value is not None:
            raise ValueError(
                "is replaced by CLOUDEVENTS_SOURCE_BASE: each aggregate type now has its own "
                "source, <base>/<collection> (e.g. https://shop.example.com/orders); set the "
                "base and remove CLOUDEVENTS_SOURCE")

    @model_validator(mode="after")
    def _cosmos_connection_given(self) -> Self:
        if self.cosmos_connection is None and not self.cosmos_account_endpoint:
            raise ValueError(
                "set CosmosDBConnection (connection string) or "
                "CosmosDBConnection__accountEndpoint (managed identity)"
            )
        return self


def _problems(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'settings'}: {e['msg']}" for e in exc.errors()
    )


def load_settings() -> OutboxSettings:
    """Read and validate the settings from the environment; errors name settings, not values."""
    try:
        return OutboxSettings()  # the values come from the environment
    except ValidationError as exc:
        raise SettingsError(f"invalid settings: {_problems(exc)}") from None


def load_trigger_settings(environ: Mapping[str, str] | None = None) -> TriggerSettings:
    """The trigger settings from the environment (no I/O): defaults when unset; a bad value fails
    indexing with a message naming the setting."""
    env = os.environ if environ is None else environ
    names = ("FEED_POLL_DELAY_MS", "MAX_ITEMS_PER_INVOCATION", "BACKLOG_ESTIMATE_SCHEDULE")
    try:
        return TriggerSettings.model_validate({n: env[n] for n in names if env.get(n)})
    except ValidationError as exc:
        raise SettingsError(f"invalid settings: {_problems(exc)}") from None
