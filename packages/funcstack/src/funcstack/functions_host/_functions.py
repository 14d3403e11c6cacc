"""What the host knows of each function: the metadata the worker returned from indexing."""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from typing import Any

from funcstack.functions_host._config import HostJson, is_truthy
from funcstack.functions_host._cosmos_trigger.mode import change_feed_mode_refusal
from funcstack.functions_host._retry import RetryPolicy

logger = logging.getLogger("funcstack.functions_host")


class IndexingRefusedError(ValueError):
    """A function declares what the host cannot honour: the host does not start (one line
    naming the function, the setting and why), rather than run it without it."""


@dataclass(frozen=True)
class FunctionSpec:
    """One indexed function: its id in the worker, its trigger binding and retry policy."""

    name: str
    function_id: str
    trigger: dict[str, Any]
    bindings: tuple[dict[str, Any], ...]
    retry: RetryPolicy | None

    @property
    def trigger_type(self) -> str:
        return str(self.trigger.get("type", ""))

    @property
    def trigger_arg(self) -> str:
        return str(self.trigger.get("name", ""))


def specs_from_metadata(metadata: list[Any], host: HostJson) -> list[FunctionSpec]:
    """``RpcFunctionMetadata`` -> specs; functions disabled by app setting, or left out of
    host.json's ``functions`` allow list (names compared ignoring case, as the host's
    ``FunctionMetadataManager.ApplyAllowList`` does), are left out. A binding setting the
    host cannot honour (a Cosmos DB trigger's all-versions-and-deletes change feed) raises
    ``IndexingRefusedError``."""
    specs: list[FunctionSpec] = []
    allowed = None if host.functions is None else {f.casefold() for f in host.functions}
    if host.functions is not None:
        logger.info(
            "A function allow list has been specified, excluding all but the following "
            "functions: [%s]",
            ", ".join(host.functions),
        )
    for item in metadata:
        name = str(item.name)
        if allowed is not None and name.casefold() not in allowed:
            continue
        if is_truthy(os.environ.get(f"AzureWebJobs.{name}.Disabled")):
            logger.info("function %s is disabled by app setting", name)
            continue
        bindings = tuple(json.loads(raw) for raw in item.raw_bindings)
        trigger = next((b for b in bindings if str(b.get("type", "")).endswith("Trigger")), None)
        if trigger is None:
            logger.warning("function %s has no trigger; skipped", name)
            continue
        if trigger.get("type") == "cosmosDBTrigger":
            refusal = change_feed_mode_refusal(name, trigger)
            if refusal is not None:
                raise IndexingRefusedError(refusal)
        retry = (
            RetryPolicy.from_rpc(item.retry_options)
            if item.HasField("retry_options")
            else (RetryPolicy.from_mapping(host.retry) if host.retry else None)
        )
        specs.append(FunctionSpec(name, str(item.function_id), trigger, bindings, retry))
    return specs
