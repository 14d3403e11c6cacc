"""Words that are true (issue 92 item 7): an event whose version could not be read is never
"vNone" -- not in its audit line, `quarantine list`, nor its journey (M8; seen: "ticket t-1 vNone"
in all three before the change)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from conftest import TicketWorld, body

from cosmos_outbox.documents import EVENT_TYPE
from cosmos_outbox_operators.cli import main


def unreadable(world: TicketWorld) -> str:
    """A ticket's event whose version is no number, relayed: quarantined; its id."""
    assert world.client.request("POST", "tickets", body={"title": "T"}).status_code == 201
    [doc] = world.memory.store.of_type(EVENT_TYPE)
    doc["version"] = "seven"
    world.memory.store.put(doc)
    world.relay(world.memory.store.of_type(EVENT_TYPE))
    return str(doc["id"])


def test_an_event_of_no_version_is_never_vnone(
    caplog: pytest.LogCaptureFixture, capsys: Any
) -> None:
    world = TicketWorld(max_payload_bytes=0)
    caplog.set_level(logging.WARNING, logger="cosmos_outbox.operators")
    event = unreadable(world)
    assert main(["quarantine", "list"], outbox=world.outbox) == 0
    listed = capsys.readouterr().out
    journey = body(world.client.request("GET", f"outbox/journey/events/{event}"))
    discarded = world.client.request(
        "DELETE", f"outbox/quarantine/{event}", params={"reason": "malformed"}
    )
    assert discarded.status_code == 200, discarded.get_body()
    audit = [r.getMessage() for r in caplog.records if getattr(r, "outbox.audit", None)]
    said = {"quarantine list": listed, "journey": journey["summary"], "audit": "\n".join(audit)}
    assert all("vNone" not in text and " None " not in text for text in said.values()), said
    assert event in listed and audit, said
