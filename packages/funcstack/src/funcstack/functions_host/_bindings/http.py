"""The HTTP output binding: which of the worker's values answers the HTTP caller, as the host
picks it (azure-functions-host: ``HttpBinding`` is the binding of type ``http``, output only;
``WorkerFunctionInvoker.BindOutputsAsync`` binds each output to its value by name, ``$return``
to the return value; ``FunctionInvocationMiddleware.GetResultAsync`` answers with what the HTTP
binding set, else ``OkResult``):

* the HTTP output named ``$return`` (``@app.route`` without ``binding_arg_name``): the return
  value; named (``binding_arg_name="resp"``, ``resp.set(func.HttpResponse(...))``): the
  output of that name;
* a function that sets none (or has no HTTP output: a generic trigger with a blob ``$return``):
  ``200`` with no body and no ``Content-Type``;
* a ``$return`` bound to another output (a queue, a blob) goes there, never to the caller.

One HTTP output per function, with an HTTP trigger only (``Http binding can only be used for
output``): anything else is refused at indexing (``plan``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["RETURN", "http_output_name", "response_value"]

RETURN = "$return"


def http_output_name(bindings: Iterable[dict[str, Any]]) -> str | None:
    """The name of the function's HTTP output binding (``$return`` or its own), or None."""
    for binding in bindings:
        kind = str(binding.get("type", "")).casefold()
        direction = str(binding.get("direction", "")).casefold()
        if kind == "http" and direction == "out":
            return str(binding.get("name", ""))
    return None


def response_value(name: str | None, answer: Any) -> Any | None:
    """The ``TypedData`` that answers the caller: the HTTP output's value, or None (the host's
    ``OkResult``)."""
    if name is None:
        return None
    if name == RETURN:
        value = answer.return_value if answer.HasField("return_value") else None
    else:
        value = next((b.data for b in answer.output_data if b.name == name), None)
    if value is None or value.WhichOneof("data") is None:
        return None
    return value
