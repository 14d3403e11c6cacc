"""The settings read from the environment with pydantic-settings (`cosmos_outbox.settings`
re-exports them and imports this module on first use)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Self, TypeVar
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

from cosmos_outbox.settings._base import (
    DEFAULT_DATABASE,
    DEFAULT_EVENT_TTL_SECONDS,
    DEFAULT_IDEMPOTENCY_TTL_SECONDS,
    DEFAULT_PAYLOAD_CONTAINER,
    DEFAULT_PAYLOAD_MAX_BYTES,
    DEFAULT_SERVICEBUS_MAX_MESSAGE_BYTES,
    SettingsError,
    TriggerSettings,
    problems,
    retired,
)

S = TypeVar("S", bound="BaseSettings")

__all__ = [
    "CosmosSettings",
    "OutboxSettings",
    "PayloadConnection",
    "PayloadSettings",
    "load_payload_settings",
    "load_settings",
    "read_settings",
]


@dataclass(frozen=True)
class PayloadConnection:
    """Where the claim check's payloads are: a connection string (secret), or a blob service
    URI reached with a managed identity (`DefaultAzureCredential`); and the container."""

    container: str
    connection_string: SecretStr | None = None
    service_uri: str | None = None
    #: the setting it came from (for log lines and errors; never the value)
    setting: str = ""


class PayloadSettings(BaseSettings):
    """Where the claim check keeps bodies too large for a message, read by the relay (to
    upload) and by subscribers (to fetch). The Functions convention for a connection named
    `OutboxPayloadStorage`: a connection string, or `__blobServiceUri` (`__serviceUri`) with a
    managed identity; without it, the host's own storage (`AzureWebJobsStorage`: connection
    string, `__blobServiceUri` or `__accountName`). No storage at all: no claim check."""

    model_config = SettingsConfigDict(
        case_sensitive=True, extra="ignore", populate_by_name=False, frozen=True
    )

    payload_connection: SecretStr | None = Field(default=None, alias="OutboxPayloadStorage")
    payload_service_uri: str | None = Field(
        default=None,
        validation_alias=AliasChoices(
            "OutboxPayloadStorage__blobServiceUri", "OutboxPayloadStorage__serviceUri"
        ),
        alias="OutboxPayloadStorage__blobServiceUri",
    )
    host_storage: SecretStr | None = Field(default=None, alias="AzureWebJobsStorage")
    host_storage_service_uri: str | None = Field(
        default=None, alias="AzureWebJobsStorage__blobServiceUri"
    )
    host_storage_account: str | None = Field(default=None, alias="AzureWebJobsStorage__accountName")
    payload_container: str = Field(
        default=DEFAULT_PAYLOAD_CONTAINER, alias="OUTBOX_PAYLOAD_CONTAINER"
    )

    @field_validator("payload_connection", "host_storage", mode="before")
    @classmethod
    def _empty_secret_is_unset(cls, value: object) -> object:
        return None if value == "" else value

    @field_validator(
        "payload_service_uri", "host_storage_service_uri", "host_storage_account", mode="before"
    )
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("payload_service_uri", "host_storage_service_uri")
    @classmethod
    def _https_uri(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value)
        if parts.scheme not in ("https", "http") or not parts.netloc:
            raise ValueError(
                "must be the blob service's URI (https://<account>.blob.core.windows.net)"
            )
        return value.rstrip("/")

    @field_validator("payload_container")
    @classmethod
    def _container_name(cls, value: str) -> str:
        """Blob Storage's container names: 3-63 lowercase letters, digits and single hyphens,
        starting and ending with a letter or digit."""
        if not _CONTAINER_NAME.fullmatch(value) or "--" in value:
            raise ValueError(
                "must be a blob container name: 3-63 lowercase letters, digits "
                "and single hyphens, starting and ending with a letter or digit"
            )
        return value

    def payload_storage(self) -> PayloadConnection | None:
        """The claim check's storage, OutboxPayloadStorage first, then the host's; None when
        neither is set."""
        account = self.host_storage_account
        # In order: a connection string (its secret) or a blob service URI, from the setting.
        found: tuple[tuple[SecretStr | None, str | None, str], ...] = (
            (self.payload_connection, None, "OutboxPayloadStorage"),
            (None, self.payload_service_uri, "OutboxPayloadStorage__blobServiceUri"),
            (self.host_storage, None, "AzureWebJobsStorage"),
            (None, self.host_storage_service_uri, "AzureWebJobsStorage__blobServiceUri"),
            (
                None,
                f"https://{account}.blob.core.windows.net" if account else None,
                "AzureWebJobsStorage__accountName",
            ),
        )
        for secret, uri, setting in found:
            if secret is not None or uri:
                return PayloadConnection(
                    self.payload_container,
                    connection_string=secret,
                    service_uri=uri,
                    setting=setting,
                )
        return None


_CONTAINER_NAME = re.compile(r"[a-z0-9][a-z0-9-]{1,61}[a-z0-9]")


class CosmosSettings(BaseSettings):
    """The Cosmos DB account and database an app reads and writes: the connection named
    `CosmosDBConnection` (a connection string, or `__accountEndpoint` with a managed identity),
    as the Cosmos DB trigger reads it. A subscriber's settings extend it too."""

    model_config = SettingsConfigDict(
        case_sensitive=True, extra="ignore", populate_by_name=False, frozen=True
    )

    cosmos_connection: SecretStr | None = Field(default=None, alias="CosmosDBConnection")
    cosmos_account_endpoint: str | None = Field(
        default=None, alias="CosmosDBConnection__accountEndpoint"
    )
    cosmos_database: str = Field(default=DEFAULT_DATABASE, alias="COSMOS_DATABASE", min_length=1)
    cosmos_verify_tls: bool = Field(default=True, alias="COSMOS_VERIFY_TLS")

    @model_validator(mode="after")
    def _cosmos_connection_given(self) -> Self:
        if self.cosmos_connection is None and not self.cosmos_account_endpoint:
            raise ValueError(
                "set CosmosDBConnection (connection string) or "
                "CosmosDBConnection__accountEndpoint (managed identity)"
            )
        return self


