"""The AMQP 1.0 type system of the local Service Bus endpoint, on Apache Qpid Proton's codec
(``proton.Data``, the public API of python-qpid-proton): a frame's performative decoded into its
fields, a performative encoded from its fields with the types the specification gives them, a
message's sections taken apart and put together. Pure: no I/O.

Values are Proton's Python types: a symbol is ``proton.symbol`` (a ``str``), a string a ``str``,
binary ``bytes``, a timestamp ``proton.timestamp`` (milliseconds, an ``int``), the unsigned and
narrow integers ``ulong``, ``uint``, ``ubyte``, ``int32``, ..., a described value
``proton.Described``; an array is read as a ``list`` (written as ``proton.Array``). A value
decoded keeps its AMQP type, so what a sender sent is delivered with the types it had.

Follows OASIS AMQP 1.0 part 1 (types), 2.3 (frames), 2.7 (performatives), 2.8 (definitions:
error, roles), 3.2 (message sections), 3.4 (delivery states), 3.5 (source, target) and 5.3
(SASL). Why Proton's codec and not its engine, and not the SDK's codec: docs/servicebus.md
("The AMQP library").
"""

from __future__ import annotations

from typing import Any, cast

from proton import (
    UNDESCRIBED,
    Array,
    Data,
    Described,
    int32,
    symbol,
    timestamp,
    ubyte,
    uint,
    ulong,
    ushort,
)

__all__ = [
    "ACCEPTED",
    "ATTACH",
    "BEGIN",
    "CLOSE",
    "DETACH",
    "DISPOSITION",
    "END",
    "ERROR",
    "FLOW",
    "MODIFIED",
    "OPEN",
    "REJECTED",
    "RELEASED",
    "SASL_INIT",
    "SASL_MECHANISMS",
    "SASL_OUTCOME",
    "SOURCE",
    "TARGET",
    "TRANSFER",
    "Array",
    "Described",
    "array_of",
    "decode_frame_body",
    "decode_value",
    "described",
    "encode",
    "error",
    "fields",
    "frame",
    "int32",
    "named",
    "performative",
    "plain",
    "sections",
    "symbol",
    "text",
    "timestamp",
    "ubyte",
    "uint",
    "ulong",
    "ushort",
]

# Descriptor codes (part 2.7, 3.2, 3.4, 3.5, 5.3).
OPEN, BEGIN, ATTACH, FLOW, TRANSFER, DISPOSITION, DETACH, END, CLOSE = range(0x10, 0x19)
ERROR = 0x1D
RECEIVED, ACCEPTED, REJECTED, RELEASED, MODIFIED = range(0x23, 0x28)
SOURCE, TARGET = 0x28, 0x29
SASL_MECHANISMS, SASL_INIT, SASL_CHALLENGE, SASL_RESPONSE, SASL_OUTCOME = range(0x40, 0x45)

#: The number of fields of each performative and composite type: a list read that ends early
#: (trailing nulls may be left out) is padded to it, and one written has them all. A transfer's
#: payload follows its fields (``decode_frame_body``).
FIELD_COUNTS = {
    OPEN: 10,
    BEGIN: 8,
    ATTACH: 14,
    FLOW: 11,
    TRANSFER: 11,
    DISPOSITION: 6,
    DETACH: 3,
    END: 1,
    CLOSE: 1,
    ERROR: 3,
    SOURCE: 11,
    TARGET: 7,
    RECEIVED: 2,
    ACCEPTED: 0,
    REJECTED: 1,
    RELEASED: 0,
    MODIFIED: 3,
    SASL_MECHANISMS: 1,
    SASL_INIT: 3,
    SASL_OUTCOME: 2,
    0x70: 5,  # header
    0x73: 13,  # properties
}

#: AMQP type of a frame: AMQP, SASL (part 2.3.1).
AMQP_FRAME, SASL_FRAME = 0, 1


