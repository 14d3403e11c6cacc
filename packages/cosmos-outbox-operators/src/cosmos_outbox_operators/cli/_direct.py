"""`cosmos-outbox --direct` (or `--settings FILE`): on call's commands straight against the stores,
with the app's settings (the environment's, and a local.settings.json's where given: the
environment wins), for an app whose relay runs as `cosmos-outbox relay` processes or that serves
no operators' routes (issue 72 item 7).

The operators' routes themselves are served in-process (`DirectApi` answers `call()` as
`OperatorsApi` does over HTTP): the same handlers over the same core operations
(`cosmos_outbox.operations`), built from the settings as the app builds them; so every command
prints what it prints through the app, and no command exists only here. Their bound is the
command line's `--timeout` (`cosmos_outbox.http.bounded.BOUND_SECONDS`, in this process only):
a person at a terminal waits for the stores' first answer, which a host's caller would not.
No host and no key: the actions are audited as "the command line as <user>@<machine>", and can
do what the settings' credentials allow."""

from __future__ import annotations

import getpass
import json
import socket
import urllib.parse
from typing import Any

import azure.functions as func

from cosmos_outbox.http import http_routes
from cosmos_outbox.operations import Actor
from cosmos_outbox_operators.cli._client import OperatorsApi, OperatorsApiError

__all__ = ["DirectApi", "command_line_actor"]


def command_line_actor() -> Actor:
    """Who acts through the direct command line: the user and the machine it runs as."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown user"
    return Actor("command line", name=f"{user}@{socket.gethostname()}")


class DirectApi:
    """The operators' routes of the app the settings describe, served in-process."""

    def __init__(
        self, *, settings_file: str | None = None, prefix: str = "outbox", timeout: float = 60.0
    ) -> None:
        from cosmos_outbox import Outbox
        from cosmos_outbox.http import bounded
        from cosmos_outbox.relay import use_local_settings
        from cosmos_outbox_operators._part import Operators, routes_blueprint

        if settings_file:
            use_local_settings(settings_file)
        self.prefix = prefix.strip("/")
        bounded.BOUND_SECONDS = timeout
        outbox = Outbox()
        app = func.FunctionApp()
        app.register_functions(
            routes_blueprint(
                outbox.operations,
                asynchronous=False,
                options=Operators(route_prefix=self.prefix, console=False),
                actor=command_line_actor(),
            )
        )
        functions = {f.get_function_name(): f for f in app.get_functions()}
        self._routes = [(r, functions[r.function]) for r in http_routes(functions.values())]

    def route(self, path: str, **query: Any) -> str:
        return OperatorsApi.route(self, path, **query)  # type: ignore[arg-type]  # its prefix

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """The route's status and JSON answer, as the app would answer it."""
        where = urllib.parse.urlsplit(path)
        found = next(
            ((r, f) for r, f in self._routes if method in r.methods and r.matches(where.path)),
            None,
        )
        if found is None:
            raise OperatorsApiError(f"{method} {where.path}: no such operators' route")
        route, function = found
        names = route.template.strip("/").split("/")
        values = where.path.strip("/").split("/")
        request = func.HttpRequest(
            method=method,
            url=f"http://localhost/api{path}",
            headers={"host": "localhost", "content-type": "application/json"},
            params=dict(urllib.parse.parse_qsl(where.query)),
            route_params={
                n[1:-1]: urllib.parse.unquote(v)
                for n, v in zip(names, values, strict=True)
                if n.startswith("{")
            },
            body=b"" if body is None else json.dumps(body).encode(),
        )
        response = function.get_user_function()(request, None)
        raw = response.get_body()
        return response.status_code, json.loads(raw) if raw else None
