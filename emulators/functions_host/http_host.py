"""HTTP triggers served by aiohttp, with routes taken from the functions' binding metadata."""

from __future__ import annotations

import logging
import time
from concurrent.futures import Executor
from typing import Any

import azure.functions as func
from aiohttp import web
from multidict import CIMultiDict

from emulators.functions_host.app import FunctionSpec
from emulators.functions_host.config import resolve
from emulators.functions_host.routing import RouteTable

logger = logging.getLogger("emulators.functions_host.http")

_ALL_METHODS = None  # an HTTP trigger without ``methods`` accepts every method


class HttpHost:
    """Dispatches requests under the route prefix to HTTP-triggered functions."""

    def __init__(
        self,
        functions: list[FunctionSpec],
        route_prefix: str,
        executor: Executor,
        *,
        max_body: int = 100 * 1024 * 1024,
    ) -> None:
        self._executor = executor
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
        body = await request.content.read()
        if len(body) > self._max_body:
            return web.Response(status=413), spec
        headers: dict[str, str] = {}
        for key, value in request.headers.items():
            lower = key.lower()
            headers[lower] = f"{headers[lower]}, {value}" if lower in headers else value
        params: dict[str, str] = {}
        for key, value in request.query.items():
            params.setdefault(key, value)
        http_request = func.HttpRequest(
            method,
            str(request.url),
            headers=headers,
            params=params,
            route_params=route_params,
            body=body,
        )
        try:
            result = await spec.invoke(
                self._executor,
                {spec.trigger_arg: http_request},
                trace_parent=headers.get("traceparent", ""),
            )
        except Exception:
            logger.exception("function %s failed", spec.name)
            return (
                web.Response(status=500, text="Internal Server Error", content_type="text/plain"),
                spec,
            )
        try:
            return _to_response(result), spec
        except Exception:
            logger.exception("function %s returned a value that is not an HTTP response", spec.name)
            return (
                web.Response(status=500, text="Internal Server Error", content_type="text/plain"),
                spec,
            )


def _to_response(result: Any) -> web.Response:
    if isinstance(result, func.HttpResponse):
        headers: CIMultiDict[str] = CIMultiDict()
        for key, value in result.headers.items():
            headers.add(key, value)
        if "Content-Type" not in headers:
            mimetype = result.mimetype or "text/plain"
            headers["Content-Type"] = (
                f"{mimetype}; charset={result.charset}"
                if mimetype.startswith("text/") and result.charset
                else mimetype
            )
        return web.Response(status=result.status_code, body=result.get_body(), headers=headers)
    if result is None:
        return web.Response(status=204)
    if isinstance(result, str):
        return web.Response(status=200, text=result, content_type="text/plain")
    if isinstance(result, bytes):
        return web.Response(status=200, body=result, content_type="application/octet-stream")
    raise TypeError(f"unsupported HTTP function result {type(result).__name__}")
