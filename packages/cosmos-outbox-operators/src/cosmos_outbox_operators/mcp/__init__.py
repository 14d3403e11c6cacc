"""The operators' MCP server: the console's reads and actions as tools for an agent, on the MCP
SDK (install the extra: `pip install "cosmos-outbox-operators[mcp]"`), under the console's
identity, roles and audit. Its tools are one table (`TOOLS`); it runs over stdio (`cosmos-outbox
mcp --settings FILE`, which an agent's MCP configuration starts; `serve_stdio`), or over
Streamable HTTP as an ASGI app behind the console's signed-in door (`mcp_app`); `mcp_server`
is the SDK's server itself, for another transport.

    from cosmos_outbox_operators.mcp import mcp_app
    fastapi_app.mount("/outbox/mcp", mcp_app(outbox))
"""

from __future__ import annotations

from cosmos_outbox_operators.mcp._http import mcp_app
from cosmos_outbox_operators.mcp._server import Caller, mcp_server
from cosmos_outbox_operators.mcp._stdio import serve_stdio
from cosmos_outbox_operators.mcp._tools import TOOLS, Tool

__all__ = ["TOOLS", "Caller", "Tool", "mcp_app", "mcp_server", "serve_stdio"]
