"""Words that are true (issue 92 item 7): an event whose version could not be read is never
"vNone" -- not in its audit line, `quarantine list`, nor its journey (M8; seen: "ticket t-1 vNone"
in all three before the change); a fate the rules leave unsettled is "unknown", with a reason
that is true (M12)."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from conftest import TicketWorld, body

from cosmos_outbox.documents import EVENT_TYPE
from cosmos_outbox.ports import Rule, SqlFilter
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


def test_a_fate_the_rules_do_not_settle_is_unknown_and_says_why_truly() -> None:
    """M12: a rule ordering texts was explained as "C# does not order texts" (no reason anyone
    could check: what is unknown is how Service Bus orders them) and reported by the re-drive as
    "it may or may not", where every other answer says "unknown". One word, one true reason."""
    world = TicketWorld(subscriptions={"orders": None})
    ordering = Rule("ordered", SqlFilter("aggregateType > 'a'"))
    world.memory.target_rules.subscriptions = {"orders": ()}
    world.memory.target_rules.rules = {"orders": (ordering,)}
    assert world.client.request("POST", "tickets", body={"title": "T"}).status_code == 201
    world.relay(world.memory.store.of_type(EVENT_TYPE))
    reply = world.client.request(
        "POST", "outbox/redrive/preview", body={"since": "2000-01-01T00:00:00Z"}
    )
    said = json.dumps(body(reply))
    assert reply.status_code == 200, said
    assert "may or may not" not in said and "C# does not order" not in said, said
    assert "1 unknown (" in said and "how Service Bus orders texts is not documented" in said, said


def test_a_reason_its_description_repeats_is_said_once() -> None:
    """M6: a dead letter whose reason is the exception's type and whose description starts with
    it ("KeyError", "KeyError: 'customerId'") was grouped as "KeyError: KeyError: '…'"."""
    world = TicketWorld(subscriptions={"billing": None})
    letters = world.memory.dead_letters
    letters.dead_letter("billing", b"{}", reason="KeyError", description="KeyError: 'customerId'")
    letters.dead_letter("billing", b"{}", reason="TimeoutError", description="the read timed out")
    groups = body(world.client.request("GET", "outbox/groups"))["groups"]
    assert sorted((g["cause"], g["errorType"]) for g in groups) == [
        ("KeyError: '…'", "KeyError"),
        ("TimeoutError: the read timed out", "TimeoutError"),
    ], groups
