"""The MCP server over Streamable HTTP, as an ASGI app (`mcp_app`) an app mounts beside its routes
(a FastAPI app on `func.AsgiFunctionApp`: `app.mount("/outbox/mcp", mcp_app(outbox))`), through
the console's signed-in door: on a local host only its own names (`guard.check_local_host`), no
action from another site's page (`guard.check_same_site`: the Origin the MCP specification asks a
server to check), a principal App Service Authentication signed in and believed here, with the
operator role (`doors.admit_signed_in`: 401, 403, the refusal logged), and its token validated by
App Service Authentication, or the console page's token (`guard.check_action`: an MCP client
sends a bearer token, never the browser's session cookie). Each request is its own stateless
MCP session answered with JSON (no session kept between requests: any instance answers any
request), run as the signed-in operator."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any

from cosmos_outbox.http import HttpProblemError, sign_in_trust
from cosmos_outbox_operators._console.doors import RefusedError, admit_signed_in
from cosmos_outbox_operators._console.guard import CrossSiteError, check_action, check_local_host
from cosmos_outbox_operators._console.identity import OPERATOR_ROLE, bearer_validated
from cosmos_outbox_operators.mcp._server import Caller, mcp_server

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext

__all__ = ["mcp_app"]

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

#: Where the door leaves the caller it admitted, in the request's ASGI scope.
CALLER_KEY = "cosmos_outbox.caller"


def _headers(scope: Scope) -> dict[str, str]:
    """The request's headers by lower-case name (a repeated one: its first)."""
    found: dict[str, str] = {}
    for name, value in scope.get("headers", []):
        found.setdefault(name.decode("latin-1").lower(), value.decode("latin-1"))
    return found


def admit(method: str, headers: dict[str, str], *, role: str) -> Caller:
    """The caller the console's signed-in door admits (see the module), or the refusal
    (HttpProblemError: 401, 403)."""
    try:
        check_local_host(method, headers)
        trust = sign_in_trust()
        actor = admit_signed_in(headers, role=role, trust=trust)
        check_action(method, headers, bearer_validated=bearer_validated(headers, trust))
    except CrossSiteError as exc:
        raise RefusedError(403, "Forbidden", str(exc)) from None
    return Caller(actor, frozenset({role}), reads_need_role=True)


async def _refuse(send: Send, refused: HttpProblemError) -> None:
    problem = refused.problem.model_dump(exclude_none=True)
    body = json.dumps(problem, separators=(",", ":")).encode()
    headers = [(b"content-type", b"application/problem+json")]
    headers += [(k.lower().encode(), v.encode()) for k, v in refused.headers.items()]
    await send({"type": "http.response.start", "status": problem["status"], "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _scope_caller(ctx: ServerRequestContext[Any, Any]) -> Caller:
    request = ctx.request
    caller = request.scope.get(CALLER_KEY) if request is not None else None
    if not isinstance(caller, Caller):  # never past the door: a request it did not admit
        raise RuntimeError("an MCP request reached the server without passing the door")
    return caller


def mcp_app(outbox: Any, *, operator_role: str = OPERATOR_ROLE) -> App:
    """The MCP server of `outbox` over Streamable HTTP (see the module), admitting operators
    with `operator_role` (`Operators(operator_role=...)`'s)."""
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    server = mcp_server(outbox, caller=_scope_caller, operator_role=operator_role)

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":  # nothing to start: each request is a session
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        try:
            caller = admit(scope.get("method", "GET"), _headers(scope), role=operator_role)
        except HttpProblemError as refused:
            await _refuse(send, refused)
            return
        manager = StreamableHTTPSessionManager(app=server, json_response=True, stateless=True)
        async with manager.run():
            await manager.handle_request({**scope, CALLER_KEY: caller}, receive, send)

    return app
