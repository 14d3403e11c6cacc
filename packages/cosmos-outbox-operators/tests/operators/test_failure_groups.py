"""Failure groups (issue 72 item 6), in-process on the test kit's fakes: the quarantined events and
the dead letters grouped by cause (exception type and normalised message, where, event type),
with counts and first/last seen; a group previewed, retried or discarded through the routes (the
same use cases as one row, each event's audit line and the group's), and through the command
line (`--json`)."""

from __future__ import annotations

import json
import logging

import pytest
from conftest import TicketWorld, body, problem, worked
from recovery_world import SUBSCRIPTION, RecoveryWorld

from cosmos_outbox.documents import EVENT_TYPE


def two_causes(world: TicketWorld, count: int) -> dict[str, list[str]]:
    """`count` tickets opened, then half their events made too large for a message and half
    unreadable (a version that is no number), relayed: quarantined, by cause."""
    for i in range(count):
        assert world.client.request("POST", "tickets", body={"title": f"T{i}"}).status_code == 201
    causes: dict[str, list[str]] = {"too large": [], "unreadable": []}
    for n, doc in enumerate(world.memory.store.of_type(EVENT_TYPE)):
        if n % 2:
            doc["body"] = json.dumps({**json.loads(doc["body"]), "title": "x" * (5000 + n)})
            causes["too large"].append(doc["id"])
        else:
            doc["version"] = "seven"
            causes["unreadable"].append(doc["id"])
        world.memory.store.put(doc)
    world.relay(world.memory.store.of_type(EVENT_TYPE))
    return causes


def audit_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if getattr(r, "outbox.audit", None)]


def test_quarantined_events_are_grouped_by_cause_and_acted_on_a_group_at_a_time(
    caplog: pytest.LogCaptureFixture,
) -> None:
    world = TicketWorld(max_payload_bytes=0)
    caplog.set_level(logging.WARNING, logger="cosmos_outbox.operators")
    try:
        causes = two_causes(world, 6)
        groups = body(world.client.request("GET", "outbox/groups"))["groups"]
        assert sorted((g["count"], g["cause"][:20], g["source"]) for g in groups) == [
            (3, "event version: Input", "quarantine"),
            (3, "message of <n> bytes", "quarantine"),
        ]
        large = next(g for g in groups if g["cause"].startswith("message of"))
        assert large["aggregateType"] == "ticket" and large["firstSeen"] <= large["lastSeen"]
        assert set(large["examples"]) <= set(causes["too large"])
        unreadable = next(g for g in groups if g is not large)
        url = "outbox/groups/{}/{}"

        # the cause fixed (larger messages), the group previewed, then retried
        world.memory.publisher.max_batch_bytes = 1024 * 1024
        preview = body(
            world.client.request(
                "POST", url.format(large["id"], "preview"), body={"action": "retry"}
            )
        )
        assert (preview["previewed"], preview["matching"], preview["done"]) == (True, 3, 0)
        assert "3 quarantined event(s) sent again" in preview["subscribersWillSee"]
        assert audit_lines(caplog) == []
        started = world.client.request(
            "POST", url.format(large["id"], "act"), body={"action": "retry", "canary": 0}
        )
        done = worked(world.outbox, world.client, started)
        assert (done["state"], done["done"], done["failed"], done["remaining"]) == (
            "done",
            3,
            0,
            0,
        )
        # a discard needs its reason; then the other group is given up
        refused = problem(
            world.client.request(
                "POST", url.format(unreadable["id"], "act"), body={"action": "discard"}
            ),
            400,
        )
        assert "reason" in json.dumps(refused)
        caplog.clear()
        started = world.client.request(
            "POST",
            url.format(unreadable["id"], "act"),
            body={"action": "discard", "reason": "malformed by an old writer"},
        )
        given_up = worked(world.outbox, world.client, started)
        assert (given_up["state"], given_up["done"]) == ("done", 3)
        lines = audit_lines(caplog)
        assert len([line for line in lines if "quarantine.discard" in line]) == 3
        [group_line] = [line for line in lines if "operations.groups.discard" in line]
        assert unreadable["id"] in group_line and "3 of 3 done" in group_line
        # nothing left to group; a group that is gone is a 404
        assert body(world.client.request("GET", "outbox/groups"))["groups"] == []
        problem(
            world.client.request("POST", url.format(large["id"], "act"), body={"action": "retry"}),
            404,
        )
    finally:
        world.client.close()


def test_dead_letters_are_grouped_per_subscription_and_resubmitted_by_group() -> None:
    world = RecoveryWorld()
    try:
        ids = world.publish("w1", "StockAdded", "StockAdded")
        world.relay()
        world.deliver_new(skip=set(ids))
        [group] = body(world.call("GET", "outbox/groups"))["groups"]
        assert (group["source"], group["entity"], group["count"]) == (
            "dead letters",
            SUBSCRIPTION,
            2,
        )
        # what varies from one event to the next (a quoted value, numbers, ids) is a placeholder
        assert group["cause"] == "MaxDeliveryCountExceeded: handler failed: KeyError '…'"
        assert group["errorType"] == "MaxDeliveryCountExceeded"
        started = world.call(
            "POST", f"outbox/groups/{group['id']}/act", body={"action": "retry", "canary": 0}
        )
        done = worked(world.outbox, world.client, started)
        assert (done["state"], done["done"], done["sent"]) == ("done", 2, 2)
        assert body(world.call("GET", "outbox/groups"))["groups"] == []
    finally:
        world.close()


def test_the_consoles_groups_panel_offers_each_groups_retry_and_discard(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from conftest import console_fragment

    world = TicketWorld(max_payload_bytes=0)
    try:
        two_causes(world, 4)
        html = console_fragment(world.client, "groups", monkeypatch)
        assert html.count("data-group-id=") == 2 and html.count('"action": "retry"') == 2
        assert "message of &lt;n&gt; bytes" in html and 'name="reason" required' in html
    finally:
        world.client.close()


def test_a_group_discard_of_unreadable_events_says_no_notice_is_sent_as_none_is(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 92 item 4 (M1): a group discard of quarantined events whose version cannot be read
    promised "a discard notice (OutboxEventDiscarded) each in its session to every
    subscription", and none was sent. The dialog (the preview), the result (the operation) and
    the audit line say one sentence, of what is sent: no notice, and why; and none is sent."""
    world = TicketWorld(max_payload_bytes=0)
    caplog.set_level(logging.WARNING, logger="cosmos_outbox.operators")
    try:
        two_causes(world, 4)
        groups = body(world.client.request("GET", "outbox/groups"))["groups"]
        unreadable = next(g for g in groups if g["cause"].startswith("event version"))
        sent_before = len(world.memory.publisher.messages)
        request = {"action": "discard", "reason": "malformed by an old writer"}
        url = f"outbox/groups/{unreadable['id']}"
        preview = body(world.client.request("POST", f"{url}/preview", body=request))
        said = preview["subscribersWillSee"]
        assert "OutboxEventDiscarded) each in its session" not in said, said
        no_notice = "2 quarantined event(s) given up with no notice sent"
        assert no_notice in said, said
        done = worked(
            world.outbox, world.client, world.client.request("POST", f"{url}/act", body=request)
        )
        assert (done["state"], done["done"], done["sent"]) == ("done", 2, 0)
        assert done["subscribersWillSee"].startswith(no_notice), done
        [line] = [line for line in audit_lines(caplog) if "operations.groups.discard" in line]
        assert f"subscribers will see: {done['subscribersWillSee']}" in line
        assert len(world.memory.publisher.messages) == sent_before
    finally:
        world.client.close()
