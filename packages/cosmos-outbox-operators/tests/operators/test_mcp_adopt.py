"""The quarantine's adoption as an MCP tool (`adopt_quarantine`), met by the MCP SDK's own client
over Streamable HTTP through the console's signed-in door, as test_mcp.py meets the others: an
agent with the operator role adopts the quarantined events set aside before failed messages were
kept as data, after which `list_groups` counts them from the summaries; adopting again keeps
nothing twice. The tool is an action: a caller without the operator role is refused it."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator

import pytest
from mcp import Client
from recovery_world import RecoveryWorld

from cosmos_outbox.documents import EVENT_TYPE, FAILED_MESSAGE_TYPE, read_feed
from cosmos_outbox.operations import Actor
from cosmos_outbox.relay import OutboxRecord, Quarantine
from cosmos_outbox_operators import OPERATOR_ROLE
from cosmos_outbox_operators.mcp import Caller, mcp_server
from cosmos_outbox_testing import run_sync
from operators.test_mcp import OPERATOR, audit_lines, call, http_session, run
from operators.test_mcp import world as signed_in_world  # noqa: F401  # the door's settings


@pytest.fixture
def world(signed_in_world: RecoveryWorld) -> Iterator[RecoveryWorld]:  # noqa: F811
    """test_mcp.py's world, its failed messages kept as data, with two events quarantined
    before they were (no failure record)."""
    signed_in_world.memory.services = dataclasses.replace(
        signed_in_world.memory.services, failure_ingest=True
    )
    signed_in_world.publish("w1", "StockAdded", "StockAdded")
    stored = signed_in_world.memory.store.of_type(EVENT_TYPE)
    quarantine = Quarantine(signed_in_world.memory.store)  # no failure records: as before
    for event in read_feed(stored):
        assert isinstance(event, OutboxRecord)
        run_sync(quarantine.put(event, reason="message of 70000 bytes is too large"))
    yield signed_in_world


def test_an_operator_agent_adopts_the_quarantine_and_its_groups_are_exact(
    world: RecoveryWorld, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="cosmos_outbox.operators")

    async def on_call() -> None:
        async with http_session(world, OPERATOR) as session:
            listed = {t.name: t for t in (await session.list_tools()).tools}
            tool = listed["adopt_quarantine"]
            assert tool.annotations is not None and tool.annotations.read_only_hint is False
            adopted = await call(session, "adopt_quarantine")
            assert adopted == {"read": 2, "new": 2, "of": 2, "healed": 0, "settled": 0}
            caplog.clear()
            [group] = (await call(session, "list_groups"))["groups"]
            assert (group["source"], group["count"]) == ("quarantine", 2)
            # from the summaries: the quarantine not read, no warning
            assert not [r for r in caplog.records if "set aside before" in r.getMessage()]
            again = await call(session, "adopt_quarantine")
            assert (again["read"], again["new"]) == (2, 0)

    run(on_call)
    assert len(world.memory.store.of_type(FAILED_MESSAGE_TYPE)) == 2
    [line] = audit_lines(caplog, "quarantine.adopt")  # the second adoption's
    assert "by agent-7@example.com (id oid-agent-7)" in line and "0 kept" in line


def test_a_caller_without_the_operator_role_is_refused_and_nothing_is_kept(
    world: RecoveryWorld, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="cosmos_outbox.operators")
    # the command line's MCP server started without --operator: reads, never acts
    reader = Caller(Actor("command line", "ada@vm"))

    async def on_call() -> None:
        async with Client(mcp_server(world.outbox, caller=reader)) as client:
            result = await client.call_tool("adopt_quarantine", {})
            assert result.is_error
            text = "".join(getattr(c, "text", "") for c in result.content)
            assert text.startswith("403 Forbidden") and f"no role {OPERATOR_ROLE}" in text

    run(on_call)
    assert world.memory.store.of_type(FAILED_MESSAGE_TYPE) == []
    [line] = audit_lines(caplog, "mcp.refused")
    assert "adopt_quarantine by the command line as ada@vm" in line
