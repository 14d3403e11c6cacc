"""``func.Context`` for functions that declare a ``context`` parameter (as the worker passes it)."""

from __future__ import annotations

import threading
import uuid

import azure.functions as func
from azure.functions._abc import RetryContext, RpcException, TraceContext


class _RpcException(RpcException):
    def __init__(self, message: str = "") -> None:
        self._message = message

    @property
    def source(self) -> str:
        return ""

    @property
    def stack_trace(self) -> str:
        return ""

    @property
    def message(self) -> str:
        return self._message


class _RetryContext(RetryContext):
    def __init__(self, retry_count: int, max_retry_count: int) -> None:
        self._retry_count = retry_count
        self._max_retry_count = max_retry_count

    @property
    def retry_count(self) -> int:
        return self._retry_count

    @property
    def max_retry_count(self) -> int:
        return self._max_retry_count

    @property
    def exception(self) -> RpcException:
        return _RpcException()


class _TraceContext(TraceContext):
    def __init__(self, trace_parent: str) -> None:
        self._trace_parent = trace_parent

    @property
    def trace_state(self) -> str:
        return ""

    @property
    def trace_parent(self) -> str:
        return self._trace_parent

    @property
    def attributes(self) -> dict[str, str]:
        return {}


class RunnerContext(func.Context):
    """Invocation context: id, function name/directory, W3C traceparent, retry counters."""

    _tls = threading.local

    def __init__(
        self,
        function_name: str,
        function_directory: str,
        *,
        trace_parent: str = "",
        retry_count: int = 0,
        max_retry_count: int = 0,
    ) -> None:
        self._invocation_id = str(uuid.uuid4())
        self._function_name = function_name
        self._function_directory = function_directory
        self._trace = _TraceContext(trace_parent)
        self._retry = _RetryContext(retry_count, max_retry_count)

    @property
    def invocation_id(self) -> str:
        return self._invocation_id

    @property
    def thread_local_storage(self) -> type[threading.local]:
        return self._tls

    @property
    def function_name(self) -> str:
        return self._function_name

    @property
    def function_directory(self) -> str:
        return self._function_directory

    @property
    def trace_context(self) -> TraceContext:
        return self._trace

    @property
    def retry_context(self) -> RetryContext:
        return self._retry
