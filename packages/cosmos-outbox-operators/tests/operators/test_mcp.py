"""The operators' MCP server (`cosmos_outbox_operators.mcp`) met by the MCP SDK's own client
(`mcp.ClientSession`): over Streamable HTTP through the console's signed-in door (`mcp_app`,
in-process on recovery_world.py's app: the test kit's fakes), an agent lists the failure groups,
previews one, retries it with a canary and reads the operation to done, as the operator the door
admitted; without the role, or without the preview's token, nothing starts and the refusal is
audited. Over stdio, `cosmos-outbox mcp` (the command line's `main`, on an app's own outbox in a
process of its own) reads only unless started with `--operator`. The operators' README lists
the tools of the table."""

from __future__ import annotations

import base64
import json
import logging
import os
import re
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from conftest import body
from deadlines import SHORT
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from recovery_world import RecoveryWorld

from cosmos_outbox_operators.mcp import TOOLS, mcp_app
from cosmos_outbox_testing import run_sync

PACKAGE = Path(__file__).resolve().parents[2]
#: App Service Authentication in front, in Azure (not a local host): a bearer token it validated
#: stands for the page's token (`identity.bearer_validated`).
AZURE = {"WEBSITE_AUTH_ENABLED": "True", "OUTBOX_CONSOLE_SIGN_IN": "app-service-authentication"}


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> Iterator[RecoveryWorld]:
    for name, value in AZURE.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("FUNCTIONS_CORETOOLS_ENVIRONMENT", raising=False)
    yield from RecoveryWorld.running()


def principal(*roles: str, name: str = "agent-7@example.com", oid: str = "oid-agent-7") -> str:
    """X-MS-CLIENT-PRINCIPAL as App Service Authentication writes it for an Entra ID token."""
    claims = [
        {"typ": "name", "val": name},
        {"typ": "http://schemas.microsoft.com/identity/claims/objectidentifier", "val": oid},
        *({"typ": "roles", "val": r} for r in roles),
    ]
    payload = {"auth_typ": "aad", "claims": claims, "name_typ": "name", "role_typ": "roles"}
    return base64.b64encode(json.dumps(payload).encode()).decode()


def agent(*roles: str) -> dict[str, str]:
    """An agent's requests as App Service Authentication hands them on: its bearer token
    validated, its principal named (no browser session, no page token)."""
    return {"authorization": "Bearer token", "x-ms-client-principal": principal(*roles)}


OPERATOR = agent("Outbox.Operator")