def plain(value: Any) -> Any:
    """A value as the codec reads it (``_read``), from one Proton made: binary as ``bytes``
    (Proton hands it out as a view of its own buffer), arrays as lists; everything else keeps
    its type."""
    if isinstance(value, memoryview):
        return bytes(value)
    if isinstance(value, Array):
        return [plain(v) for v in value.elements]
    if isinstance(value, Described):
        return Described(value.descriptor, plain(value.value))
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {plain(k): plain(v) for k, v in value.items()}
    return value


#: The getter of each scalar type (Proton's own, as ``Data.get_object`` picks them).
_SCALARS: dict[int, Any] = {
    Data.BOOL: Data.get_bool,
    Data.UBYTE: Data.get_ubyte,
    Data.BYTE: Data.get_byte,
    Data.USHORT: Data.get_ushort,
    Data.SHORT: Data.get_short,
    Data.UINT: Data.get_uint,
    Data.INT: Data.get_int,
    Data.CHAR: Data.get_char,
    Data.ULONG: Data.get_ulong,
    Data.LONG: Data.get_long,
    Data.TIMESTAMP: Data.get_timestamp,
    Data.FLOAT: Data.get_float,
    Data.DOUBLE: Data.get_double,
    Data.DECIMAL32: Data.get_decimal32,
    Data.DECIMAL64: Data.get_decimal64,
    Data.DECIMAL128: Data.get_decimal128,
    Data.UUID: Data.get_uuid,
    Data.STRING: Data.get_string,
    Data.SYMBOL: Data.get_symbol,
}
_NULL, _LIST, _MAP, _DESCRIBED = Data.NULL, Data.LIST, Data.MAP, Data.DESCRIBED
_BINARY, _ARRAY = Data.BINARY, Data.ARRAY


def _read(data: Data, kind: int | None) -> Any:
    """The value at ``data``'s current node, of type ``kind`` (what ``Data.next`` answered), in
    one walk (what ``Data.get_object`` then ``plain`` give, read together): binary copied into
    ``bytes``, an array as a list."""
    if kind == _NULL or kind is None:
        return None
    scalar = _SCALARS.get(kind)
    if scalar is not None:
        return scalar(data)
    if kind == _BINARY:
        return bytes(data.get_binary())
    if kind == _LIST:
        out: list[Any] = []
        data.enter()
        while (item := data.next()) is not None:
            out.append(_read(data, item))
        data.exit()
        return out
    if kind == _MAP:
        entries: dict[Any, Any] = {}
        data.enter()
        while (key := data.next()) is not None:
            name = _read(data, key)
            entries[name] = _read(data, data.next())
        data.exit()
        return entries
    if kind == _DESCRIBED:
        data.enter()
        descriptor = _read(data, data.next())
        value = _read(data, data.next())
        data.exit()
        return Described(descriptor, value)
    if kind == _ARRAY:
        return plain(data.get_py_array())
    return data.get_object()


#: One Data for every decode and one for every encode: the endpoint's codec runs on its event
#: loop's thread alone (each call clears it first; what it returns is copied out of it).
_DECODING = Data()
_ENCODING = Data()


def _decoded(data: Data, buffer: bytes | memoryview) -> int:
    """Decode the first value of ``buffer`` into ``data`` (appended after what it holds); the
    bytes it took. Proton's binding reads any buffer in place (cffi's ``from_buffer``), though
    it declares ``bytes``."""
    return data.decode(cast(bytes, buffer))


def decode_value(buffer: bytes | memoryview) -> tuple[Any, int]:
    """The first AMQP value encoded in ``buffer``, and how many bytes it took."""
    data = _DECODING
    data.clear()
    used = _decoded(data, buffer)
    data.rewind()
    return _read(data, data.next()), used


