"""Preview before acting (issue 66, item 3): a resubmit-all, a discard-all and a re-drive say what
they will touch (how many, of how many aggregates, the first items, what subscribers will see)
before anyone confirms, move nothing, and refuse bad input before the confirmation."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from conftest import body, problem
from recovery_world import KIND, SUBSCRIPTION, RecoveryWorld


@pytest.fixture
def world() -> Iterator[RecoveryWorld]:
    yield from RecoveryWorld.running()


def dead_lettered(world: RecoveryWorld) -> list[str]:
    """Three events of two aggregates dead-lettered at the subscription."""
    ids = world.publish("w1", "StockAdded", "StockAdded") + world.publish("w2", "StockAdded")
    world.relay()
    world.deliver_new(skip=set(ids))
    return ids


def test_a_resubmit_all_and_a_discard_all_are_previewed_and_nothing_moves(
    world: RecoveryWorld,
) -> None:
    ids = dead_lettered(world)
    sent = len(world.sent)
    letters = f"outbox/deadletters/{SUBSCRIPTION}"
    preview: dict[str, Any] = body(
        world.call("POST", f"{letters}/resubmit/preview", body={"all": True})
    )
    assert (preview["action"], preview["matching"], preview["aggregates"]) == ("resubmit", 3, 2)
    assert [f["eventId"] for f in preview["first"]] == ids
    assert preview["subscribersWillSee"]
    one = body(world.call("POST", f"{letters}/resubmit/preview", body={"aggregateId": "w2"}))
    assert (one["matching"], [f["eventId"] for f in one["first"]]) == (1, [ids[2]])
    discard = body(
        world.call("POST", f"{letters}/discard/preview", body={"all": True, "reason": "gone"})
    )
    assert (discard["action"], discard["matching"]) == ("discard", 3)
    # validation before the confirmation: a discard without its reason is refused at preview
    problem(world.call("POST", f"{letters}/discard/preview", body={"all": True}), 400)
    problem(world.call("POST", "outbox/deadletters/nope/resubmit/preview", body={"all": True}), 404)
    assert len(world.sent) == sent and len(world.memory.dead_letters.letters(SUBSCRIPTION)) == 3


def test_a_redrive_is_previewed_per_subscription_and_sends_nothing(world: RecoveryWorld) -> None:
    ids = world.publish("w1", "StockAdded", "StockAdded")
    world.relay()
    world.deliver_new()
    sent = len(world.sent)
    preview = body(
        world.call(
            "POST",
            "outbox/redrive/preview",
            body={"since": "2000-01-01T00:00:00Z", "aggregateType": KIND},
        )
    )
    assert preview["events"] == 2 and [e["eventId"] for e in preview["first"]] == ids
    counts = {c["subscription"]: c for c in preview["subscriptions"]}
    assert counts[SUBSCRIPTION]["alreadyApplied"] == 2 and counts[SUBSCRIPTION]["toApply"] == 0
    problem(world.call("POST", "outbox/redrive/preview", body={"since": "yesterday"}), 400)
    assert len(world.sent) == sent


def test_a_dead_letter_that_is_not_an_outbox_event_shows_no_version() -> None:
    """Issue 66, item 3's display faults: a non-outbox dead letter's line said "vNone"."""
    import azure.functions as func

    from cosmos_outbox.operations import ActionReport
    from cosmos_outbox_operators._console.render import fragment

    handled = {
        "sequenceNumber": 7,
        "eventId": "m-1",
        "aggregateType": "order",
        "aggregateId": "o-1",
        "version": None,
        "failure": None,
        "sentMessageId": "m-2",
    }
    answer = {"action": "resubmit", "entity": "s", "done": 1, "failed": 0, "remaining": 0}
    answer["subscribersWillSee"] = "it, once"
    request = func.HttpRequest(
        method="POST",
        url="http://localhost/api/outbox/console/deadletters/s/resubmit",
        route_params={"entity": "s"},
        body=b"{}",
    )
    html = fragment(
        "resubmit_dead_letters",
        answer={**answer, "handled": [handled]},
        status=200,
        request=request,
        base="/api/outbox/console",
        answers=ActionReport,
    )
    assert "<code>o-1</code>" in html and "vNone" not in html
