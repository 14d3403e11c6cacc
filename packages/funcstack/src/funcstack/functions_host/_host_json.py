"""host.json as the Azure Functions host reads it, and what funcstack does with each key.

Azure sources followed:

* ``HostJsonFileConfigurationSource`` (azure-functions-host, ``src/WebJobs.Script/Config``):
  the file is flattened into .NET configuration under ``AzureFunctionsJobHost``; a file that is
  not JSON is refused ("Unable to parse host configuration file"); an empty one is
  ``{"version": "2.0"}``; a missing or other ``version`` stops the host with its message (the
  one key read from the file itself, case-sensitively, before configuration).
* .NET configuration: keys are **case-insensitive** (``"RoutePrefix"`` is ``routePrefix``; of
  two spellings of one key the later wins, as in the flattening), and an app setting
  ``AzureFunctionsJobHost__<section>__<key>`` overrides the file's value ("Override host.json
  values" in the host.json reference).
* ``FunctionMetadataManager.ApplyAllowList``: ``functions`` is an allow list, names compared
  ignoring case.
* The host.json reference (learn.microsoft.com, azure-functions/functions-host-json) and the
  extensions' host.json sections (Service Bus 5.x, Storage queues 5.x, HTTP, Cosmos DB 4.x):
  the keys that exist.

Every key is one of three kinds (``RULES``): **honoured** (funcstack does what Azure does with
it); **no local counterpart** (it configures something a local run does not have: Application
Insights, the extension bundle's download, PowerShell's managed dependencies; accepted
silently, as ``func start`` accepts them); **not honoured** (it changes how the app runs in
Azure and funcstack does not do it): one warning line per key, naming it and saying what
funcstack does instead. A key that is none of these (a typo, say) is a warning too, where
Azure ignores it silently. docs/functions-host.md lists them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

logger = logging.getLogger("funcstack.functions_host")

__all__ = ["LOG_LEVELS", "RULES", "HostJsonError", "Rule", "read_host_json"]

#: .NET's LogLevel names (host.json ``logging.logLevel`` values) as Python's levels.
LOG_LEVELS = {
    "trace": 5,
    "debug": logging.DEBUG,
    "information": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "none": logging.CRITICAL + 10,
}

#: The app-setting prefix of host.json overrides (``AzureFunctionsJobHost__a__b``).
OVERRIDE_PREFIX = "AzureFunctionsJobHost__"


class HostJsonError(ValueError):
    """host.json cannot be used: the host does not start (Azure's message where it has one)."""


Kind = Literal["honoured", "no local counterpart", "not honoured"]


@dataclass(frozen=True)
class Rule:
    """What funcstack does with a host.json key (or, with ``section``, everything under it)."""

    kind: Kind
    #: what funcstack does instead, for a key it does not honour (or a note)
    why: str = ""
    #: the rule covers the whole section: one line for it, naming the keys given
    section: bool = False


_HONOURED = Rule("honoured")
_SB = "the local Service Bus trigger"

#: Every key funcstack knows, by its spelling in the host.json reference (dotted path).
RULES: dict[str, Rule] = {
    "version": _HONOURED,
    "functionTimeout": _HONOURED,
    "functions": _HONOURED,
    "retry.strategy": _HONOURED,
    "retry.maxRetryCount": _HONOURED,
    "retry.delayInterval": _HONOURED,
    "retry.minimumInterval": _HONOURED,
    "retry.maximumInterval": _HONOURED,
    "logging.logLevel": Rule(
        "honoured",
        "for the terminal's lines (funcstack run): "
        "Function.<name> and Function.<name>.User; the log "
        "file keeps every line",
        section=True,
    ),
    "extensions.http.routePrefix": _HONOURED,
    "extensions.serviceBus.autoCompleteMessages": _HONOURED,
    "extensions.serviceBus.maxConcurrentCalls": _HONOURED,
    "extensions.serviceBus.maxConcurrentSessions": _HONOURED,
    "extensions.serviceBus.sessionIdleTimeout": _HONOURED,
    "extensions.serviceBus.maxAutoLockRenewalDuration": _HONOURED,
    "extensions.queues.batchSize": _HONOURED,
    "extensions.queues.newBatchThreshold": _HONOURED,
    "extensions.queues.maxPollingInterval": _HONOURED,
    "extensions.queues.visibilityTimeout": _HONOURED,
    "extensions.queues.maxDequeueCount": _HONOURED,
    "extensions.queues.messageEncoding": _HONOURED,
    "extensions.blobs.poisonBlobThreshold": _HONOURED,
    # -- no local counterpart ----------------------------------------------------------------
    "extensionBundle": Rule(
        "no local counterpart", "funcstack serves its triggers itself", section=True
    ),
    "telemetryMode": Rule("no local counterpart", "the host's own telemetry"),
    "aggregator": Rule("no local counterpart", "Application Insights", section=True),
    "logging.applicationInsights": Rule(
        "no local counterpart", "Application Insights", section=True
    ),
    "logging.fileLoggingMode": Rule(
        "no local counterpart", "the host's files in Azure; funcstack writes its log always"
    ),
    "managedDependency": Rule("no local counterpart", "PowerShell apps", section=True),
    # -- not honoured ------------------------------------------------------------------------
    "concurrency": Rule(
        "not honoured",
        "no dynamic concurrency: each trigger runs as many "
        "invocations at once as its own settings allow",
        section=True,
    ),
    "logging.console": Rule(
        "not honoured",
        "funcstack run's terminal shows invocations and the app's logging unless --quiet",
        section=True,
    ),
    "customHandler": Rule(
        "not honoured", "funcstack hosts Python apps on the Python worker only", section=True
    ),
    "healthMonitor": Rule(
        "not honoured", "no host health monitor: the host is never recycled", section=True
    ),
    "singleton": Rule("not honoured", "no singleton locks", section=True),
    "extensions.blobs.maxDegreeOfParallelism": Rule(
        "not honoured", "the blob trigger runs its blobs as the queue trigger runs messages"
    ),
    "watchDirectories": Rule(
        "not honoured", "the host is not restarted when files change: restart it"
    ),
    "watchFiles": Rule("not honoured", "the host is not restarted when files change: restart it"),
    "extensions.http.maxOutstandingRequests": Rule("not honoured", "no HTTP throttling (no 429)"),
    "extensions.http.maxConcurrentRequests": Rule("not honoured", "no HTTP throttling (no 429)"),
    "extensions.http.dynamicThrottlesEnabled": Rule("not honoured", "no HTTP throttling (no 429)"),
    "extensions.http.hsts": Rule(
        "not honoured",
        "no Strict-Transport-Security header (the host listens on plain HTTP)",
        section=True,
    ),
    "extensions.http.customHeaders": Rule(
        "not honoured", "the headers are not added", section=True
    ),
    "extensions.cosmosDB": Rule(
        "not honoured",
        "the Cosmos DB trigger reads the change feed "
        "through the Python SDK, over HTTPS, with its "
        "defaults",
        section=True,
    ),
    "extensions.serviceBus.prefetchCount": Rule("not honoured", f"{_SB} prefetches nothing"),
    "extensions.serviceBus.maxMessageBatchSize": Rule(
        "not honoured", f"{_SB} does not serve cardinality many (batches)"
    ),
    "extensions.serviceBus.minMessageBatchSize": Rule(
        "not honoured", f"{_SB} does not serve cardinality many (batches)"
    ),
    "extensions.serviceBus.maxBatchWaitTime": Rule(
        "not honoured", f"{_SB} does not serve cardinality many (batches)"
    ),
    "extensions.serviceBus.clientRetryOptions": Rule(
        "not honoured", f"{_SB} uses the Python SDK's retry defaults", section=True
    ),
    "extensions.serviceBus.transportType": Rule("not honoured", f"{_SB} speaks AMQP over TCP"),
    "extensions.serviceBus.webProxy": Rule("not honoured", f"{_SB} connects directly"),
    "extensions.serviceBus.enableCrossEntityTransactions": Rule("not honoured", "no transactions"),
    "extensions.serviceBus.messageHandlerOptions": Rule(
        "not honoured",
        "an extension 4.x setting: 5.x (the bundle's) reads the keys of "
        "extensions.serviceBus itself",
        section=True,
    ),
    "extensions.serviceBus.sessionHandlerOptions": Rule(
        "not honoured",
        "an extension 4.x setting: 5.x (the bundle's) reads the keys of "
        "extensions.serviceBus itself",
        section=True,
    ),
    "extensions.serviceBus.batchOptions": Rule(
        "not honoured",
        "an extension 4.x setting: 5.x (the bundle's) reads the keys of "
        "extensions.serviceBus itself",
        section=True,
    ),
}

#: An extension section funcstack has no rule for: its bindings are not served.
_OTHER_EXTENSION = Rule(
    "not honoured",
    "funcstack has no such extension (an app with its bindings is refused at start)",
    section=True,
)


def _spellings() -> dict[tuple[str, ...], dict[str, str]]:
    """Per parent path (lower-cased), each known child's spelling by its lower-cased form."""
    found: dict[tuple[str, ...], dict[str, str]] = {}
    for dotted in RULES:
        parts = dotted.split(".")
        for depth, part in enumerate(parts):
            parent = tuple(p.lower() for p in parts[:depth])
            found.setdefault(parent, {})[part.lower()] = part
    return found


_SPELLING = _spellings()


@dataclass(frozen=True)
class Finding:
    """A key given (``path``, as funcstack spells it), the rule it falls under (None: a key
    funcstack does not know), where it came from, and for a section the keys given in it."""

    path: tuple[str, ...]
    rule: Rule | None
    origin: str
    keys: tuple[str, ...] = ()

    def line(self) -> str:
        name = ".".join(self.path)
        named = f"{name} ({', '.join(self.keys)})" if self.keys else name
        if self.rule is None:
            return (
                f"{self.origin}: {named} is not a host.json setting funcstack knows (a "
                "typo? Azure ignores it too)"
            )
        return f"{self.origin}: {named} is not honoured by funcstack: {self.rule.why}"


def _leaves(value: Any, prefix: tuple[str, ...] = ()) -> Iterator[str]:
    if isinstance(value, dict) and value:
        for key, inner in value.items():
            yield from _leaves(inner, (*prefix, str(key)))
    elif prefix:
        yield ".".join(prefix)


def _known_below(path: tuple[str, ...]) -> bool:
    return tuple(p.lower() for p in path) in _SPELLING


def _normalise(
    node: Mapping[str, Any], origin: str, path: tuple[str, ...], findings: list[Finding]
) -> dict[str, Any]:
    """``node`` with every known key spelled as funcstack reads it (two spellings of one key:
    the later wins, objects merged), and a finding per key that is not honoured or unknown."""
    out: dict[str, Any] = {}
    spelling = _SPELLING.get(tuple(p.lower() for p in path), {})
    for raw_key, value in node.items():
        key = spelling.get(str(raw_key).lower(), str(raw_key))
        here = (*path, key)
        rule = RULES.get(".".join(here))
        if rule is None and path == ("extensions",) and key not in spelling.values():
            rule = _OTHER_EXTENSION
        if rule is not None and rule.section:
            if rule.kind == "not honoured":
                findings.append(Finding(here, rule, origin, tuple(_leaves(value))))
            out[key] = _merge(out.get(key), value)
        elif isinstance(value, dict) and _known_below(here):
            out[key] = _merge(out.get(key), _normalise(value, origin, here, findings))
        else:
            if rule is None:
                findings.append(Finding(here, None, origin, tuple(_leaves(value))))
            elif rule.kind == "not honoured":
                findings.append(Finding(here, rule, origin))
            out[key] = value
    return out


def _merge(old: Any, new: Any) -> Any:
    if isinstance(old, dict) and isinstance(new, dict):
        merged = dict(old)
        for key, value in new.items():
            merged[key] = _merge(merged.get(key), value)
        return merged
    return new


def _overrides(environ: Mapping[str, str]) -> list[tuple[str, dict[str, Any]]]:
    """Each ``AzureFunctionsJobHost__a__b`` app setting as a host.json tree, with its name."""
    found = []
    for name, value in sorted(environ.items()):
        if not name.lower().startswith(OVERRIDE_PREFIX.lower()):
            continue
        parts = [p for p in name[len(OVERRIDE_PREFIX) :].split("__") if p]
        if not parts:
            continue
        tree: Any = value
        for part in reversed(parts):
            tree = {part: tree}
        found.append((name, tree))
    return found


def _check_version(data: Mapping[str, Any], path: Path) -> None:
    """HostJsonFileConfigurationProvider.InitializeHostConfig's check, with its messages."""
    version = data.get("version")
    if version is None or version == "":
        raise HostJsonError(
            f"The host.json file is missing the required 'version' property "
            f"({path}). See https://aka.ms/functions-hostjson for steps to "
            "migrate the configuration file."
        )
    if str(version) != "2.0":
        extra = (
            "This does not correspond to the function runtime version, only to the schema "
            "version of the host.json file. "
            if str(version).startswith("3")
            else ""
        )
        raise HostJsonError(
            f"'{version}' is an invalid value for host.json 'version' property "
            f"({path}). We recommend you set the 'version' property to '2.0'. "
            f"{extra}See https://aka.ms/functions-hostjson for more information "
            "on this configuration file."
        )


def read_host_json(app_dir: Path, environ: Mapping[str, str]) -> dict[str, Any]:
    """The app's host.json with the ``AzureFunctionsJobHost__*`` app settings of ``environ``
    over it, every known key spelled as the reference spells it (whatever its case in the
    file); one warning line per key funcstack does not honour or does not know. No file: the
    defaults (``{"version": "2.0"}``), as the host writes them."""
    path = app_dir / "host.json"
    data: dict[str, Any] = {"version": "2.0"}
    if path.is_file():
        try:
            parsed = json.loads(path.read_text(encoding="utf-8-sig"))
        except ValueError as exc:
            raise HostJsonError(
                f"Unable to parse host configuration file '{path}': {exc}"
            ) from None
        if not isinstance(parsed, dict):
            raise HostJsonError(
                f"Unable to parse host configuration file '{path}': not a JSON object"
            )
        if parsed:
            _check_version(parsed, path)
            data = parsed
    findings: list[Finding] = []
    tree = _normalise(data, "host.json", (), findings)
    for name, override in _overrides(environ):
        tree = _merge(tree, _normalise(override, f"app setting {name}", (), findings))
    for finding in findings:
        logger.warning("%s", finding.line())
    return tree
