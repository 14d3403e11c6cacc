"""Where a relay process's OpenTelemetry goes: what the Functions worker does for an app with
`PYTHON_APPLICATIONINSIGHTS_ENABLE_TELEMETRY`, done by `cosmos-outbox relay` itself (a process
has no worker to do it), from the settings the Functions app has:

- `APPLICATIONINSIGHTS_CONNECTION_STRING` set: the Azure Monitor distro
  (azure-monitor-opentelemetry, `configure_azure_monitor`), with Entra ID auth when
  `APPLICATIONINSIGHTS_AUTHENTICATION_STRING` says `Authorization=AAD` (its `ClientId`: the
  user-assigned identity; without one, the system-assigned). The distro missing is an error
  naming it: the setting cannot be honoured without.
- otherwise nothing is configured here: the global providers are used as they are -- a no-op,
  or what `opentelemetry-instrument cosmos-outbox relay` (the OpenTelemetry distro, the
  `OTEL_*` settings: OTLP to a collector, Container Apps' managed agent) installed.

The relay's own instruments are `cosmos_outbox.telemetry`'s (DESIGN §10's names)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from cosmos_outbox.settings import SettingsError

logger = logging.getLogger("cosmos_outbox.relay")

CONNECTION_SETTING = "APPLICATIONINSIGHTS_CONNECTION_STRING"
AUTHENTICATION_SETTING = "APPLICATIONINSIGHTS_AUTHENTICATION_STRING"


def credential_of(authentication: str | None) -> Any:
    """The credential `APPLICATIONINSIGHTS_AUTHENTICATION_STRING` names (`Authorization=AAD`,
    `ClientId=<id>` optional), None without it; SettingsError for another value."""
    if not authentication or not authentication.strip():
        return None
    parts = {
        k.strip().lower(): v.strip()
        for k, _, v in (p.partition("=") for p in authentication.split(";"))
        if k.strip()
    }
    if parts.get("authorization", "").upper() != "AAD":
        raise SettingsError(
            f"invalid settings: {AUTHENTICATION_SETTING}: only Authorization=AAD "
            "(with ClientId=<the user-assigned identity's client id>) is understood"
        )
    from azure.identity import ManagedIdentityCredential

    client_id = parts.get("clientid")
    return (
        ManagedIdentityCredential(client_id=client_id) if client_id else ManagedIdentityCredential()
    )


def configure_exporters(
    environ: Mapping[str, str], *, service_name: str
) -> Callable[[], None] | None:
    """Configure the exporters the settings name (see the module); the function that flushes
    and shuts them down at the process's end, or None when nothing was configured here."""
    connection = environ.get(CONNECTION_SETTING, "").strip()
    if not connection:
        return None
    try:
        from azure.monitor.opentelemetry import configure_azure_monitor
    except ImportError:
        raise SettingsError(
            f"invalid settings: {CONNECTION_SETTING} is set, and the relay exports its telemetry "
            'to Application Insights with the Azure Monitor distro: pip install "cosmos-outbox'
            '[azure-monitor]" (azure-monitor-opentelemetry), or unset it'
        ) from None
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.resources import Resource

    options: dict[str, Any] = {
        "connection_string": connection,
        "resource": Resource.create(
            {"service.name": environ.get("OTEL_SERVICE_NAME") or service_name}
        ),
    }
    credential = credential_of(environ.get(AUTHENTICATION_SETTING))
    if credential is not None:
        options["credential"] = credential
    configure_azure_monitor(**options)
    logger.info("relay telemetry: exported to Application Insights (Azure Monitor distro)")
    meter_provider, tracer_provider = metrics.get_meter_provider(), trace.get_tracer_provider()

    def shutdown() -> None:
        for provider in (meter_provider, tracer_provider):
            close = getattr(provider, "shutdown", None)
            if close is not None:
                try:
                    close()
                except Exception:  # the process ends anyway
                    logger.warning("relay telemetry: shutdown failed", exc_info=True)

    return shutdown
