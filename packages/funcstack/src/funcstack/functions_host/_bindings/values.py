"""A binding's value as the Functions host holds it, and the conversions its bindings apply.

The worker's output (``ParameterBinding.data``, ``return_value``) reaches the host as a
``TypedData``; ``GrpcMessageConversionExtensions.ToObject`` (azure-functions-host,
``src/WebJobs.Script.Grpc/MessageExtensions``) turns it into a .NET object: ``string``,
``byte[]``, a Newtonsoft ``JToken`` (``json``, parsed with ``DateParseHandling.None``), ``long``,
``double``. Here: ``str``, ``bytes``, ``Json`` (the parsed value), ``int``, ``float``.

Then ``FunctionBinding`` (azure-functions-host ``src/WebJobs.Script/Binding/FunctionBinding.cs``)
writes it through the binding's script type (``ExtensionBinding.BindAsync``), which the
extension's rules give (``AsyncCollectorBindingProvider.GetDefaultType``: the first of
``byte[]``, ``JObject``, ``string`` the extension converts from; an extension without rules
gets ``IAsyncCollector<string>``):

* a collector (``BindAsyncCollectorAsync<T>``): the value is read as a list
  (``ReadAsEnumerable``: a JSON array is its items; a string that starts with ``{`` or ``[``
  and ends with ``}`` or ``]`` is parsed as JSON, dates re-formatted as Newtonsoft reads them,
  an array giving its items; anything else is one item), then each item converted to ``T``:
  ``string`` (``ToString()``: a JSON object or array as indented JSON, a JSON string as its
  text, ``true`` as ``True``, a ``byte[]`` as ``System.Byte[]``), ``byte[]`` (that string in
  UTF-8, bytes as they are), ``JObject`` (a JSON object, anything else null);
* a stream (``ConvertValueToStream``): bytes as they are, a string in UTF-8, a JSON value
  compact (``Formatting.None``), a ``long`` as the 4 bytes of its ``int``, a ``double`` as
  its 8 bytes (``BitConverter``, little-endian);
* an input's value back to the worker (``ToRpc``): ``string`` -> ``string``, ``byte[]`` ->
  ``bytes``, a JSON object or array -> ``json`` (compact), null -> an empty ``TypedData``.

Newtonsoft's text is written as Newtonsoft writes it (``JsonTextWriter``): two-space indents,
``"name": value``, ``\\n`` line ends (the Linux host's ``Environment.NewLine``), non-ASCII
unescaped, ``\\u0085``, ``\\u2028``, ``\\u2029`` escaped, doubles in .NET's shortest round-trip
form (``1E+15``, ``1E-05``, ``1.0``).

Pure: values in, values out; the binding files (``blob``, ``storage_queue``, ``servicebus``,
``cosmos``) pick the conversion their extension has.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass
from typing import Any

from funcstack.functions_host._newtonsoft import host_documents

__all__ = [
    "BindingValueError",
    "Json",
    "collector_bytes",
    "collector_jobject",
    "collector_string",
    "from_typed_data",
    "newtonsoft_text",
    "stream_bytes",
    "to_typed_data",
]


class BindingValueError(ValueError):
    """A value the host cannot write through the binding (the host throws: the invocation
    fails)."""


@dataclass(frozen=True)
class Json:
    """A Newtonsoft ``JToken``: the parsed JSON value (dict, list, str, int, float, bool,
    None)."""

    value: Any


#: What ``ToObject`` gives: str, bytes, Json, int, float, or None (no data).
HostValue = str | bytes | Json | int | float | None


def from_typed_data(data: Any) -> HostValue:
    """``TypedData.ToObject()``."""
    kind = data.WhichOneof("data")
    if kind is None:
        return None
    if kind == "string":
        return str(data.string)
    if kind in {"bytes", "stream"}:
        return bytes(getattr(data, kind))
    if kind == "json":
        return Json(json.loads(data.json))
    if kind == "int":
        return int(data.int)
    if kind == "double":
        return float(data.double)
    raise BindingValueError(f"a {kind} value cannot be written to this binding")


def to_typed_data(value: Any) -> Any:
    """``ToRpc``: an input binding's value as the worker receives it."""
    from funcstack.functions_host._rpc import protos

    pb = protos()
    if value is None:
        return pb.TypedData()
    if isinstance(value, bytes):
        return pb.TypedData(bytes=value)
    if isinstance(value, str):
        return pb.TypedData(string=value)
    return pb.TypedData(json=newtonsoft_text(value, indented=False))


