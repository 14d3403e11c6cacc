"""HTTP triggers: requests become ``RpcHttp`` invocations and responses come back the host's way.

The mapping follows the Functions host (``GrpcMessageConversionExtensions.ToRpcHttp`` and
``RawScriptResult``) for a worker with the Python worker's capabilities (``RawHttpBodyBytes``,
``RpcHttpBodyOnly``, no nullable dictionaries):

* header names lower-cased; a repeated header's values joined with ``,``;
* query values joined with ``,`` when a key repeats; keys with an empty value are dropped;
* route values in ``params`` (absent optional ones left out); the body as bytes, sent only
  when ``Content-Length`` is above 0;
* the function's ``RpcHttp`` answer: status (200 when empty), headers, ``content-type``, body;
* a failed invocation -> 500 with no body; an unknown route -> 404 and a route served for
  other methods -> 405 with ``Allow``, both with no body.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable
from typing import Any

from aiohttp import web
from multidict import CIMultiDict

from emulators.functions_host.config import resolve
from emulators.functions_host.functions import FunctionSpec
from emulators.functions_host.language_worker import LanguageWorker
from emulators.functions_host.routing import RouteTable
from emulators.functions_host.rpc import protos

logger = logging.getLogger("emulators.functions_host.http")

_ALL_METHODS = None  # an HTTP trigger without ``methods`` accepts every method


def child_traceparent(incoming: str | None) -> str:
    """The invocation's W3C traceparent: a child of the caller's, or a new trace."""
    span_id = secrets.token_hex(8)
    parts = (incoming or "").strip().split("-")
    if (
        len(parts) >= 4
        and len(parts[1]) == 32
        and len(parts[2]) == 16
        and all(c in "0123456789abcdef" for c in parts[1] + parts[2])
        and parts[1] != "0" * 32
    ):
        return f"00-{parts[1]}-{span_id}-{parts[3][:2]}"
    return f"00-{secrets.token_hex(16)}-{span_id}-01"


class HttpHost:
    """Dispatches requests under the route prefix to HTTP-triggered functions."""

    def __init__(
        self,
        functions: list[FunctionSpec],
        route_prefix: str,
        worker: LanguageWorker,
        *,
        timeout: Callable[[], float | None] = lambda: None,
        max_body: int = 100 * 1024 * 1024,
    ) -> None:
        self._worker = worker
        self._timeout = timeout
        self._max_body = max_body
        prefix = route_prefix.strip("/")
        self._prefix = f"/{prefix}" if prefix else ""
        self._table: RouteTable[FunctionSpec] = RouteTable()
        for spec in functions:
            route = str(resolve(spec.trigger.get("route") or spec.name))
            methods = spec.trigger.get("methods")
            allowed = frozenset(str(m).upper() for m in methods) if methods else _ALL_METHODS
            self._table.add(route, allowed, spec)
            logger.info(
                "http function %s: %s %s/%s",
                spec.name,
                ",".join(sorted(allowed)) if allowed else "*",
                self._prefix,
                route.strip("/"),
            )

    async def handle(self, request: web.BaseRequest) -> web.StreamResponse:
        started = time.perf_counter()
        spec: FunctionSpec | None = None
        status = 500
        try:
            response, spec = await self._dispatch(request)
            status = response.status
            return response
        finally:
            logger.info(
                "http request method=%s path=%s function=%s status=%d ms=%.2f",
                request.method,
                request.path,
                spec.name if spec else "-",
                status,
                (time.perf_counter() - started) * 1000.0,
            )

    async def _dispatch(self, request: web.BaseRequest) -> tuple[web.Response, FunctionSpec | None]:
        if not _valid_header_text(request):
            # Kestrel decodes header values as UTF-8 and refuses anything else (or NUL) before
            # routing: 400, no body, connection closed ("Malformed request: invalid headers").
            return web.Response(status=400, headers={"Connection": "close"}), None
        path = request.path
        prefix = self._prefix
        if prefix:
            n = len(prefix)
            if not (path.startswith(prefix) and (len(path) == n or path[n] == "/")):
                return web.Response(status=404), None
            path = path[len(prefix) :]
        method = request.method.upper()
        resolved = self._table.resolve(path.strip("/"), method)
        if resolved is None:
            return web.Response(status=404), None
        if isinstance(resolved, set):
            return web.Response(status=405, headers={"Allow": ", ".join(sorted(resolved))}), None
        spec, route_params = resolved
        if (request.content_length or 0) > self._max_body:
            return web.Response(status=413), spec
        body = await request.content.read() if (request.content_length or 0) > 0 else b""
        headers = request.headers
        rpc_http = to_rpc_http(request, route_params, body)
        pb = protos()
        try:
            answer = await self._worker.invoke(
                spec.function_id,
                [pb.ParameterBinding(name=spec.trigger_arg, data=pb.TypedData(http=rpc_http))],
                trace_parent=child_traceparent(headers.get("traceparent")),
                trace_state=headers.get("tracestate", ""),
                time_limit=self._timeout(),
            )
        except Exception as exc:
            logger.error("function %s failed: %s", spec.name, exc)
            return web.Response(status=500), spec
        if answer.result.status != pb.StatusResult.Success:
            logger.error(
                "function %s failed: %s", spec.name, answer.result.exception.message.strip()
            )
            return web.Response(status=500), spec
        return from_rpc_result(answer.return_value), spec


def _valid_header_text(request: web.BaseRequest) -> bool:
    """aiohttp decodes header bytes as UTF-8 with surrogateescape: a surrogate marks bytes
    that are not UTF-8."""
    for key, value in request.headers.items():
        for text in (key, value):
            if "\x00" in text or any("\ud800" <= ch <= "\udfff" for ch in text):
                return False
    return True


def to_rpc_http(request: web.BaseRequest, route_params: dict[str, str], body: bytes) -> Any:
    """The host's ``RpcHttp`` for ``request``."""
    pb = protos()
    headers: dict[str, str] = {}
    for key, value in request.headers.items():
        lower = key.lower()
        headers[lower] = f"{headers[lower]},{value}" if lower in headers else value
    query: dict[str, list[str]] = {}
    for key, value in request.query.items():
        query.setdefault(key, []).append(value)
    http = pb.RpcHttp(
        method=request.method.upper(),
        url=str(request.url),
        headers=headers,
        query={k: ",".join(v) for k, v in query.items() if ",".join(v)},
        params={k: v for k, v in route_params.items() if v is not None},
    )
    if body:
        http.body.CopyFrom(pb.TypedData(bytes=body))
    return http


def from_rpc_result(value: Any) -> web.Response:
    """The HTTP response for the function's return value, as ``RawScriptResult`` writes it."""
    kind = value.WhichOneof("data")
    if kind != "http":
        content = _typed_bytes(value)
        text_like = kind in {"string", "json"}
        return web.Response(
            status=200,
            body=content,
            content_type="text/plain" if text_like else "application/octet-stream",
        )
    http = value.http
    status = int(http.status_code) if http.status_code.strip() else 200
    headers: CIMultiDict[str] = CIMultiDict()
    for key, header_value in http.headers.items():
        headers.add(key, header_value)
    return web.Response(status=status, body=_typed_bytes(http.body), headers=headers)


def _typed_bytes(value: Any) -> bytes:
    kind = value.WhichOneof("data")
    if kind == "bytes":
        return bytes(value.bytes)
    if kind == "stream":
        return bytes(value.stream)
    if kind in {"string", "json"}:
        return str(getattr(value, kind)).encode("utf-8")
    if kind in {"int", "double"}:
        return str(getattr(value, kind)).encode("utf-8")
    return b""
