"""The operators' operations served in-process on the stores (the command line runs them on the
stores, the routes serve the console): the operators' routes' own handlers
(`cosmos_outbox_operators._routes`, over `cosmos_outbox.operations`) called by their operation's
name, with no host and no HTTP, so that every command answers what the route answers (its JSON, its
problem documents, its request checks) and no command exists only here -- but the bulk operations'
worker (`work`) and the quarantine's adoption (`adopt_quarantine`: a backfill run once on upgrading,
which no route serves), the operations called as the command line. The outbox is the app's,
built from its settings (the environment's, and a local.settings.json's where given: the environment
wins), or one an app's own tool hands over. The actions are audited as "the command line as
<user>@<machine>" and can do what the settings' credentials allow."""

from __future__ import annotations

import getpass
import json
import re
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import azure.functions as func

from cosmos_outbox.http import http_routes
from cosmos_outbox.operations import Actor

if TYPE_CHECKING:
    from cosmos_outbox import Outbox

__all__ = ["AppProblemError", "DirectApi", "command_line_actor"]


class AppProblemError(Exception):
    """An operation answered an error: its status and problem document."""

    def __init__(self, status: int, problem: Any) -> None:
        super().__init__(status)
        self.status, self.problem = status, problem

    def line(self) -> str:
        problem = self.problem if isinstance(self.problem, dict) else {}
        fields = "; ".join(
            f"{e.get('field')}: {e.get('message')}"
            for e in problem.get("errors") or []
            if isinstance(e, dict)
        )
        parts = (f"{self.status} {problem.get('title', '')}".strip(), problem.get("detail"), fields)
        return ": ".join(p for p in parts if p)


def command_line_actor() -> Actor:
    """Who acts through the command line: the user and the machine it runs as."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown user"
    return Actor("command line", name=f"{user}@{socket.gethostname()}")


class DirectApi:
    """The operators' operations of `outbox` (a sync one), served in-process, each call within
    `bound_seconds` (default: the outbox's bound)."""

    def __init__(self, outbox: Outbox, *, bound_seconds: float | None = None) -> None:
        from cosmos_outbox_operators._part import Operators, routes_blueprint

        #: the outbox its operations are served on (the MCP server serves it too)
        self.outbox = outbox
        app = func.FunctionApp()
        app.register_functions(
            routes_blueprint(
                outbox.operations,
                asynchronous=False,
                options=Operators(console=False),
                actor=command_line_actor(),
                bound_seconds=outbox.bound_seconds if bound_seconds is None else bound_seconds,
            )
        )
        indexed = app.get_functions()
        functions = {f.get_function_name(): f.get_user_function() for f in indexed}
        self._routes = {r.function: (r, functions[r.function]) for r in http_routes(indexed)}

    def work(self, budget_seconds: float) -> int:
        """One tick of the bulk operations' worker in this process (as a relay host runs it,
        holding an operation no other host holds), as the command line; the steps taken."""
        from cosmos_outbox.bridge import run_sync
        from cosmos_outbox.operations import acting_as

        with acting_as(command_line_actor()):
            steps: int = run_sync(self.outbox.operations().bulk.work(budget_seconds=budget_seconds))
        return steps

    def adopt_quarantine(self, progress: Callable[[Any], object] | None = None) -> Any:
        """The quarantine's records kept as failure records where they are not
        (`Operations.quarantine.adopt`), as the command line: the JSON of its answer
        (`Adopted`), `progress` given the JSON of its counts after each page; AppProblemError
        (409) when it is refused (failure records not kept)."""
        from cosmos_outbox.aggregates import DomainError
        from cosmos_outbox.bridge import run_sync
        from cosmos_outbox.operations import acting_as

        try:
            with acting_as(command_line_actor()):
                adopted = run_sync(
                    self.outbox.operations().quarantine.adopt(
                        progress=None
                        if progress is None
                        else lambda a: progress(a.model_dump(mode="json", by_alias=True))
                    )
                )
        except DomainError as refused:
            raise AppProblemError(
                409, {"title": "Conflict", "status": 409, "detail": str(refused)}
            ) from refused
        return adopted.model_dump(mode="json", by_alias=True)

    def call(self, operation: str, body: Any = None, **parameters: Any) -> Any:
        """The JSON answer of `operation` (its handler's name: `outbox_status`, ...) given
        `parameters` (its route's by name, the rest its query; None left out) and the JSON
        `body`; AppProblemError when it answers an error."""
        route, function = self._routes[operation]
        names = set(re.findall(r"{(\w+)}", route.template))
        given = {k: str(v) for k, v in parameters.items() if v is not None}
        request = func.HttpRequest(
            method=min(route.methods),
            url=f"http://localhost/api/{route.template}",
            headers={"host": "localhost", "content-type": "application/json"},
            params={k: v for k, v in given.items() if k not in names},
            route_params={k: v for k, v in given.items() if k in names},
            body=b"" if body is None else json.dumps(body).encode(),
        )
        response = function(request, None)
        raw = response.get_body()
        answer = json.loads(raw) if raw else None
        if response.status_code >= 400:
            raise AppProblemError(response.status_code, answer)
        return answer
