"""The MCP server over the tool table (`_tools.TOOLS`), on the MCP SDK's low-level `Server`: it
lists each tool with its schemas and hints, and calls one as the operators' routes call their use
case -- as the caller the door admitted (`Caller`: the actor every audit line names, and their
roles), bounded (`cosmos_outbox.http.bounded`: a store or a broker that hangs is an error within
the outbox's bound, never a wait on the SDKs' timeouts), its answer the model's JSON (the structured
content, and the same as text). An action needs the operator role, and a destructive one the
preview's token (`cosmos_outbox_operators._preview`); a refusal is an error the agent reads and
one audit line naming who was refused. Errors the use cases raise are answered as the routes'
problems say them (status, title, detail), as the tool's error."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import anyio.to_thread
import mcp_types as types
from mcp.server.lowlevel import Server
from pydantic import BaseModel, ValidationError

from cosmos_outbox.aggregates import DomainError
from cosmos_outbox.errors import (
    DependencyUnavailableError,
    NotFoundError,
    OutboxError,
    TransientStoreError,
)
from cosmos_outbox.http import HttpProblemError
from cosmos_outbox.http.bounded import await_bounded, run_bounded
from cosmos_outbox.operations import Actor, Operations, acting_as
from cosmos_outbox_operators._console.identity import OPERATOR_ROLE
from cosmos_outbox_operators.mcp._tools import TOOLS, Tool, tool_named

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext

__all__ = ["Caller", "CallerOf", "mcp_server"]

logger = logging.getLogger("cosmos_outbox.operators")
T = TypeVar("T")

#: What the server tells an agent on connecting.
INSTRUCTIONS = (
    "On call for a cosmos-outbox app: read the failures (list_groups, peek_dead_letter, "
    "show_quarantined, event_journey, outbox_status) and act on them through bulk operations. "
    "To retry or discard a failure group, call preview_group first and tell what it will do; "
    "then act_on_group with the same arguments and its previewToken; follow the operation with "
    "show_operation until it is done (a paused one: continue_operation or cancel_operation). "
    "Actions need the operator role; each is audited with who acted."
)


@dataclass(frozen=True)
class Caller:
    """Who calls, as the door admitted them: the actor the audit lines name, their roles, and
    whether a read needs the operator role too (the signed-in door: as the console; the command
    line's reads need none, as `cosmos-outbox status` needs none)."""

    actor: Actor
    roles: frozenset[str] = frozenset()
    reads_need_role: bool = False


#: The caller of one request (stdio: one for the process; HTTP: the request's).
CallerOf = Callable[["ServerRequestContext[Any, Any]"], Caller]


def refusal(caller: Caller, tool: Tool, role: str) -> str | None:
    """Why `caller` may not call `tool` (None: they may)."""
    if (tool.acts or caller.reads_need_role) and role not in caller.roles:
        what = "act" if tool.acts else "read"
        return (
            f"{caller.actor} has no role {role}, which is needed to {what} here: an owner of "
            "the app grants it (the app role in Entra ID; for the command line's MCP server, "
            "--operator in the agent's MCP configuration)"
        )
    return None


def _audit_refusal(caller: Caller, tool: Tool, why: str) -> None:
    """One audit line: who was refused which tool, and why."""
    actor = caller.actor
    logger.warning(
        "outbox audit: mcp.refused %s by %s: %s",
        tool.name,
        actor,
        why,
        extra={**actor.log_fields(), "outbox.audit": "mcp.refused", "outbox.tool": tool.name},
    )


async def _bounded(
    outbox: Any, actor: Actor, work: Callable[[Operations], Coroutine[Any, Any, T]]
) -> T:
    """`work` on the outbox's operations as `actor`, within the routes' bound (the outbox's,
    `Outbox(bound_seconds=...)`): on the event loop for an async outbox; for a sync one, on a
    thread (its calls never suspend)."""
    seconds = outbox.bound_seconds
    if outbox.asynchronous:
        with acting_as(actor):
            return await await_bounded(work(outbox.operations()), what="mcp tool", seconds=seconds)

    def run() -> T:
        from cosmos_outbox.bridge import run_sync

        with acting_as(actor):
            return run_bounded(
                lambda: run_sync(work(outbox.operations())), what="mcp tool", seconds=seconds
            )

    return await anyio.to_thread.run_sync(run)


def problem_text(exc: Exception) -> str:
    """An error a call raised, as the routes' problem says it ("404 Not Found: ...")."""
    match exc:
        case HttpProblemError():
            problem = exc.problem
            return f"{problem.status} {problem.title}: {problem.detail}"
        case ValidationError():
            fields = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
                for e in exc.errors()
            )
            return f"400 Bad Request: the arguments are not valid: {fields}"
        case NotFoundError():
            return f"404 Not Found: no such {exc.aggregate_type} ({exc})"
        case DomainError():
            return f"409 Conflict: {exc}"
        case DependencyUnavailableError() | TransientStoreError():
            return f"503 Service Unavailable: {exc}; retry later"
        case ValueError():
            return f"400 Bad Request: {exc}"
        case OutboxError():
            return f"500 {type(exc).__name__}: {exc}"
    logger.error("mcp tool failed", exc_info=exc)
    return "500 Internal Server Error: an unexpected error occurred"


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)