def decode_frame_body(body: bytes | memoryview) -> tuple[int, list[Any], memoryview]:
    """A frame body: its performative's descriptor code, its fields (padded to their number,
    ``FIELD_COUNTS``) and what follows it (a transfer's payload)."""
    view = memoryview(body)
    value, used = decode_value(view)
    if not isinstance(value, Described) or not isinstance(value.value, list):
        raise ValueError(f"a frame body that is no performative: {value!r}")
    code = int(cast(int, value.descriptor))
    return code, fields(value, FIELD_COUNTS.get(code, len(value.value))), view[used:]


def fields(value: Any, count: int) -> list[Any]:
    """The fields of a described list (or of a bare list, or of none: all null), padded to
    ``count``."""
    if isinstance(value, Described):
        value = value.value
    out = list(value) if isinstance(value, list) else []
    return out + [None] * (count - len(out))


def encode(value: Any) -> bytes:
    """One AMQP value encoded; Python's ``int`` is a long, ``str`` a string, ``bytes`` binary
    (Proton's mapping): wrap a value in its AMQP type where another is meant."""
    data = _ENCODING
    data.clear()
    data.put_object(value)
    return bytes(data.encode())


def described(code: int, value: Any) -> Described:
    return Described(ulong(code), value)


def performative(code: int, *values: Any) -> Described:
    """A performative (or any described list) of these field values, every field of it written
    (nulls too, up to its number, ``FIELD_COUNTS``): the specification lets trailing nulls be
    left out, but the SDK's own AMQP stack reads some composites by position (an error's
    ``info``), as the service and the SDK write them: whole."""
    listed = list(values)
    return described(code, listed + [None] * (FIELD_COUNTS.get(code, 0) - len(listed)))


def frame(channel: int, body: Any, *, payload: bytes = b"", frame_type: int = AMQP_FRAME) -> bytes:
    """A whole frame: its header (size, data offset 2, type, channel), the encoded body, then
    a transfer's payload."""
    encoded = encode(body) + payload
    return (
        (8 + len(encoded)).to_bytes(4, "big")
        + bytes((2, frame_type))
        + channel.to_bytes(2, "big")
        + encoded
    )


def error(condition: str, description: str | None, info: dict[Any, Any] | None = None) -> Any:
    """An ``error`` (part 2.8.14)."""
    return performative(ERROR, symbol(condition), description, info)


def array_of(type_code: int, values: list[Any]) -> Array:
    """An AMQP array of one type (``proton.Data.LONG``, ``SYMBOL``, ...)."""
    return Array(cast(Any, UNDESCRIBED), type_code, *values)


def sections(payload: bytes | memoryview, *, bodies: bool = False) -> list[tuple[int, bytes, Any]]:
    """The sections of an encoded message: (descriptor code, the section's bytes, its value).
    A body section's value (data, amqp-sequence, amqp-value) is read only with ``bodies``
    (None otherwise): what is kept of a body is its bytes. One decode of the whole message."""
    view = memoryview(payload)
    data = _DECODING
    data.clear()
    raws: list[bytes] = []
    offset = 0
    while offset < len(view):
        used = _decoded(data, view[offset:])
        raws.append(bytes(view[offset : offset + used]))
        offset += used
    data.rewind()
    out: list[tuple[int, bytes, Any]] = []
    for raw in raws:
        data.next()
        data.enter()
        data.next()
        code = int(cast(int, data.get_object()))
        kind = data.next()
        body = code in (0x75, 0x76, 0x77)
        out.append((code, raw, _read(data, kind) if bodies or not body else None))
        data.exit()
    return out


def text(value: Any) -> str | None:
    """A string, symbol or UTF-8 binary as ``str`` (None stays None)."""
    if value is None:
        return None
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8")
    return str(value)


def named(value: Any) -> dict[str, Any]:
    """A map whose keys are strings, symbols or UTF-8 binary (as clients send a request's
    entries), by ``str`` key; anything else is an empty map."""
    if not isinstance(value, dict):
        return {}
    return {str(text(k)): v for k, v in value.items()}
