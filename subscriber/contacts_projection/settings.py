"""The subscriber's settings, validated once. Names are its app-setting names."""

from __future__ import annotations

from pydantic import Field

from cosmos_outbox.settings import CosmosSettings, SettingsError, read_settings

__all__ = ["DEFAULT_INBOX_TTL_SECONDS", "SettingsError", "SubscriberSettings", "load_settings"]

# Longer than any redelivery of an event can come: the outbox keeps an event (and so may
# resend it) for EVENT_TTL_SECONDS (10 days by default), the topic's messages live at most
# their TTL, and a dead-lettered message may be re-driven by hand. 14 days covers all three;
# past it the version check still drops a repeat (version <= last applied).
DEFAULT_INBOX_TTL_SECONDS = 14 * 24 * 3600


class SubscriberSettings(CosmosSettings):
    """The projection's container and its inbox's lifetime, on the Cosmos DB account of
    `CosmosSettings` (cosmos-outbox's: the connection, database and TLS settings)."""

    projection_container: str = Field(
        default="contact-projections", alias="PROJECTION_CONTAINER", min_length=1
    )
    inbox_ttl_seconds: int = Field(
        default=DEFAULT_INBOX_TTL_SECONDS, alias="INBOX_TTL_SECONDS", ge=3600
    )


def load_settings() -> SubscriberSettings:
    """The subscriber's settings, from the environment."""
    return read_settings(SubscriberSettings)
