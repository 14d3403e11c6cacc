"""Binding expressions: ``{name}`` in a binding's properties, resolved per invocation from the
trigger's binding data, as the WebJobs SDK resolves them (``BindingTemplate``,
``BindingTemplateParser``, ``BindingParameterResolver`` in azure-webjobs-sdk; "Azure Functions
binding expressions and patterns" on learn.microsoft.com).

The binding data of an invocation (``binding_data``):

* HTTP trigger (``HttpTriggerAttributeBindingProvider.GetRequestBindingData``, WebJobs
  extensions): the top-level properties of a JSON body (not arrays; objects as objects, other
  values as their text), then the query string's values (``code`` left out), then the route's
  values (each overriding what came before), and ``Query`` and ``Headers`` as objects
  (``{Query.id}``);
* any other trigger: its trigger metadata (what the trigger sends the worker: ``QueueTrigger``,
  ``DequeueCount``, ``MessageId``, ``BlobTrigger``, a blob path's ``{name}``...), then the
  top-level properties of the trigger value when it is a JSON object
  (``WorkerFunctionInvoker.TransformInput`` -> ``Utility.ApplyBindingData``).

Names are looked up ignoring case; ``{a.b}`` reads property ``b`` of ``a``. The built-ins:
``{rand-guid}`` (a new GUID, ``{rand-guid:N}`` in that .NET format), ``{datetime}`` (UTC now,
``yyyy-MM-ddTHH-mm-ssZ``; ``{datetime:<format>}`` with the .NET custom format's ``yyyy MM dd
HH mm ss fff``), ``{sys.randguid}``, ``{sys.utcnow}``, ``{sys.methodname}``. A name with no
value fails the invocation: ``No value for named parameter 'x'.``, as the SDK throws.
``{{`` and ``}}`` are a literal brace. ``%SETTING%`` is resolved once, when the app is
indexed (``_config.resolve``).

A Cosmos DB ``sqlQuery`` binds differently (``CosmosDBSqlResolutionPolicy``): each ``{name}``
becomes the SQL parameter ``@name`` with the binding data's value, never text in the query.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from funcstack.functions_host._bindings.values import dotnet_double

__all__ = ["BindingData", "ExpressionError", "Template", "binding_data"]


class ExpressionError(ValueError):
    """A binding expression without a value (the invocation fails), or one that cannot be
    parsed (the app is refused)."""


class BindingData:
    """One invocation's binding data: names looked up ignoring case."""

    def __init__(self, values: Mapping[str, Any], function_name: str) -> None:
        self._values = {str(k).casefold(): v for k, v in values.items() if v is not None}
        self.function_name = function_name

    def lookup(self, path: str) -> Any:
        """The value of ``path`` (``a`` or ``a.b.c``); ExpressionError when it has none."""
        builtin = self._builtin(path)
        if builtin is not None:
            return builtin
        head, *rest = path.split(".")
        node: Any = self._values.get(head.strip().casefold())
        for part in rest:
            if node is None:
                break
            if isinstance(node, Mapping):
                folded = {str(k).casefold(): v for k, v in node.items()}
                node = folded.get(part.strip().casefold())
            else:
                node = None
        if node is None:
            raise ExpressionError(f"No value for named parameter '{path}'.")
        return node

    def _builtin(self, path: str) -> Any:
        name = path.strip().casefold()
        if name == "sys.randguid":
            return str(uuid.uuid4())
        if name == "sys.utcnow":
            return dt.datetime.now(dt.UTC)
        if name == "sys.methodname":
            return self.function_name
        return None


def _text(value: Any) -> str:
    """A value in a resolved template, as .NET writes it (``ToString()``)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, float):
        return dotnet_double(value, json_literal=False)
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f0Z")
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


_DOTNET_DATE = re.compile(r"yyyy|MM|dd|HH|mm|ss|fff|.", re.DOTALL)


def _dotnet_date(moment: dt.datetime, fmt: str) -> str:
    """The .NET custom date format's common specifiers; other characters as they are."""
    parts = {
        "yyyy": f"{moment.year:04d}",
        "MM": f"{moment.month:02d}",
        "dd": f"{moment.day:02d}",
        "HH": f"{moment.hour:02d}",
        "mm": f"{moment.minute:02d}",
        "ss": f"{moment.second:02d}",
        "fff": f"{moment.microsecond // 1000:03d}",
    }
    return "".join(parts.get(token, token) for token in _DOTNET_DATE.findall(fmt))


def _guid(fmt: str) -> str:
    value = uuid.uuid4()
    match fmt.upper():
        case "N":
            return value.hex
        case "B":
            return f"{{{value}}}"
        case "P":
            return f"({value})"
        case _:
            return str(value)


@dataclass(frozen=True)
class _Parameter:
    name: str
    format: str | None


