"""Settings the way the Functions host sees them: local.settings.json, host.json, %NAME%.

As Core Tools' ``func start`` reads ``local.settings.json`` (an environment variable already set
wins over the file) and the host reads host.json (``_host_json.py``).
"""

from __future__ import annotations

import hashlib
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


def settings_in_force(
    file_values: Mapping[str, str],
    explicit: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The app settings the host will run with, as ``apply_settings`` makes them: the file's
    values, each one replaced by the environment's when that is set and not empty (Core Tools'
    ``StartHostAction.UpdateEnvironmentVariables``), and the explicit ones over both."""
    env = os.environ if environ is None else environ
    found = {name: env.get(name) or value for name, value in file_values.items()}
    return {**found, **(explicit or {})}


def apply_settings(
    file_values: Mapping[str, str], explicit: Mapping[str, str] | None = None
) -> None:
    """Put settings into ``os.environ`` before the app is imported.

    As Core Tools does (``StartHostAction.UpdateEnvironmentVariables``), a value from
    local.settings.json does not replace an environment variable that is set and not empty:
    the environment wins. Values passed explicitly (the library API, ``--given``) win over both.
    One log line says where the settings came from, by name, never by value (connection
    strings and keys are secrets): the names whose value is the environment's rather than the
    file's (Core Tools writes a line per name: "Skipping 'X' from local settings as it's
    already defined in current environment variables."), and the names given explicitly."""
    explicit = dict(explicit or {})
    from_environment = sorted(
        name
        for name, value in file_values.items()
        if name not in explicit and os.environ.get(name) and os.environ[name] != value
    )
    for name, value in file_values.items():
        if not os.environ.get(name):
            os.environ[name] = value
    for name, value in explicit.items():
        os.environ[name] = value
    parts = [f"{len(file_values)} from local.settings.json"]
    if from_environment:
        parts.append(
            f"the environment's value kept over the file's, as with func start: "
            f"{', '.join(from_environment)}"
        )
    if explicit:
        parts.append(f"given to the host: {', '.join(sorted(explicit))}")
    logger.info("app settings: %s", "; ".join(parts))


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


#: The app setting that names the host id (the host's ``HostIdProvider`` reads
#: ``AzureFunctionsWebHost:hostid``).
HOST_ID_SETTING = "AzureFunctionsWebHost__hostid"
_HOST_ID_CHARS = re.compile(r"[^a-z0-9-]+")


def host_id(app_dir: Path, group: str | None = None) -> str:
    """The host id: what keys the host's own state in the storage account (the blob trigger's
    receipts and queue). ``AzureFunctionsWebHost__hostid`` when set; else, as Azure derives it
    from the site name (lower case, letters, digits and dashes, at most 32 characters), from
    the app folder's name. A host serving one function group (``function:<name>``) gets an id
    of its own (a hash of the group added), so that the group's blob trigger queue carries its
    functions' messages only."""
    given = os.environ.get(HOST_ID_SETTING, "").strip().lower()
    base = _HOST_ID_CHARS.sub("-", given or app_dir.resolve().name.lower()).strip("-")
    base = (base or "funcstack")[:32].rstrip("-")
    if group is None or given:
        return base
    digest = hashlib.sha1(group.encode("utf-8"), usedforsecurity=False).hexdigest()[:8]
    return f"{base[:23].rstrip('-')}-{digest}"


def is_truthy(value: str | None) -> bool:
    return value is not None and value.strip().lower() in {"1", "true", "yes"}


@dataclass(frozen=True)
class HostJson:
    """The parts of host.json the local host honours (``_host_json.py`` reads the file as the
    host does: keys in any case, ``AzureFunctionsJobHost__*`` app settings over it, a warning
    per key funcstack does not honour)."""

    route_prefix: str = "api"
    retry: Mapping[str, Any] | None = None
    # The Flex Consumption default; host.json "functionTimeout" ("-1" = unbounded) overrides.
    function_timeout: float | None = 30 * 60.0
    # extensions.serviceBus (autoCompleteMessages, maxConcurrentSessions, sessionIdleTimeout...)
    service_bus: Mapping[str, Any] | None = None
    # extensions.queues (batchSize, newBatchThreshold, maxPollingInterval, visibilityTimeout,
    # maxDequeueCount, messageEncoding)
    queues: Mapping[str, Any] | None = None
    # extensions.blobs (poisonBlobThreshold)
    blobs: Mapping[str, Any] | None = None
    # "functions": the allow list (None: every function)
    functions: tuple[str, ...] | None = None
    # logging.logLevel: category -> level name
    log_levels: Mapping[str, str] | None = None

    @classmethod
    def load(cls, app_dir: Path, environ: Mapping[str, str] | None = None) -> HostJson:
        """The app's host.json (none: the defaults), with the ``AzureFunctionsJobHost__*``
        settings of ``environ`` (default: ``os.environ``) over it."""
        from funcstack.functions_host._host_json import (
            LOG_LEVELS,
            HostJsonError,
            read_host_json,
        )
        from funcstack.functions_host._retry import parse_timespan

        data = read_host_json(app_dir, os.environ if environ is None else environ)

        def section(*path: str) -> dict[str, Any] | None:
            node: Any = data
            for part in path:
                node = node.get(part) if isinstance(node, dict) else None
            if node is not None and not isinstance(node, dict):
                raise HostJsonError(f"host.json {'.'.join(path)}: an object, not {node!r}")
            return node

        prefix = (section("extensions", "http") or {}).get("routePrefix", "api")
        if not isinstance(prefix, str):
            raise HostJsonError(f"host.json extensions.http.routePrefix: a string, not {prefix!r}")
        timeout: float | None = cls.function_timeout
        raw_timeout = data.get("functionTimeout")
        if raw_timeout is not None:
            if not isinstance(raw_timeout, str):
                raise HostJsonError(
                    "host.json functionTimeout: a TimeSpan string "
                    f'("00:05:00", or "-1"), not {raw_timeout!r}'
                )
            try:
                timeout = None if raw_timeout.strip() == "-1" else parse_timespan(raw_timeout)
            except ValueError as exc:
                raise HostJsonError(f"host.json functionTimeout: {exc}") from None
        functions = data.get("functions")
        if functions is not None and not (
            isinstance(functions, list) and all(isinstance(f, str) for f in functions)
        ):
            raise HostJsonError(f"host.json functions: a list of function names, not {functions!r}")
        levels = section("logging", "logLevel")
        for category, level in (levels or {}).items():
            if str(level).strip().lower() not in LOG_LEVELS:
                raise HostJsonError(
                    f"host.json logging.logLevel.{category}: {level!r} is not a "
                    "log level (Trace, Debug, Information, Warning, Error, "
                    "Critical, None)"
                )
        return cls(
            route_prefix=prefix.strip("/"),
            retry=section("retry"),
            function_timeout=timeout,
            service_bus=section("extensions", "serviceBus"),
            queues=section("extensions", "queues"),
            blobs=section("extensions", "blobs"),
            functions=tuple(functions) if functions is not None else None,
            log_levels={str(k): str(v) for k, v in levels.items()} if levels else None,
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