class OutboxSettings(TriggerSettings, PayloadSettings, CosmosSettings):
    """Every setting of the outbox: the store (Cosmos DB), the broker (Service Bus, needed only
    where the relay runs), event and idempotency-record lifetimes, CloudEvents source, and
    the claim check's storage and limits."""

    model_config = SettingsConfigDict(
        case_sensitive=True, extra="ignore", populate_by_name=False, frozen=True
    )

    cosmos_container: str = Field(alias="COSMOS_CONTAINER", min_length=1)
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
    event_ttl_seconds: int = Field(
        default=DEFAULT_EVENT_TTL_SECONDS, alias="EVENT_TTL_SECONDS", ge=60
    )
    #: How long after the trigger's poll delay a pending event may still wait before the relay
    #: is said to be stalled (the status, the console, `outbox.relay.stalled`, /health).
    relay_stall_seconds: int = Field(
        default=60, alias="OUTBOX_RELAY_STALL_SECONDS", ge=1, le=86_400
    )
    #: The largest message (and batch) the relay sends; the link's own limit wins when smaller.
    #: A message above it is offloaded to the payload store (the claim check).
    servicebus_max_message_bytes: int = Field(
        default=DEFAULT_SERVICEBUS_MAX_MESSAGE_BYTES,
        alias="SERVICEBUS_MAX_MESSAGE_BYTES",
        ge=1024,
        le=100 * 1024 * 1024,
    )
    #: The largest body the relay offloads; above it (and with 0, for every body too large for
    #: a message) the event is quarantined.
    payload_max_bytes: int = Field(
        default=DEFAULT_PAYLOAD_MAX_BYTES,
        alias="OUTBOX_PAYLOAD_MAX_BYTES",
        ge=0,
        le=100 * 1024 * 1024,
    )
    # How long an Idempotency-Key is remembered (the TTL of its record): the window in which a
    # retry of a write answers what the write answered instead of writing again.
    idempotency_ttl_seconds: int = Field(
        default=DEFAULT_IDEMPOTENCY_TTL_SECONDS,
        alias="IDEMPOTENCY_TTL_SECONDS",
        ge=1,
        le=2_147_483_647,
    )
    # Put before each aggregate type's CloudEvents source path (`/orders`): empty (the path
    # alone), an absolute URI naming this service (`https://shop.example.com`) or a path.
    cloudevents_source_base: str = Field(
        default="", alias="CLOUDEVENTS_SOURCE_BASE", max_length=2048
    )
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
            raise ValueError(
                "must be a URI-reference with no query or fragment: no spaces "
                "or reserved characters"
            )
        try:
            parts = urlsplit(value)
        except ValueError:
            raise ValueError("must be a URI-reference") from None
        if not parts.scheme and not value.startswith("/"):
            raise ValueError("must be an absolute URI (https://..., urn:...) or a path (/...)")
        return value.rstrip("/")

    _replaced = retired(
        "cloudevents_source_replaced",
        "is replaced by CLOUDEVENTS_SOURCE_BASE: each aggregate type now has its own source, "
        "<base>/<collection> (e.g. https://shop.example.com/orders); set the base and remove "
        "CLOUDEVENTS_SOURCE",
    )


def read_settings(kind: type[S]) -> S:
    """Settings of `kind` read from the environment and validated once; a bad or missing one
    raises `SettingsError` naming the settings, never their values."""
    try:
        return kind()  # the values come from the environment
    except ValidationError as exc:
        raise SettingsError(f"invalid settings: {problems(exc)}") from None


def load_settings() -> OutboxSettings:
    """Every setting of the outbox, from the environment (`read_settings(OutboxSettings)`)."""
    return read_settings(OutboxSettings)


def load_payload_settings() -> PayloadSettings:
    """The claim check's storage settings alone (a subscriber's), from the environment."""
    return read_settings(PayloadSettings)