@dataclass(frozen=True)
class Template:
    """A binding property with ``{...}`` expressions (``BindingTemplate``)."""

    source: str
    parts: tuple[str | _Parameter, ...]

    @classmethod
    def parse(cls, source: str) -> Template:
        parts: list[str | _Parameter] = []
        literal: list[str] = []
        i = 0
        while i < len(source):
            ch = source[i]
            if ch in "{}" and source[i : i + 2] in {"{{", "}}"}:
                literal.append(ch)
                i += 2
                continue
            if ch == "}":
                raise ExpressionError(f"invalid template {source!r}: '}}' without '{{'")
            if ch == "{":
                end = source.find("}", i)
                if end < 0:
                    raise ExpressionError(f"invalid template {source!r}: '{{' without '}}'")
                expression = source[i + 1 : end].strip()
                if not expression:
                    raise ExpressionError(f"invalid template {source!r}: an empty '{{}}'")
                if literal:
                    parts.append("".join(literal))
                    literal = []
                name, sep, fmt = expression.partition(":")
                parts.append(_Parameter(name.strip(), fmt if sep else None))
                i = end + 1
                continue
            literal.append(ch)
            i += 1
        if literal:
            parts.append("".join(literal))
        return cls(source, tuple(parts))

    @property
    def parameter_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.parts if isinstance(p, _Parameter))

    @property
    def is_literal(self) -> bool:
        return not self.parameter_names

    def bind(self, data: BindingData) -> str:
        return "".join(
            part if isinstance(part, str) else _resolve(part, data) for part in self.parts
        )

    def bind_sql(self, data: BindingData) -> tuple[str, list[dict[str, Any]]]:
        """``CosmosDBSqlResolutionPolicy``: ``{name}`` -> ``@name``, the value a parameter."""
        query: list[str] = []
        parameters: dict[str, Any] = {}
        for part in self.parts:
            if isinstance(part, str):
                query.append(part)
                continue
            token = f"@{part.name}"
            if token not in parameters:
                parameters[token] = _sql_value(data.lookup(part.name))
            query.append(token)
        return "".join(query), [{"name": k, "value": v} for k, v in parameters.items()]


def _resolve(parameter: _Parameter, data: BindingData) -> str:
    name = parameter.name.casefold()
    if name == "rand-guid":
        return _guid(parameter.format or "D")
    if name == "datetime":
        return _dotnet_date(dt.datetime.now(dt.UTC), parameter.format or "yyyy-MM-ddTHH-mm-ssZ")
    return _text(data.lookup(parameter.name))


def _sql_value(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return _text(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


# -- the binding data of an invocation -------------------------------------------------------


def _json_properties(text: str) -> dict[str, Any]:
    """``Utility.ApplyBindingData``: a JSON object's top-level properties (not arrays; objects
    as objects, other values as their text); nothing for anything else."""
    trimmed = text.strip()
    if not (trimmed.startswith("{") and trimmed.endswith("}")):
        return {}
    try:
        parsed = json.loads(trimmed)
    except ValueError:
        return {}
    if not isinstance(parsed, dict):
        return {}
    return {
        str(key): value if isinstance(value, dict) else _text(value)
        for key, value in parsed.items()
        if value is not None and not isinstance(value, list)
    }


def _metadata_value(data: Any) -> Any:
    kind = data.WhichOneof("data")
    if kind == "json":
        try:
            return json.loads(data.json)
        except ValueError:
            return data.json
    if kind in {"string", "int", "double"}:
        return getattr(data, kind)
    if kind in {"bytes", "stream"}:
        return bytes(getattr(data, kind))
    return None


def binding_data(
    function_name: str,
    trigger_type: str,
    trigger_value: Any | None,
    trigger_metadata: Mapping[str, Any] | None,
) -> BindingData:
    """The binding data of one invocation from what the trigger sends the worker: its
    ``TypedData`` and its trigger metadata."""
    values: dict[str, Any] = {}
    if trigger_type == "httpTrigger" and trigger_value is not None:
        http = trigger_value.http
        if http.HasField("body"):
            body = _metadata_value(http.body)
            if isinstance(body, bytes):
                body = body.decode("utf-8", "replace")
            if isinstance(body, str):
                values.update(_json_properties(body))
        query = {k: v for k, v in http.query.items() if k.casefold() != "code"}
        values.update(query)
        values.update(dict(http.params))
        values.setdefault("Query", dict(http.query))
        values.setdefault("Headers", dict(http.headers))
    else:
        for key, data in (trigger_metadata or {}).items():
            values[str(key)] = _metadata_value(data)
        if trigger_value is not None:
            text = _metadata_value(trigger_value)
            if isinstance(text, str):
                for key, value in _json_properties(text).items():
                    values[key] = value
            elif trigger_value.WhichOneof("data") == "json":
                values.update(_json_properties(trigger_value.json))
    return BindingData(values, function_name)
