"""`cosmos-outbox mcp`: the operators' MCP server over stdio (`cosmos_outbox_operators.mcp`), on
the app's stores with its settings, for an agent whose MCP configuration starts it. It needs the
`mcp` extra; without it, one line says what to install."""

from __future__ import annotations

import argparse
import functools
import sys
from typing import TYPE_CHECKING, TypeAlias

from cosmos_outbox_operators.cli._output import DONE, FAILED, Output

if TYPE_CHECKING:
    from cosmos_outbox_operators.cli._direct import DirectApi

__all__ = ["mcp_command", "serve_mcp"]

Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
#: What to install when the MCP SDK is not there.
INSTALL = 'pip install "cosmos-outbox-operators[mcp]"'


def mcp_command(commands: Commands, flags: argparse.ArgumentParser) -> None:
    """`mcp [--settings FILE] [--operator]`."""
    command = commands.add_parser(
        "mcp", help="the operators' tools for an agent: an MCP server on stdin and stdout"
    )
    command.add_argument(
        "--settings",
        metavar="FILE",
        default=argparse.SUPPRESS,
        help="a local.settings.json read too (the environment wins)",
    )
    command.add_argument(
        "--operator",
        action="store_true",
        help="the agent may act (the operator role); without it, it reads only: each action "
        "is refused and audited",
    )


def serve_mcp(api: DirectApi, args: argparse.Namespace, out: Output) -> int:
    """Serve until the agent's client closes stdin."""
    try:
        import anyio

        from cosmos_outbox_operators.mcp import serve_stdio
    except ModuleNotFoundError as missing:
        if (missing.name or "").partition(".")[0] not in ("mcp", "mcp_types", "anyio"):
            raise
        print(f"error: the MCP server needs the mcp extra: {INSTALL}", file=sys.stderr)
        return FAILED
    anyio.run(functools.partial(serve_stdio, api.outbox, operator=args.operator))
    return DONE
