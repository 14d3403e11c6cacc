"""The Functions RPC protocol messages, and how host and worker exchange them.

The messages are the compiled ``FunctionRpc.proto`` that a published wheel ships
(``azure-functions-runtime-v1``, path ``tests/protos``; pinned by hash in
``rpc-protos.txt``, downloaded on first use into funcstack's cache). They are imported straight
from the wheel file under the package name ``functions_rpc``: nothing is copied or rewritten.

The Azure host talks to its language worker over a gRPC stream of ``StreamingMessage``s. The
local host sends the same messages over a local TCP connection, each framed by a 4-byte
big-endian length: the worker library sees exactly the requests the Azure worker hands it.
"""

from __future__ import annotations

import asyncio
import importlib
import struct
import sys
import types
from functools import cache
from typing import Any

from funcstack._cache import rpc_wheel

_PACKAGE = "functions_rpc"
_FRAME = struct.Struct(">I")
MAX_MESSAGE_BYTES = 128 * 1024 * 1024  # the host's gRPC max message length default


@cache
def protos() -> Any:
    """A module holding every message type, like the worker's ``protos`` package.

    ``FunctionRpc_pb2``'s names plus the nullable wrappers, which is what
    ``azure_functions_runtime`` reads from ``request.properties["protos"]``.
    """
    if _PACKAGE not in sys.modules:
        package = types.ModuleType(_PACKAGE)
        package.__path__ = [f"{rpc_wheel()}/tests/protos"]
        package.__package__ = _PACKAGE
        sys.modules[_PACKAGE] = package
    rpc = importlib.import_module(f"{_PACKAGE}.FunctionRpc_pb2")
    nullable = importlib.import_module(f"{_PACKAGE}.shared.NullableTypes_pb2")
    combined = types.ModuleType(f"{_PACKAGE}.protos")
    for source in (rpc, nullable):
        for name, value in vars(source).items():
            if not name.startswith("_"):
                setattr(combined, name, value)
    return combined


async def read_message(reader: asyncio.StreamReader) -> Any | None:
    """The next ``StreamingMessage``, or ``None`` at the end of the stream."""
    try:
        header = await reader.readexactly(_FRAME.size)
        (size,) = _FRAME.unpack(header)
        if size > MAX_MESSAGE_BYTES:
            raise ValueError(f"message of {size} bytes is over the limit")
        payload = await reader.readexactly(size)
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    message = protos().StreamingMessage()
    message.ParseFromString(payload)
    return message


def frame(message: Any) -> bytes:
    payload: bytes = message.SerializeToString()
    return _FRAME.pack(len(payload)) + payload