def _answer(model: BaseModel) -> types.CallToolResult:
    data = model.model_dump(mode="json", by_alias=True)
    text = json.dumps(data, ensure_ascii=False)
    return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=data)


def tool_listing(tool: Tool) -> types.Tool:
    """How `tool` is listed: its schemas (the models'), and its hints."""
    return types.Tool(
        name=tool.name,
        description=tool.description,
        input_schema=tool.arguments.model_json_schema(by_alias=True),
        output_schema=tool.answer.model_json_schema(by_alias=True, mode="serialization"),
        annotations=types.ToolAnnotations(
            read_only_hint=not tool.acts,
            destructive_hint=tool.destructive if tool.acts else None,
            idempotent_hint=False if tool.acts else None,
            open_world_hint=False,
        ),
    )


class _Calls:
    """The server's `tools/call`: a tool's call as `caller_of` the request says (module)."""

    def __init__(self, outbox: Any, caller_of: CallerOf, role: str) -> None:
        self._outbox, self._caller_of, self._role = outbox, caller_of, role

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        tool = tool_named(params.name)
        if tool is None:
            return _error(f"404 Not Found: no tool {params.name!r}")
        caller = self._caller_of(ctx)
        if (why := refusal(caller, tool, self._role)) is not None:
            _audit_refusal(caller, tool, why)
            return _error(f"403 Forbidden: {why}")
        try:
            arguments = tool.arguments.model_validate(
                params.arguments or {}, by_alias=True, by_name=False
            )
            if (stale := await self._unconfirmed(tool, arguments, caller)) is not None:
                _audit_refusal(caller, tool, stale)
                return _error(f"409 Conflict: {stale}")
            answer = await _bounded(
                self._outbox, caller.actor, lambda ops: tool.call(ops, arguments)
            )
        except Exception as exc:
            return _error(problem_text(exc))
        return _answer(answer)

    async def _unconfirmed(self, tool: Tool, arguments: Any, caller: Caller) -> str | None:
        """Why `arguments` are not confirmed by their preview's token (None: they are, or
        `tool` needs none): the preview is run again, as the action starts, for the same
        decision; its token must be the one given."""
        preview = tool_named(tool.preview) if tool.preview else None
        if preview is None:
            return None
        given = arguments.model_dump(mode="json", by_alias=True, exclude_none=True)
        token = given.pop("previewToken")
        decision = preview.arguments.model_validate(given, by_alias=True, by_name=False)
        seen = await _bounded(self._outbox, caller.actor, lambda ops: preview.call(ops, decision))
        if getattr(seen, "preview_token", None) == token:
            return None
        return (
            f"the previewToken is not this decision's, as {preview.name} answers it now: the "
            f"arguments differ from the preview's, or what it touches changed since; call "
            f"{preview.name} again with these arguments and confirm what it says"
        )


def mcp_server(
    outbox: Any, *, caller: Caller | CallerOf, operator_role: str = OPERATOR_ROLE
) -> Server[Any]:
    """The MCP server of `outbox`'s operations (a sync or an async `Outbox`), its tools
    `TOOLS`, called as `caller` (one, or a function of the request's context), an action
    needing `operator_role`."""
    from cosmos_outbox_operators import __version__

    caller_of: CallerOf = caller if callable(caller) else (lambda ctx: caller)
    listing = types.ListToolsResult(tools=[tool_listing(t) for t in TOOLS])

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return listing

    return Server(
        "cosmos-outbox-operators",
        version=__version__,
        title="cosmos-outbox: on call",
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=_Calls(outbox, caller_of, operator_role),
    )
