"""Call an app's indexed functions in-process, as the Functions host would: an HTTP request is
routed by the app's own route table (literal segments case-insensitive, one trailing slash
ignored, catch-all routes last), its route values handed over as `route_params`, and the
invocation context passed to a `context` parameter; the relay is handed change-feed documents.
No host, no worker, no I/O: what the functions do is what the app's services do (the fakes of
`cosmos_outbox_testing.in_memory`, typically).

An ASGI app (`func.AsgiFunctionApp`, FastAPI's) starts its lifespan on the client's loop with its
first request; the client shuts it down on that loop when it closes (or at interpreter exit, if
it was never closed). azure-functions' `AsgiFunctionApp.__del__` would otherwise run the
shutdown at exit on a new event loop, where the lifespan task never answers: a plain script
hung there (pytest, which keeps the app alive past the atexit hooks, did not)."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import threading
import weakref
from collections.abc import Awaitable, Iterable, Mapping
from types import SimpleNamespace
from typing import Any
from urllib.parse import parse_qsl

import azure.functions as func
from azure.functions.decorators.function_app import Function

from cosmos_outbox.http import http_routes

__all__ = ["FunctionClient", "InvocationContext"]


class InvocationContext(func.Context):
    """The invocation context the host passes to a parameter named `context` (a first
    attempt: no retry). Its trace and retry contexts have the properties a function reads
    (`context.trace_context.trace_parent`, `context.retry_context.retry_count`): their types
    are in a private module of azure.functions (`_abc`), so they are `Any` here."""

    invocation_id = "00000000-0000-0000-0000-000000000000"
    function_name = ""
    function_directory = ""
    thread_local_storage: Any = None
    trace_context: Any = None
    retry_context: Any = SimpleNamespace(retry_count=0, max_retry_count=0, exception=None)

    def __init__(self, function_name: str = "", *, trace_parent: str = "") -> None:
        self.function_name = function_name
        self.thread_local_storage = threading.local()
        self.trace_context = SimpleNamespace(
            trace_parent=trace_parent, trace_state="", attributes={}
        )


class FunctionClient:
    """The functions of one app (a `func.FunctionApp`, indexed once), called in-process: a sync
    function in the caller's thread, an `async def` one on an event loop of this client's, on a
    thread of its own (one loop for all its calls, as the worker has one: calls from several
    threads run concurrently on it); the loop is closed with the client.

    `route_prefix` is host.json's `extensions.http.routePrefix` (`api` unless the app's host.json
    says otherwise): a request's `path` is the path after it, as the functions' routes are."""

    def __init__(self, app: func.FunctionRegister, *, route_prefix: str = "api") -> None:
        self.route_prefix = route_prefix.strip("/")
        self.functions: dict[str, Function] = {str(f.get_function_name()): f for f in _indexed(app)}
        routes = http_routes(self.functions.values())
        # The host tries the routes in the order of their functions' names (case-insensitive)
        # and takes the first that matches: a catch-all or `{id}` route named before a literal
        # one it also matches takes its requests, in Azure as here.
        self._routes = sorted(routes, key=lambda r: r.function.lower())
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()
        #: the ASGI app whose lifespan this client's loop started (shut down on that loop)
        self._asgi = app if isinstance(app, func.AsgiFunctionApp) else None
        self._lifespan: list[func.AsgiFunctionApp] = []

    def invoke(self, name: str, *args: Any, trace_parent: str = "") -> Any:
        """Call function `name` with `args`, and the invocation context if it takes one; an
        `async def` function is run to its end on this client's loop."""
        user_function = self.functions[name].get_user_function()
        if "context" in inspect.signature(user_function).parameters:
            args = (*args, InvocationContext(name, trace_parent=trace_parent))
        result = user_function(*args)
        if inspect.isawaitable(result):
            asgi = self._asgi
            starting = asgi is not None and not asgi.startup_task_done
            try:
                return asyncio.run_coroutine_threadsafe(_awaited(result), self._running()).result()
            finally:
                if starting and asgi is not None and asgi.startup_task_done:
                    self._lifespan.append(asgi)  # started on this client's loop
        return result

    def _running(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                threading.Thread(
                    target=self._loop.run_forever, name="function-client", daemon=True
                ).start()
                weakref.finalize(self, _stop, self._loop, self._lifespan)
            return self._loop

    def close(self) -> None:
        """Shut down the lifespan of the ASGI app this client started, then stop this client's
        event loop, if it made one."""
        with self._lock:
            loop, self._loop = self._loop, None
        if loop is not None:
            _stop(loop, self._lifespan)

    def __enter__(self) -> FunctionClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(
        self,
        name: str,
        method: str,
        path: str,
        *,
        body: Any = None,
        raw: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        route_params: Mapping[str, str] | None = None,
        params: Mapping[str, str] | None = None,
        trace_parent: str = "",
    ) -> func.HttpResponse:
        """Call HTTP function `name` directly (no routing) with a JSON `body` (or `raw`
        bytes); `path` is the URL path after the route prefix, with a query string if it has
        one (`_query`: its values join `params`)."""
        path, query, params = _query(path, params)
        if raw is None:
            raw = b"" if body is None else json.dumps(body).encode()
        sent = {"content-type": "application/json"} if body is not None else {}
        sent.update(headers or {})
        request = func.HttpRequest(
            method=method,
            url=f"http://localhost{self._url_path(path)}{'?' + query if query else ''}",
            headers=sent,
            params=dict(params or {}),
            route_params=dict(route_params or {}),
            body=raw,
        )
        response = self.invoke(name, request, trace_parent=trace_parent)
        assert isinstance(response, func.HttpResponse)
        return response

    def request(self, method: str, path: str, **options: Any) -> func.HttpResponse:
        """`method` `/<route prefix>/<path>`, routed as the host routes it, with `call`'s
        options but the route's values (`body`, `raw`, `headers`, `params`, `trace_parent`): a
        query string in `path` (`stock/wh-1?lowerThan=10`) is not part of the route; its values
        become the request's `params`, with those of `params` (a name in both is a
        `ValueError`)."""
        _query(path, options.get("params"))  # a name given twice is refused before anything runs
        name, values = self.route(method, path)
        return self.call(name, method, path, route_params=values, **options)

    def route(self, method: str, path: str) -> tuple[str, dict[str, str]]:
        """The function the host would call for `method` `/<route prefix>/<path>`, and its route
        values (a query string in `path` is not routed)."""
        path = _query(path, None)[0]
        for route in self._routes:
            values = route.values(path) if method.upper() in route.methods else None
            if values is not None:
                return route.function, values
        raise LookupError(f"no function of the app takes {method} {self._url_path(path)}")

    def _url_path(self, path: str) -> str:
        return "/" + "/".join(part for part in (self.route_prefix, path.lstrip("/")) if part)

    def relay(self, documents: Iterable[Mapping[str, Any]]) -> None:
        """Hand change-feed documents to the relay (`relay_events`), as the trigger does."""
        self.invoke(
            "relay_events", func.DocumentList(func.Document.from_dict(dict(d)) for d in documents)
        )


def _parsed(query: str) -> dict[str, str]:
    """A query string's values as the host hands them to the worker (`RpcHttp.query`):
    percent-escapes and `+` decoded (ASP.NET Core's `QueryHelpers`), a repeated name's values
    joined with `,`, names without a value left out."""
    found: dict[str, list[str]] = {}
    for key, value in parse_qsl(query, keep_blank_values=True):
        found.setdefault(key, []).append(value)
    return {key: ",".join(values) for key, values in found.items() if ",".join(values)}


def _query(path: str, params: Mapping[str, str] | None) -> tuple[str, str, dict[str, str]]:
    """`path` without its query string (and fragment, which no client sends), the query string,
    and `params` with the query's values. A name given both ways is refused: the host has one
    query string, and a test that sets a value twice means one of them."""
    path, _, query = path.split("#", 1)[0].partition("?")
    merged = dict(params or {})
    from_query = _parsed(query)
    both = sorted(set(from_query) & set(merged))
    if both:
        raise ValueError(
            f"query parameter(s) {', '.join(both)} given both in the path's query string and "
            "in params=: give each once"
        )
    merged.update(from_query)
    return path, query, merged


#: How long an ASGI app's lifespan shutdown may take when a client closes.
_SHUTDOWN_SECONDS = 30


def _stop(loop: asyncio.AbstractEventLoop, lifespan: list[func.AsgiFunctionApp]) -> None:
    """Stop a client's loop: first the lifespan of the ASGI apps it started, on this loop (where
    their lifespan task runs), marked done so that their `__del__` has nothing left to do."""
    while lifespan:
        asgi = lifespan.pop()
        if asgi.startup_task_done and loop.is_running():
            shutdown = asyncio.run_coroutine_threadsafe(asgi.middleware.notify_shutdown(), loop)  # type: ignore[no-untyped-call]
            with contextlib.suppress(Exception):  # the app's own shutdown failing: still stop
                shutdown.result(_SHUTDOWN_SECONDS)
        asgi.startup_task_done = False
    if loop.is_running():
        loop.call_soon_threadsafe(loop.stop)


#: Each app's functions, built once (as the worker indexes an app once): azure-functions'
#: `FunctionApp` refuses to build its functions a second time.
_INDEXED: weakref.WeakKeyDictionary[func.FunctionRegister, list[Function]] = (
    weakref.WeakKeyDictionary()
)
_INDEX_LOCK = threading.Lock()


def _indexed(app: func.FunctionRegister) -> list[Function]:
    with _INDEX_LOCK:
        if app not in _INDEXED:
            _INDEXED[app] = list(app.get_functions())
        return _INDEXED[app]


async def _awaited(result: Awaitable[Any]) -> Any:
    return await result