@asynccontextmanager
async def http_session(
    world: RecoveryWorld, headers: dict[str, str]
) -> AsyncIterator[ClientSession]:
    """The SDK's client over Streamable HTTP to `mcp_app` (in-process, through ASGI)."""
    transport = httpx2.ASGITransport(app=mcp_app(world.outbox))
    client = httpx2.AsyncClient(transport=transport, base_url="http://localhost", headers=headers)
    async with (
        client,
        streamable_http_client("http://localhost/outbox/mcp", http_client=client) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def run(test: Callable[[], Awaitable[None]]) -> None:
    anyio.run(test)


async def call(session: ClientSession, tool: str, **arguments: Any) -> Any:
    """A tool's structured answer (the test fails on an error answer, naming it)."""
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, result.content
    return result.structured_content


async def refused(session: ClientSession, tool: str, **arguments: Any) -> str:
    """The text of a tool's error answer."""
    result = await session.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    return "".join(getattr(c, "text", "") for c in result.content)


def dead_lettered(world: RecoveryWorld, warehouses: int) -> list[str]:
    """Each warehouse's two events dead-lettered at `projections` by its subscriber: one
    failure group of 2 x `warehouses`; their event ids."""
    ids: list[str] = []
    for n in range(warehouses):
        ids += world.publish(f"w{n}", "StockAdded", "StockAdded")
    world.relay()
    world.deliver_new(skip=set(ids))
    return ids


async def work(world: RecoveryWorld) -> None:
    """One tick of the relay's hosts' operations worker (on a thread: it runs no loop)."""

    def tick() -> None:
        run_sync(world.outbox.wiring().operations().bulk.work(budget_seconds=60))

    await anyio.to_thread.run_sync(tick)


def audit_lines(caplog: pytest.LogCaptureFixture, action: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if getattr(r, "outbox.audit", None) == action]


def test_an_agent_previews_a_group_and_retries_it_with_a_canary_to_done(
    world: RecoveryWorld, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="cosmos_outbox.operators")
    ids = dead_lettered(world, 6)

    async def on_call() -> None:
        async with http_session(world, OPERATOR) as session:
            listed = await session.list_tools()
            assert [t.name for t in listed.tools] == [t.name for t in TOOLS]
            [group] = (await call(session, "list_groups"))["groups"]
            assert (group["source"], group["count"]) == ("dead letters", 12)
            decision = {"groupId": group["id"], "action": "retry", "canary": 3}
            decision["canaryWaitSeconds"] = 3600
            preview = await call(session, "preview_group", **decision)
            assert (preview["previewed"], preview["matching"]) == (True, 12)
            assert world.memory.dead_letters.sent == []  # a preview sends nothing

            # no token, or another decision's: refused, nothing started
            assert "previewToken" in await refused(session, "act_on_group", **decision)
            other = {**decision, "canary": 0, "previewToken": preview["previewToken"]}
            assert "409 Conflict" in await refused(session, "act_on_group", **other)
            assert (await call(session, "list_operations"))["operations"] == []

            confirmed = {**decision, "previewToken": preview["previewToken"]}
            operation = await call(session, "act_on_group", **confirmed)
            assert (operation["state"], operation["canary"]) == ("created", 3)
            assert operation["who"] == "agent-7@example.com (id oid-agent-7)"

            await work(world)  # the canary sent; the rest waits until it is seen applied
            shown = await call(session, "show_operation", operationId=operation["id"])
            assert (shown["state"], shown["done"]) == ("canary", 3)
            for sent in [o for _, o in world.memory.dead_letters.sent]:
                world.deliver(sent)
            await work(world)
            shown = await call(session, "show_operation", operationId=operation["id"])
            assert (shown["state"], shown["done"], shown["failed"]) == ("done", 12, 0)

    run(on_call)
    sent = [o for _, o in world.memory.dead_letters.sent]
    assert sorted(o.application_properties["cloudEvents_id"] for o in sent) == sorted(ids)
    # the operation's audit line names the agent the door admitted
    [line] = audit_lines(caplog, "operations.groups.retry")
    assert "by agent-7@example.com (id oid-agent-7)" in line and "12 of 12 done" in line
    # the refused attempts: one line each, naming who was refused
    assert len(audit_lines(caplog, "mcp.refused")) == 1  # the other decision's token
    assert "act_on_group by agent-7@example.com" in audit_lines(caplog, "mcp.refused")[0]


def test_the_preview_token_is_the_consoles_and_goes_stale_when_the_group_changes(
    world: RecoveryWorld,
) -> None:
    dead_lettered(world, 2)

    async def on_call() -> None:
        async with http_session(world, OPERATOR) as session:
            [group] = (await call(session, "list_groups"))["groups"]
            decision = {"groupId": group["id"], "action": "discard", "reason": "a bad batch"}
            token = (await call(session, "preview_group", **decision))["previewToken"]
            # the console's preview route answers the same token for the same decision
            route = f"outbox/groups/{group['id']}/preview"
            answer = world.call(
                "POST", route, body={k: v for k, v in decision.items() if k != "groupId"}
            )
            assert answer.status_code == 200, answer.get_body()
            assert answer.headers["X-Preview-Token"] == token

            dead_lettered(world, 1)  # two more failures of the same cause join the group
            stale = {**decision, "previewToken": token}
            text = await refused(session, "act_on_group", **stale)
            assert text.startswith("409 Conflict") and "changed since" in text
            assert (await call(session, "list_operations"))["operations"] == []
            fresh = (await call(session, "preview_group", **decision))["previewToken"]
            operation = await call(session, "act_on_group", **decision, previewToken=fresh)
            assert operation["kind"] == "groups.discard"

    run(on_call)


def test_without_the_role_nothing_is_read_or_done_and_the_refusal_is_logged(
    world: RecoveryWorld, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="cosmos_outbox.operators")
    dead_lettered(world, 1)

    async def on_call() -> None:
        async with http_session(world, agent()) as session:
            await call(session, "list_groups")

    with pytest.raises(ExceptionGroup) as refused_at_the_door:
        run(on_call)
    assert refused_at_the_door.group_contains(MCPError, depth=None)
    [line] = [r for r in caplog.records if "refused" in r.getMessage()]
    assert line.getMessage() == (
        "operators' console refused agent-7@example.com (id oid-agent-7): no role Outbox.Operator"
    )
    assert getattr(line, "outbox.actor_id") == "oid-agent-7"
    assert body(world.call("GET", "outbox/operations"))["operations"] == []


def test_an_unsigned_foreign_or_roleless_request_is_refused_at_the_door(
    world: RecoveryWorld,
) -> None:
    app = mcp_app(world.outbox)
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}

    async def post(headers: dict[str, str]) -> httpx2.Response:
        transport = httpx2.ASGITransport(app=app)
        async with httpx2.AsyncClient(transport=transport, base_url="http://localhost") as client:
            return await client.post("/outbox/mcp", json=initialize, headers=headers)

    async def requests() -> None:
        assert (await post({})).status_code == 401  # no one signed in
        roleless = await post(agent())
        assert roleless.status_code == 403
        assert "without the app role Outbox.Operator" in roleless.json()["detail"]
        # a browser's session (its cookie): its principal may be the cookie's, the page's
        # token is needed, which an MCP client has not
        answer = await post({**OPERATOR, "cookie": "AppServiceAuthSession=s"})
        assert answer.status_code == 403 and "X-CSRF-Token" in answer.json()["detail"]
        foreign = await post({**OPERATOR, "origin": "https://evil.example"})
        assert foreign.status_code == 403 and "another origin" in foreign.json()["detail"]

    run(requests)


