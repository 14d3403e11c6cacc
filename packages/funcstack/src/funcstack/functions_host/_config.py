"""Settings the way the Functions host sees them: local.settings.json, host.json, %NAME%."""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

logger = logging.getLogger("funcstack.functions_host")

_EXPRESSION = re.compile(r"%([^%]+)%")


class SettingError(ValueError):
    """An app setting that a binding needs is missing or malformed."""


def load_local_settings(path: Path) -> dict[str, str]:
    """The ``Values`` of a local.settings.json file, as strings."""
    data = json.loads(path.read_text(encoding="utf-8-sig"))
    values = data.get("Values", {}) if isinstance(data, dict) else {}
    if not isinstance(values, dict):
        raise SettingError(f"'Values' in {path} is not an object")
    return {str(k): _as_setting(v) for k, v in values.items()}


def _as_setting(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def apply_settings(
    file_values: Mapping[str, str], explicit: Mapping[str, str] | None = None
) -> None:
    """Put settings into ``os.environ`` before the app is imported.

    Like Core Tools, a value from local.settings.json does not replace an environment variable
    that is already set. Values passed explicitly (library API) always win.
    """
    for name, value in file_values.items():
        if name in os.environ:
            logger.info("skipping setting %s from local settings: already in the environment", name)
            continue
        os.environ[name] = value
    for name, value in (explicit or {}).items():
        os.environ[name] = value


def resolve(value: Any) -> Any:
    """Resolve ``%NAME%`` app-setting expressions in a binding property."""
    if not isinstance(value, str) or "%" not in value:
        return value

    def _sub(match: re.Match[str]) -> str:
        name = match.group(1)
        found = os.environ.get(name)
        if found is None:
            raise SettingError(f"app setting {name!r} used in a binding expression is not set")
        return found

    return _EXPRESSION.sub(_sub, value)


def is_truthy(value: str | None) -> bool:
    return value is not None and value.strip().lower() in {"1", "true", "yes"}


@dataclass(frozen=True)
class HostJson:
    """The parts of host.json the local host honours."""

    route_prefix: str = "api"
    retry: Mapping[str, Any] | None = None
    # The Flex Consumption default; host.json "functionTimeout" ("-1" = unbounded) overrides.
    function_timeout: float | None = 30 * 60.0
    # extensions.serviceBus (autoCompleteMessages, maxConcurrentSessions, sessionIdleTimeout...)
    service_bus: Mapping[str, Any] | None = None
    # extensions.queues (batchSize, newBatchThreshold, maxPollingInterval, visibilityTimeout,
    # maxDequeueCount, messageEncoding)
    queues: Mapping[str, Any] | None = None

    @classmethod
    def load(cls, app_dir: Path) -> HostJson:
        path = app_dir / "host.json"
        if not path.is_file():
            return cls()
        data = json.loads(path.read_text(encoding="utf-8-sig"))
        prefix = "api"
        http = data.get("extensions", {}).get("http", {})
        if isinstance(http, dict) and isinstance(http.get("routePrefix"), str):
            prefix = http["routePrefix"]
        retry = data.get("retry")
        service_bus = data.get("extensions", {}).get("serviceBus")
        queues = data.get("extensions", {}).get("queues")
        timeout: float | None = cls.function_timeout
        raw_timeout = data.get("functionTimeout")
        if isinstance(raw_timeout, str):
            from funcstack.functions_host._retry import parse_timespan

            timeout = None if raw_timeout.strip() == "-1" else parse_timespan(raw_timeout)
        return cls(
            route_prefix=prefix.strip("/"),
            retry=retry if isinstance(retry, dict) else None,
            function_timeout=timeout,
            service_bus=service_bus if isinstance(service_bus, dict) else None,
            queues=queues if isinstance(queues, dict) else None,
        )


def parse_connection_string(value: str) -> dict[str, str]:
    """``Key=Value;Key=Value;`` -> dict with lower-cased keys (values may contain '=')."""
    out: dict[str, str] = {}
    for part in value.split(";"):
        if not part.strip():
            continue
        key, sep, val = part.partition("=")
        if not sep:
            raise SettingError("connection string part without '='")
        out[key.strip().lower()] = val.strip()
    return out
