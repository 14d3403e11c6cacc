"""The app's bindings, planned when it is indexed and run around each invocation.

``plan_bindings`` reads every function's bindings (``base.BindingDecl``) and makes the served
ones (the table ``INPUTS`` / ``OUTPUTS``, one file per binding type); everything funcstack
cannot honour -- a binding type it has no counterpart for, a direction the extension has no
binding for, a setting it cannot follow, a trigger it does not serve -- is collected, and the
app does not start: ``AppRefusedError`` names each function, binding and reason, one per line
of the error. The host in Azure marks such a function "in error" and starts the others;
funcstack refuses the whole app instead, so that a test or a CI run cannot pass against an app
part of which never runs (docs/functions-host.md, "Bindings").

Around each invocation (``HostBindings``, installed on the language worker), as the host's
``WorkerFunctionInvoker`` does:

* before: the binding data of the trigger (``expressions.binding_data``), then every input
  binding read (concurrently, ``BindInputsAsync``) and handed to the worker as the
  ``input_data`` after the trigger's; a read that fails fails the invocation;
* after a successful invocation: each output written with its value (``output_data`` by name,
  the return value for ``$return``; null values skipped; all concurrently, ``BindOutputsAsync``),
  the HTTP output left to the HTTP host (``http``); a write that fails fails the invocation
  (its trigger retries it as it retries any failure), and the HTTP caller gets a 500.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from funcstack._lazy import lazy_call
from funcstack.functions_host._bindings.base import (
    BindingDecl,
    BindingEnv,
    BindingError,
    BindingRefusedError,
    InputBinding,
    OutputBinding,
)
from funcstack.functions_host._bindings.clients import Clients
from funcstack.functions_host._bindings.expressions import BindingData, binding_data
from funcstack.functions_host._bindings.http import RETURN
from funcstack.functions_host._bindings.values import BindingValueError, from_typed_data

if TYPE_CHECKING:
    from funcstack.functions_host._config import HostJson
    from funcstack.functions_host._functions import FunctionSpec

logger = logging.getLogger("funcstack.functions_host.bindings")

__all__ = ["AppRefusedError", "FunctionBindings", "HostBindings", "plan_bindings"]


class AppRefusedError(ValueError):
    """Bindings funcstack cannot honour: the app does not start (each refusal on a line)."""

    def __init__(self, refusals: list[str]) -> None:
        super().__init__(
            "the app's bindings cannot all be served, so it is not started: " + "; ".join(refusals)
        )
        self.refusals = refusals


_BINDINGS = "funcstack.functions_host._bindings"

#: The served bindings by type (lower-cased) and direction; each binding's module (and its
#: SDK) is imported when an app declares one.
INPUTS: dict[str, Callable[[BindingDecl, BindingEnv], InputBinding]] = {
    "cosmosdb": lazy_call(f"{_BINDINGS}.cosmos", "CosmosInput"),
    "blob": lazy_call(f"{_BINDINGS}.blob", "BlobInput"),
}
OUTPUTS: dict[str, Callable[[BindingDecl, BindingEnv], OutputBinding]] = {
    "cosmosdb": lazy_call(f"{_BINDINGS}.cosmos", "CosmosOutput"),
    "blob": lazy_call(f"{_BINDINGS}.blob", "BlobOutput"),
    "queue": lazy_call(f"{_BINDINGS}.storage_queue", "QueueOutput"),
    "servicebus": lazy_call(f"{_BINDINGS}.servicebus", "ServiceBusOutput"),
}

#: Why a binding type funcstack knows of is not served.
_NOT_SERVED = {
    "table": "Azure Tables bindings are not served (funcstack wires no Tables endpoint)",
    "eventhub": "funcstack has no Event Hubs endpoint",
    "eventgrid": "funcstack has no Event Grid",
    "sql": "funcstack has no Azure SQL database",
    "mysql": "funcstack has no MySQL database",
    "signalr": "funcstack has no SignalR Service",
    "signalrconnectioninfo": "funcstack has no SignalR Service",
    "sendgrid": "funcstack has no SendGrid",
    "twiliosms": "funcstack has no Twilio",
    "notificationhub": "funcstack has no Notification Hubs",
    "kafka": "funcstack has no Kafka",
    "rabbitmq": "funcstack has no RabbitMQ",
    "durableclient": "Durable Functions is not served",
    "orchestrationclient": "Durable Functions is not served",
}
_NO_INPUT = {
    "queue": "the Storage Queues extension has no input binding a Python function can take "
    "(it binds a QueueClient)",
    "servicebus": "the Service Bus extension has no input binding (only a trigger and an output)",
    "http": "Http binding can only be used for output",
}


@dataclass
class FunctionBindings:
    """One function's served bindings (its trigger aside)."""

    name: str
    trigger_type: str
    trigger_name: str
    inputs: list[InputBinding] = field(default_factory=list)
    outputs: dict[str, OutputBinding] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not self.inputs and not self.outputs


def _trigger_refusal(
    decl: BindingDecl, served_triggers: Iterable[str], others: list[BindingDecl]
) -> str | None:
    kind = decl.type
    if kind not in served_triggers:
        return f"the trigger type {kind} is not served by funcstack"
    if kind == "blobTrigger" and decl.text("source").casefold() == "eventgrid":
        return (
            "source EventGrid: funcstack has no Event Grid to deliver blob events; leave "
            "source out (LogsAndContainerScan: the container is polled)"
        )
    if kind == "serviceBusTrigger" and decl.text("cardinality", "one").casefold() == "many":
        return "cardinality many (batches of messages) is not served; use cardinality one"
    if kind != "httpTrigger" and any(o.type.casefold() == "http" for o in others):
        return "an http output needs an httpTrigger"
    return None


