"""Small helpers for tests and benchmarks of Functions apps: one HTTP call to an app served by
the runner, and the invocation context the host passes, for calling a function in-process."""

from __future__ import annotations

import http.client
import json
import threading
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import azure.functions as func
from azure.functions._abc import RetryContext, TraceContext

__all__ = [
    "InvocationContext",
    "InvocationTraceContext",
    "Reply",
    "call",
]

@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> object:
        return json.loads(self.body)


def call(
    url: str,
    method: str = "GET",
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> Reply:
    """One HTTP call with the standard library (no redirects, no raising on 4xx/5xx)."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=30)
    try:
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        conn.request(method, target, body=body, headers=headers or {})
        resp = conn.getresponse()
        return Reply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read())
    finally:
        conn.close()


class InvocationTraceContext(TraceContext):
    def __init__(self, trace_parent: str = "", trace_state: str = "") -> None:
        self._parent, self._state = trace_parent, trace_state

    @property
    def trace_parent(self) -> str:
        return self._parent

    @property
    def trace_state(self) -> str:
        return self._state

    @property
    def attributes(self) -> dict[str, str]:
        return {}


class InvocationContext(func.Context):
    """The invocation context the host passes to a parameter named `context` (no retry
    context: a function that reads it is not called this way)."""

    def __init__(self, function_name: str = "", *, trace_parent: str = "") -> None:
        self._name = function_name
        self._trace = InvocationTraceContext(trace_parent)

    @property
    def invocation_id(self) -> str:
        return "00000000-0000-0000-0000-000000000000"

    @property
    def thread_local_storage(self) -> Any:
        return threading.local()

    @property
    def function_name(self) -> str:
        return self._name

    @property
    def function_directory(self) -> str:
        return ""

    @property
    def trace_context(self) -> TraceContext:
        return self._trace

    @property
    def retry_context(self) -> RetryContext:
        raise NotImplementedError
