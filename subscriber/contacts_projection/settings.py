"""The subscriber's settings, validated once. Names are its app-setting names."""

from __future__ import annotations

from typing import Self

from pydantic import Field, SecretStr, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

# Longer than any redelivery of an event can come: the outbox keeps an event (and so may
# resend it) for EVENT_TTL_SECONDS (10 days by default), the topic's messages live at most
# their TTL, and a dead-lettered message may be re-driven by hand. 14 days covers all three;
# past it the version check still drops a repeat (version <= last applied).
DEFAULT_INBOX_TTL_SECONDS = 14 * 24 * 3600


class SettingsError(ValueError):
    """Settings are missing or invalid; the message names settings, never values."""


class SubscriberSettings(BaseSettings):
    model_config = SettingsConfigDict(case_sensitive=True, extra="ignore", frozen=True)

    cosmos_connection: SecretStr | None = Field(default=None, alias="CosmosDBConnection")
    cosmos_account_endpoint: str | None = Field(
        default=None, alias="CosmosDBConnection__accountEndpoint"
    )
    cosmos_database: str = Field(default="outbox", alias="COSMOS_DATABASE", min_length=1)
    projection_container: str = Field(
        default="contact-projections", alias="PROJECTION_CONTAINER", min_length=1
    )
    cosmos_verify_tls: bool = Field(default=True, alias="COSMOS_VERIFY_TLS")
    inbox_ttl_seconds: int = Field(
        default=DEFAULT_INBOX_TTL_SECONDS, alias="INBOX_TTL_SECONDS", ge=3600
    )

    @model_validator(mode="after")
    def _cosmos_connection_given(self) -> Self:
        if self.cosmos_connection is None and not self.cosmos_account_endpoint:
            raise ValueError(
                "set CosmosDBConnection (connection string) or "
                "CosmosDBConnection__accountEndpoint (managed identity)"
            )
        return self


def load_settings() -> SubscriberSettings:
    try:
        return SubscriberSettings()
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'settings'}: {e['msg']}"
            for e in exc.errors()
        )
        raise SettingsError(f"invalid settings: {problems}") from None
