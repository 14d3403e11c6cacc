"""`HttpApi`: the HTTP operations of one blueprint, each declared once next to its handler
(`_declaration`) and served by the request pipeline (`_pipeline`)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import azure.functions as func
from pydantic import BaseModel

from cosmos_outbox._callables import is_async
from cosmos_outbox.http._call import Handler
from cosmos_outbox.http._declaration import (
    ATTRIBUTE,
    Command,
    HttpOperation,
    PathParameter,
    QueryParameter,
    ResponseHeader,
)
from cosmos_outbox.http._pipeline import entry
from cosmos_outbox.http._problems import from_exception
from cosmos_outbox.http.bounded import BOUND_SECONDS, checked_bound


class HttpApi:
    """The HTTP operations of one blueprint (a new one unless given). `parameters` declares the
    route parameters its routes use (by name), `auth_level` the default auth level of its
    operations (`function` by default, as in Azure: a function key, `x-functions-key` or
    `?code=`), `bounded` whether they answer within `bound_seconds` (default
    `bounded.BOUND_SECONDS`, checked by `bounded.checked_bound`); `etag_request_header` reads
    the reference sample's `ETag` request header as If-Match (for older clients that send it).

    A handler is a plain function (served in a sync function: the worker's thread pool) or an
    `async def` one (served in an async function, on the worker's event loop). `wrap`, when
    given, wraps each function the worker indexes (the request pipeline's entry) before it is
    registered: it takes the operation and the function and returns a function of the same
    kind (sync or `async def`) and parameters (the operators' doors admit a request there,
    `cosmos_outbox._console.doors`); `security` names the OpenAPI security schemes that admit
    its requests when they are not its auth level's."""

    def __init__(
        self,
        blueprint: func.Blueprint | None = None,
        *,
        parameters: Mapping[str, PathParameter] | None = None,
        auth_level: func.AuthLevel = func.AuthLevel.FUNCTION,
        bounded: bool = False,
        bound_seconds: float = BOUND_SECONDS,
        etag_request_header: bool = False,
        wrap: Callable[[HttpOperation, Callable[..., Any]], Callable[..., Any]] | None = None,
        security: tuple[str, ...] | None = None,
    ) -> None:
        self.blueprint = blueprint if blueprint is not None else func.Blueprint()  # type: ignore[no-untyped-call]
        self._parameters = dict(parameters or {})
        self._auth_level = auth_level
        self._bounded = bounded
        self._bound_seconds = checked_bound(bound_seconds)
        self._etag_request_header = etag_request_header
        self._wrap = wrap
        self._security = security

    def operation(
        self,
        *,
        route: str,
        method: str,
        summary: str,
        status: int,
        errors: tuple[int, ...],
        name: str | None = None,
        auth_level: func.AuthLevel | None = None,
        request: type[BaseModel] | None = None,
        response: type[BaseModel] | None = None,
        response_schema: Mapping[str, Any] | None = None,
        query: tuple[QueryParameter, ...] = (),
        paged: bool = False,
        conditional: bool = False,
        headers: tuple[ResponseHeader, ...] = (),
        bounded: bool | None = None,
        command: Command | None = None,
        precondition_required: bool = False,
        idempotent: bool = False,
        asynchronous: bool | None = None,
    ) -> Callable[[Handler], Handler]:
        """Declare an operation and register its handler (the function name is `name`, else
        the handler's). A `bounded` operation (default: the API's) answers within the API's
        `bound_seconds`. `asynchronous`: whether the function is an `async def` one (default:
        whether the handler is); a coroutine handler served by a sync function runs in its
        thread and must not wait on I/O (the route helper's do not, over sync services)."""

        def register(handler: Handler) -> Handler:
            names = re.findall(r"{([^}*]+)}", route)
            unknown = [n for n in names if n not in self._parameters]
            if unknown:
                raise ValueError(f"route {route!r} uses undeclared parameters {unknown}")
            operation = HttpOperation(
                name=name or handler.__name__,
                route=route,
                method=method.upper(),
                auth_level=auth_level or self._auth_level,
                summary=summary,
                status=status,
                request=request,
                response=response,
                response_schema=response_schema,
                query=query,
                paged=paged,
                conditional=conditional,
                headers=headers,
                errors=errors,
                path=tuple(self._parameters[n] for n in names),
                bounded=self._bounded if bounded is None else bounded,
                bound_seconds=self._bound_seconds,
                command=command,
                precondition_required=precondition_required,
                idempotent=idempotent,
                etag_request_header=self._etag_request_header,
                security=self._security,
            )
            function = entry(
                operation,
                handler,
                asynchronous=is_async(handler) if asynchronous is None else asynchronous,
            )
            if self._wrap is not None:
                function = self._wrap(operation, function)
            function.__name__ = function.__qualname__ = operation.name
            function.__module__ = getattr(handler, "__module__", __name__)
            function.__doc__ = operation.summary
            setattr(function, ATTRIBUTE, operation)
            self.blueprint.route(
                route=route, methods=[operation.method], auth_level=operation.auth_level
            )(function)
            return handler

        return register

    def fallback(self, handler: Callable[[func.HttpRequest], func.HttpResponse]) -> None:
        """Register the catch-all (`{*path}`, every method, anonymous) that answers what no
        route takes (404, 405 with `Allow`). The Functions host tries the HTTP functions' routes
        in the order of their names (case-insensitive), taking the first that matches, with no
        precedence of a literal route over a catch-all: this one is named `zz_not_routed`, to
        come after the app's functions."""

        def zz_not_routed(req: func.HttpRequest) -> func.HttpResponse:
            try:
                return handler(req)
            except Exception as exc:  # the boundary: translate everything
                return from_exception(exc).response()

        self.blueprint.route(route="{*path}", methods=None, auth_level=func.AuthLevel.ANONYMOUS)(
            zz_not_routed
        )
