"""The MCP server over stdio, as the command line runs it (`cosmos-outbox mcp --settings FILE`):
an agent's MCP client starts it as a process and speaks on its stdin and stdout (its logs, the
audit lines among them, go to stderr). It runs on the app's stores with the app's settings, as
every command of the command line does, and is the command line to the audit ("the command
line as <user>@<machine> (MCP)"); it may act only when its MCP configuration says so
(`--operator`: the operator role), else reads only, each action refused and audited."""

from __future__ import annotations

from typing import Any

from cosmos_outbox.operations import Actor
from cosmos_outbox_operators._console.identity import OPERATOR_ROLE
from cosmos_outbox_operators.mcp._server import Caller, mcp_server

__all__ = ["serve_stdio", "stdio_caller"]


def stdio_caller(*, operator: bool, role: str = OPERATOR_ROLE) -> Caller:
    """Who the stdio server acts as: the command line's user and machine, through MCP, with
    `role` when `operator`."""
    from cosmos_outbox_operators.cli._direct import command_line_actor

    actor = Actor("command line", name=f"{command_line_actor().name} (MCP)")
    return Caller(actor, frozenset({role}) if operator else frozenset())


async def serve_stdio(outbox: Any, *, operator: bool, role: str = OPERATOR_ROLE) -> None:
    """Serve `outbox`'s operations over this process's stdin and stdout until the client
    closes them."""
    from mcp.server.stdio import stdio_server

    server = mcp_server(outbox, caller=stdio_caller(operator=operator, role=role))
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())