STDIO_SERVER = """
import sys
sys.path[:0] = {paths!r}
from recovery_world import RecoveryWorld
from cosmos_outbox_operators.cli import main
world = RecoveryWorld()
ids = []
for n in range(3):
    ids += world.publish(f"w{{n}}", "StockAdded", "StockAdded")
world.relay()
world.deliver_new(skip=set(ids))
sys.exit(main(sys.argv[1:], outbox=world.outbox))
"""


@asynccontextmanager
async def stdio_session(*args: str, errlog: Any) -> AsyncIterator[ClientSession]:
    """The SDK's client over stdio to `cosmos-outbox mcp ARGS` run by an app's own tool
    (`main(argv, outbox=...)` on recovery_world.py's app, 6 dead letters of one cause)."""
    paths = [str(PACKAGE / "tests"), *sys.path]
    server = StdioServerParameters(
        command=sys.executable,
        args=["-c", STDIO_SERVER.format(paths=paths), "mcp", *args],
        env=dict(os.environ),
    )
    async with (
        stdio_client(server, errlog=errlog) as (read, write),
        ClientSession(read, write, read_timeout_seconds=SHORT) as session,
    ):
        await session.initialize()
        yield session


def test_over_stdio_the_command_line_reads_and_acts_only_as_an_operator(tmp_path: Path) -> None:
    log = tmp_path / "stderr.log"

    async def on_call(operator: bool) -> dict[str, Any] | str:
        with log.open("w") as errlog:
            flags = ("--operator",) if operator else ()
            async with stdio_session(*flags, errlog=errlog) as session:
                [group] = (await call(session, "list_groups"))["groups"]
                decision = {"groupId": group["id"], "action": "retry"}
                token = (await call(session, "preview_group", **decision))["previewToken"]
                confirmed = {**decision, "previewToken": token}
                if not operator:
                    return await refused(session, "act_on_group", **confirmed)
                return dict(await call(session, "act_on_group", **confirmed))

    answers: list[Any] = []

    async def both() -> None:
        answers.append(await on_call(operator=False))
        read_only_log = log.read_text()
        answers.append(read_only_log)
        answers.append(await on_call(operator=True))

    anyio.run(both)
    refusal, read_only_log, operation = answers
    assert refusal.startswith("403 Forbidden: the command line as ") and "(MCP)" in refusal
    assert "--operator" in refusal
    assert re.search(
        r"outbox audit: mcp.refused act_on_group by the command line as \S+ \(MCP\)",
        read_only_log,
    ), read_only_log
    assert operation["state"] == "created" and operation["who"].endswith("(MCP)")


def test_the_readme_lists_every_tool_of_the_table() -> None:
    readme = (PACKAGE / "README.md").read_text("utf-8")
    listed = re.findall(r"^\| `(\w+)` \| (reads|acts[^|]*) \| (.+) \|$", readme, re.MULTILINE)
    kinds = {(True, True): "acts, needs the preview's token", (True, False): "acts"}
    table = [(t.name, kinds.get((t.acts, t.destructive), "reads"), t.description) for t in TOOLS]
    assert listed == table


def test_without_the_mcp_extra_the_command_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from cosmos_outbox_operators.cli import main

    for name in [
        m
        for m in sys.modules
        if m == "mcp" or m.startswith(("mcp.", "cosmos_outbox_operators.mcp"))
    ]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "mcp", None)
    world = RecoveryWorld()
    try:
        code = main(["mcp"], outbox=world.outbox)
    finally:
        world.close()
    err = capsys.readouterr().err
    assert code == 1
    assert (
        err
        == 'error: the MCP server needs the mcp extra: pip install "cosmos-outbox-operators[mcp]"\n'
    )
