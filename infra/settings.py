"""All settings, validated once. Names are the app-setting names (DESIGN.md §6)."""

from __future__ import annotations

from typing import Self

from pydantic import AliasChoices, Field, SecretStr, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

# The Functions host cannot resolve %SETTING% in int binding properties
# (MicrosoftDocs/azure-docs#99714), so the trigger declares these literals; the settings of the
# same names override them in the local runner only.
DEFAULT_FEED_POLL_DELAY_MS = 1000
DEFAULT_MAX_ITEMS_PER_INVOCATION = 100


class SettingsError(ValueError):
    """Settings are missing or invalid. The message names the settings, never their values."""


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        case_sensitive=True, extra="ignore", populate_by_name=False, frozen=True
    )

    cosmos_connection: SecretStr | None = Field(default=None, alias="CosmosDBConnection")
    cosmos_account_endpoint: str | None = Field(
        default=None, alias="CosmosDBConnection__accountEndpoint"
    )
    cosmos_database: str = Field(default="outbox", alias="COSMOS_DATABASE", min_length=1)
    cosmos_container: str = Field(default="contacts", alias="COSMOS_CONTAINER", min_length=1)
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
    servicebus_topic: str = Field(default="contact-events", alias="SERVICEBUS_TOPIC", min_length=1)
    event_ttl_seconds: int = Field(default=864000, alias="EVENT_TTL_SECONDS", ge=60)
    feed_poll_delay_ms: int = Field(
        default=DEFAULT_FEED_POLL_DELAY_MS, alias="FEED_POLL_DELAY_MS", ge=10, le=600_000
    )
    max_items_per_invocation: int = Field(
        default=DEFAULT_MAX_ITEMS_PER_INVOCATION, alias="MAX_ITEMS_PER_INVOCATION", ge=1, le=10_000
    )

    @model_validator(mode="after")
    def _cosmos_connection_given(self) -> Self:
        if self.cosmos_connection is None and not self.cosmos_account_endpoint:
            raise ValueError(
                "set CosmosDBConnection (connection string) or "
                "CosmosDBConnection__accountEndpoint (managed identity)"
            )
        return self


def load_settings() -> Settings:
    """Read and validate the settings from the environment; errors name settings, not values."""
    try:
        return Settings()
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'settings'}: {e['msg']}" for e in exc.errors()
        )
        raise SettingsError(f"invalid settings: {problems}") from None
