"""The documented line, `cosmos-outbox mcp --settings local.settings.json`, as an agent's MCP
client starts it: the installed command, on the session's stack (fixtures/funcstack.json) with
the app's settings, met by the MCP SDK's own client over stdio. It lists the tools and reads the
stores; without `--operator` an action is refused and its audit line is on stderr; with it, the
action reaches the stores (a group that is not there: 404, nothing started)."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("funcstack")

from deadlines import SHORT, scaled
from mcp import ClientSession, StdioServerParameters, stdio_client

from cosmos_outbox_operators.mcp import TOOLS

from .test_cli_direct import settings, settings_file  # noqa: F401  # the app's settings file

pytestmark = pytest.mark.integration

#: A group id of the right form that names no group.
NO_GROUP = "0123456789ab"


@asynccontextmanager
async def agent(settings_path: Path, *flags: str, errlog: Any) -> AsyncIterator[ClientSession]:
    """The session of an agent whose MCP configuration runs `cosmos-outbox mcp --settings
    <file> FLAGS` (the installed command, with no settings of its own in its environment)."""
    command = shutil.which("cosmos-outbox", path=str(Path(sys.executable).parent))
    assert command is not None, "cosmos-outbox is not installed beside this Python"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COSMOS", "Cosmos"))}
    server = StdioServerParameters(
        command=command, args=["mcp", "--settings", str(settings_path), *flags], env=env
    )
    async with (
        stdio_client(server, errlog=errlog) as (read, write),
        ClientSession(read, write, read_timeout_seconds=scaled(120)) as session,
    ):
        with anyio.fail_after(SHORT):
            await session.initialize()
        yield session


def test_the_installed_command_serves_the_tools_on_the_stores(
    settings_file: Path,  # noqa: F811  # the fixture imported above
    tmp_path: Path,
) -> None:
    log = tmp_path / "stderr.log"
    seen: dict[str, Any] = {}

    async def on_call() -> None:
        with log.open("w") as errlog:
            async with agent(settings_file, errlog=errlog) as session:
                seen["tools"] = [t.name for t in (await session.list_tools()).tools]
                status = await session.call_tool("outbox_status", {})
                seen["status"] = status.structured_content
                groups = await session.call_tool("list_groups", {})
                seen["groups"] = groups.structured_content
                refused = await session.call_tool(
                    "act_on_group",
                    {"groupId": NO_GROUP, "action": "retry", "previewToken": "pv1." + "a" * 22},
                )
                seen["refused"] = refused
        with log.open("a") as errlog:
            async with agent(settings_file, "--operator", errlog=errlog) as session:
                seen["acted"] = await session.call_tool(
                    "act_on_group",
                    {"groupId": NO_GROUP, "action": "retry", "previewToken": "pv1." + "a" * 22},
                )

    anyio.run(on_call)
    assert seen["tools"] == [t.name for t in TOOLS]
    assert seen["status"]["pending"] == 0 and seen["groups"]["groups"] == []
    refused = seen["refused"]
    assert refused.is_error and refused.content[0].text.startswith(
        "403 Forbidden: the command line as "
    )
    stderr = log.read_text("utf-8")
    assert "outbox audit: mcp.refused act_on_group by the command line as " in stderr, stderr
    acted = seen["acted"]
    assert acted.is_error and acted.content[0].text.startswith("404 Not Found"), acted.content