def _plan_one(
    spec: FunctionSpec, env: BindingEnv, served_triggers: Iterable[str], refusals: list[str]
) -> FunctionBindings:
    decls = [BindingDecl(raw) for raw in spec.bindings]
    planned = FunctionBindings(spec.name, spec.trigger_type, spec.trigger_arg)

    def refuse(decl: BindingDecl, reason: str) -> None:
        refusals.append(
            f"function '{spec.name}', binding '{decl.name}' ({decl.type}, "
            f"{decl.direction or 'no direction'}): {reason}"
        )

    http_outputs = [d for d in decls if d.type.casefold() == "http" and d.direction == "out"]
    if len(http_outputs) > 1:
        refuse(http_outputs[1], "a function has one HTTP output")
    for decl in decls:
        kind = decl.type.casefold()
        if decl.deferred:
            refuse(
                decl,
                "SDK-type bindings (azurefunctions-extensions-bindings-*: the worker takes "
                "a client, not the value) are not served",
            )
            continue
        if decl.is_trigger:
            if decl.name == spec.trigger_arg:
                reason = _trigger_refusal(decl, served_triggers, decls)
                if reason is not None:
                    refuse(decl, reason)
            else:
                refuse(decl, "a function has one trigger")
            continue
        try:
            if decl.direction == "in":
                if kind in INPUTS:
                    planned.inputs.append(INPUTS[kind](decl, env))
                else:
                    refuse(decl, _NO_INPUT.get(kind) or _not_served(kind, decl.type))
            elif decl.direction == "out":
                if kind == "http":
                    continue  # the HTTP host answers with it (http.response_value)
                if kind in OUTPUTS:
                    planned.outputs[decl.name] = OUTPUTS[kind](decl, env)
                else:
                    refuse(decl, _not_served(kind, decl.type))
            else:
                refuse(decl, f"direction {decl.direction or '(none)'!r}: in or out is served")
        except BindingRefusedError as exc:
            refuse(decl, str(exc))
    return planned


def _not_served(kind: str, shown: str) -> str:
    for prefix, reason in _NOT_SERVED.items():
        if kind.startswith(prefix) or (prefix == "durableclient" and "durable" in kind):
            return reason
    if kind.startswith("dapr"):
        return "funcstack has no Dapr sidecar"
    return f"funcstack serves no '{shown}' binding"


def plan_bindings(
    specs: Iterable[FunctionSpec], host_json: HostJson, served_triggers: Iterable[str]
) -> HostBindings:
    """The app's bindings, or AppRefusedError with every binding funcstack cannot honour."""
    clients = Clients()
    refusals: list[str] = []
    triggers = set(served_triggers)
    planned = {
        spec.function_id: _plan_one(
            spec, BindingEnv(clients, host_json, spec.name), triggers, refusals
        )
        for spec in specs
    }
    if refusals:
        raise AppRefusedError(refusals)
    return HostBindings({k: v for k, v in planned.items() if not v.empty}, clients)


class HostBindings:
    """The served bindings of the app's functions, run around each invocation (the language
    worker's ``bindings`` hook)."""

    def __init__(self, functions: Mapping[str, FunctionBindings], clients: Clients) -> None:
        self._functions = dict(functions)
        self._clients = clients

    async def before(
        self, function_id: str, input_data: list[Any], trigger_metadata: Mapping[str, Any]
    ) -> tuple[list[Any], BindingData | None]:
        """The input bindings' ``ParameterBinding``s, and the binding data for ``after``;
        BindingError when an input cannot be read."""
        planned = self._functions.get(function_id)
        if planned is None:
            return [], None
        trigger = next((b.data for b in input_data if b.name == planned.trigger_name), None)
        data = binding_data(planned.name, planned.trigger_type, trigger, trigger_metadata)
        if not planned.inputs:
            return [], data
        from funcstack.functions_host._rpc import protos

        pb = protos()
        values = await asyncio.gather(*(binding.read(data) for binding in planned.inputs))
        return [
            pb.ParameterBinding(name=binding.name, data=value)
            for binding, value in zip(planned.inputs, values, strict=True)
        ], data

    async def after(self, function_id: str, answer: Any, data: BindingData | None) -> str | None:
        """Write the outputs of a successful invocation; why one failed, or None."""
        planned = self._functions.get(function_id)
        if planned is None or not planned.outputs or data is None:
            return None
        given = {binding.name: binding.data for binding in answer.output_data}
        if answer.HasField("return_value"):
            given[RETURN] = answer.return_value
        writes = []
        for name, binding in planned.outputs.items():
            typed = given.get(name)
            if typed is None:
                continue
            try:
                value = from_typed_data(typed)
            except BindingValueError as exc:
                return f"output '{name}': {exc}"
            if value is not None:
                writes.append(binding.write(value, data))
        results = await asyncio.gather(*writes, return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        for error in errors:
            if not isinstance(error, BindingError):
                logger.error("function %s: an output failed", planned.name, exc_info=error)
        if not errors:
            return None
        first = errors[0]
        return str(first) if isinstance(first, BindingError) else f"{type(first).__name__}: {first}"

    async def open(self) -> None:
        """Make the bindings' clients now (``Clients.open``): the host does before it is
        ready."""
        await self._clients.open()

    async def close(self) -> None:
        await self._clients.close()
