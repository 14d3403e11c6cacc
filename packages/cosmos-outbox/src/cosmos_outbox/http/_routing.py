"""The app's own HTTP route table, read from its indexed functions, and the answer for
requests no function takes: 404, or 405 with `Allow` when the path exists with other methods.

Both come from `app.get_functions()`, the same list the worker indexes, so the fallback cannot
drift from the routes. The Functions host ranks a catch-all route below every other route
(locally and in Azure), so the fallback only sees what nothing else matched.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import azure.functions as func
from azure.functions.decorators.function_app import Function

from cosmos_outbox.http._problems import HttpProblemError

ALL_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE"})


class IndexedFunctionApp(func.FunctionApp):
    """A FunctionApp whose `get_functions()` builds the functions once and then returns the same
    list (the SDK refuses a second build): the worker indexes the app at start, and the fallback
    route and the OpenAPI document read the very same functions later."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._indexed: list[Function] | None = None
        self._index_lock = threading.Lock()

    def get_functions(self) -> list[Function]:
        with self._index_lock:
            if self._indexed is None:
                self._indexed = list(super().get_functions())
            return self._indexed


@dataclass(frozen=True)
class HttpRoute:
    """One HTTP route of an app's indexed functions: the function, its route template (as
    declared: `orders/{id}`), the methods it takes."""

    function: str
    template: str
    methods: frozenset[str]

    @property
    def catch_all(self) -> bool:
        return "{*" in self.template

    def matches(self, path: str) -> bool:
        """As the host's routing (ASP.NET Core) matches: one trailing slash is ignored; literal
        segments compare case-insensitively; `{name}` takes one non-empty segment, so an empty
        segment (`a//b`, `a//`) matches no parameter and no literal; `%2F` stays inside its
        segment (the host does not decode it); a catch-all `{*name}` takes the rest of the
        path, whatever it holds."""
        return self.values(path) is not None

    def values(self, path: str) -> dict[str, str] | None:
        """The route values the host hands the function for `path` (`{id}`'s segment by `id`, a
        catch-all's rest of the path by its name, `path` for a bare `{*}`), or None when the
        route does not match it (`matches`)."""
        want = self.template.strip("/").split("/")
        path = path.removeprefix("/")
        have = (path[:-1] if path.endswith("/") else path).split("/")
        found: dict[str, str] = {}
        for n, pattern in enumerate(want):
            if pattern.startswith("{*"):
                found[pattern[2:-1] or "path"] = "/".join(path.split("/")[n:])
                return found
            segment = have[n] if n < len(have) else ""
            if pattern.startswith("{") and pattern.endswith("}") and segment:
                found[pattern[1:-1].split(":", 1)[0]] = segment
            elif pattern.lower() != segment.lower():
                return None
        return found if len(want) == len(have) else None


def http_routes(functions: Iterable[Function]) -> list[HttpRoute]:
    """The HTTP routes of indexed functions (`app.get_functions()`), in their order: what the
    host matches a request against (`HttpRoute.matches`)."""
    routes = []
    for fn in functions:
        bindings = json.loads(fn.get_function_json()).get("bindings", [])
        for binding in bindings:
            if binding.get("type") == "httpTrigger":
                methods = binding.get("methods")
                routes.append(
                    HttpRoute(
                        function=str(fn.get_function_name()),
                        template=str(binding.get("route") or fn.get_function_name()),
                        methods=frozenset(str(m).upper() for m in methods)
                        if methods
                        else ALL_METHODS,
                    )
                )
    return routes


def allowed_methods(routes: Iterable[HttpRoute], path: str) -> frozenset[str]:
    """The methods some (non catch-all) route accepts at `path`; empty when no route has it."""
    allowed: frozenset[str] = frozenset()
    for route in routes:
        if not route.catch_all and route.matches(path):
            allowed |= route.methods
    return allowed


def fallback(req: func.HttpRequest, routes: Iterable[HttpRoute]) -> func.HttpResponse:
    """Requests no function takes: 405 with `Allow` when the path exists, else 404."""
    path = str(req.route_params.get("path") or "")
    allowed = allowed_methods(routes, path)
    if allowed:
        raise HttpProblemError(
            405,
            "Method Not Allowed",
            f"{req.method.upper()} is not allowed here; allowed: {', '.join(sorted(allowed))}",
            headers={"Allow": ", ".join(sorted(allowed))},
        )
    raise HttpProblemError(404, "Not Found", "no such route")