# -- Newtonsoft's text -----------------------------------------------------------------------


def _string_literal(text: str) -> str:
    quoted = json.dumps(text, ensure_ascii=False)
    return (
        quoted.replace("\u0085", "\\u0085")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def dotnet_double(value: float, *, json_literal: bool) -> str:
    """``double.ToString("R")`` (.NET Core 3+: the shortest round-trip digits, scientific
    from an exponent of 15, or of -5 and below); as a JSON literal with ``.0`` added when it has no
    point or exponent (``JsonConvert.EnsureDecimalPlace``)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        text = "-0" if math.copysign(1.0, value) < 0 else "0"
        return f"{text}.0" if json_literal else text
    sign = "-" if value < 0 else ""
    # the shortest digits that round-trip, from repr (Python's repr is shortest too)
    digits_text = repr(abs(value))
    if "e" in digits_text:
        base, _, exp = digits_text.partition("e")
        exponent = int(exp)
        whole, _, frac = base.partition(".")
        digits = (whole + frac).rstrip("0") or "0"
        exponent += len(whole) - 1
    else:
        whole, _, frac = digits_text.partition(".")
        stripped_whole = whole.lstrip("0")
        if stripped_whole:
            exponent = len(stripped_whole) - 1
            digits = (stripped_whole + frac).rstrip("0")
        else:
            lead = len(frac) - len(frac.lstrip("0"))
            exponent = -lead - 1
            digits = frac.lstrip("0").rstrip("0")
    if exponent >= 15 or exponent < -4:
        head, tail = digits[0], digits[1:]
        text = f"{head}.{tail}" if tail else head
        return f"{sign}{text}E{'+' if exponent >= 0 else '-'}{abs(exponent):02d}"
    if exponent >= 0:
        integer = digits[: exponent + 1].ljust(exponent + 1, "0")
        fraction = digits[exponent + 1 :]
    else:
        integer = "0"
        fraction = "0" * (-exponent - 1) + digits
    text = f"{integer}.{fraction}" if fraction else integer
    if json_literal and not fraction:
        text += ".0"
    return sign + text


def newtonsoft_text(value: Any, *, indented: bool) -> str:
    """``JToken.ToString(Formatting.Indented)`` (``indented``) or ``(Formatting.None)``."""
    out: list[str] = []
    _write(value, indented, 0, out)
    return "".join(out)


def _write(value: Any, indented: bool, level: int, out: list[str]) -> None:
    if isinstance(value, dict):
        _write_container("{", "}", list(value.items()), indented, level, out)
    elif isinstance(value, list):
        _write_container("[", "]", list(value), indented, level, out)
    elif isinstance(value, str):
        out.append(_string_literal(value))
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif value is None:
        out.append("null")
    elif isinstance(value, int):
        out.append(str(value))
    elif isinstance(value, float):
        out.append(dotnet_double(value, json_literal=True))
    else:
        raise BindingValueError(f"not a JSON value: {type(value).__name__}")


def _write_container(
    opening: str, closing: str, items: list[Any], indented: bool, level: int, out: list[str]
) -> None:
    if not items:
        out.append(opening + closing)
        return
    out.append(opening)
    for index, item in enumerate(items):
        if index:
            out.append(",")
        if indented:
            out.append("\n" + "  " * (level + 1))
        if opening == "{":
            key, item = item
            out.append(_string_literal(str(key)) + (": " if indented else ":"))
        _write(item, indented, level + 1, out)
    if indented:
        out.append("\n" + "  " * level)
    out.append(closing)


# -- what the bindings' script types make of a value -----------------------------------------


def _is_json_text(text: str) -> bool:
    """``Utility.IsJson``: trimmed, starts with ``{`` and ends with ``}``, or ``[`` and ``]``."""
    trimmed = text.strip()
    return (trimmed.startswith("{") and trimmed.endswith("}")) or (
        trimmed.startswith("[") and trimmed.endswith("]")
    )


def read_as_enumerable(value: HostValue) -> list[HostValue]:
    """``FunctionBinding.ReadAsEnumerable``: the items a collector adds."""
    if isinstance(value, Json) and isinstance(value.value, list):
        return [Json(item) for item in value.value]
    if isinstance(value, str) and _is_json_text(value):
        try:
            parsed = json.loads(value)
        except ValueError as exc:
            raise BindingValueError(
                "the host parses a string that starts with '{' or '[' and ends with '}' or "
                f"']' as JSON, and this one is not JSON ({exc})"
            ) from None
        parsed = host_documents(parsed)  # JToken.Parse: DateParseHandling.DateTime
        return [Json(item) for item in parsed] if isinstance(parsed, list) else [Json(parsed)]
    return [value]


def _to_string(item: HostValue) -> str:
    """``object.ToString()`` of an item, as ``BindAsyncCollectorAsync<string>`` calls it."""
    if isinstance(item, str):
        return item
    if isinstance(item, bytes):
        return "System.Byte[]"
    if isinstance(item, Json):
        inner = item.value
        if isinstance(inner, dict | list):
            return newtonsoft_text(inner, indented=True)
        if isinstance(inner, str):
            return inner
        if inner is None:
            return ""
        if isinstance(inner, bool):
            return "True" if inner else "False"
        if isinstance(inner, float):
            return dotnet_double(inner, json_literal=False)
        return str(inner)
    if isinstance(item, float):
        return dotnet_double(item, json_literal=False)
    return "" if item is None else str(item)


def collector_string(value: HostValue) -> list[str]:
    """The items of an ``IAsyncCollector<string>`` binding (Service Bus)."""
    return [_to_string(item) for item in read_as_enumerable(value)]


def collector_bytes(value: HostValue) -> list[bytes]:
    """The items of an ``IAsyncCollector<byte[]>`` binding (Storage queues)."""
    return [
        item if isinstance(item, bytes) else _to_string(item).encode("utf-8")
        for item in read_as_enumerable(value)
    ]


def collector_jobject(value: HostValue) -> list[dict[str, Any]]:
    """The items of an ``IAsyncCollector<JObject>`` binding (Cosmos DB): each a JSON object,
    else the host adds null, which the collector refuses."""
    out: list[dict[str, Any]] = []
    for item in read_as_enumerable(value):
        if not (isinstance(item, Json) and isinstance(item.value, dict)):
            shown = type(item.value if isinstance(item, Json) else item).__name__
            raise BindingValueError(
                f"an item that is not a JSON object ({shown}) is added as null: "
                "Value cannot be null. (Parameter 'item')"
            )
        out.append(item.value)
    return out


def stream_bytes(value: HostValue) -> bytes:
    """``FunctionBinding.ConvertValueToStream``: the bytes a stream binding (blob) writes."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, Json):
        return newtonsoft_text(value.value, indented=False).encode("utf-8")
    if isinstance(value, bool):  # not a TypedData kind; kept for completeness
        return struct.pack("<?", value)
    if isinstance(value, int):
        return struct.pack("<i", ((value + 2**31) % 2**32) - 2**31)  # unchecked (int)(long)
    if isinstance(value, float):
        return struct.pack("<d", value)
    raise BindingValueError("no value to write")
