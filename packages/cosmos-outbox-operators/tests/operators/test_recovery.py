"""Recovery through the operators' routes, on the test kit's fakes, with the library's subscriber
behind its subscription (recovery_world.py): a discarded event strands no subscriber; a dead
letter is resubmitted through duplicate detection to its subscription only and applied once,
or discarded there; a re-drive reports what reached the topic and what the subscriber will
apply; the journey of an event and of an aggregate; the subscribers' holds, said and
released; health for a plain FunctionApp; the quarantine's last page; a transaction's session id
too long."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import azure.functions as func
import pytest
from conftest import body, problem
from deadlines import scaled
from recovery_world import KIND, OTHER, SUBSCRIPTION, RecoveryWorld, Stock, outcomes

from cosmos_outbox import Outbox
from cosmos_outbox.errors import OutboxError, SessionIdTooLongError
from cosmos_outbox.operations._dead_letters import describe, resubmission, resubmission_id
from cosmos_outbox.ports import DeadLetterEntity, LeaseBacklog, Page
from cosmos_outbox.subscriber import DISCARD_NOTICE, Dispatcher, Outcome, Projector
from cosmos_outbox_operators import operators_blueprint
from cosmos_outbox_testing import (
    FunctionClient,
    InMemoryPayloadStore,
    InMemoryStore,
    delivered,
    in_memory,
)


@pytest.fixture
def world() -> Iterator[RecoveryWorld]:
    yield from RecoveryWorld.running()


# -- giving up a quarantined event ------------------------------------------------------------


def test_a_discarded_event_strands_no_subscriber_the_held_versions_are_applied(
    world: RecoveryWorld, caplog: pytest.LogCaptureFixture
) -> None:
    ids = world.publish("w1", "StockAdded", "StockAdded", "StockAdded")
    world.poison(ids[1])
    world.relay()
    assert outcomes(world.deliver_new()) == ["applied", "gap recorded", "held"]
    [held] = world.projector.status().held
    assert (held.missing_version, held.held_versions) == (2, [3])
    assert "quarantined by the outbox" in held.reason and ids[1] in held.release

    with caplog.at_level(logging.INFO, logger="cosmos_outbox.operators"):
        reply = world.call(
            "DELETE",
            f"outbox/quarantine/{ids[1]}",
            params={"reason": "by hand"},
            headers={"x-functions-key": "the-master-key"},  # the audit names the key's holder
        )
    assert reply.status_code == 200  # an answer that says what subscribers will see
    answer = body(reply)
    assert (answer["status"], answer["discardedBy"], answer["version"]) == (
        "discarded",
        "admin key",
        2,
    )
    notice = answer["notice"]
    assert (notice["subject"], notice["sessionId"], notice["subscription"]) == (
        DISCARD_NOTICE,
        "w1",
        None,
    )
    assert "accepted gap" in answer["subscribersWillSee"]
    [audit] = [r for r in caplog.records if getattr(r, "outbox.audit", None)]
    assert audit.__dict__["outbox.actor"] == "admin key"
    assert audit.__dict__["outbox.subscribers_will_see"] == answer["subscribersWillSee"]

    # the notice is in the session after what was sent, and gives version 2 up
    sent = world.sent[-1]
    assert (sent.subject, sent.version, sent.message_id) == (DISCARD_NOTICE, 2, notice["messageId"])
    assert json.loads(sent.body)["discardedBy"] == "admin key"
    [result] = world.deliver_new()
    assert result is not None and result.outcome is Outcome.GAP_ACCEPTED
    assert result.applied == [2, 3]
    stock = world.stock("w1")
    assert stock is not None and (stock["version"], stock["applied"]) == (3, [1, 3])
    status = world.projector.status()
    assert status.held == [] and status.held_events == 0
    [gap] = status.accepted_gaps
    assert (gap.version, gap.event_id, gap.discarded_by, gap.reason) == (
        2,
        ids[1],
        "admin key",
        "by hand",
    )
    # later versions flow
    world.publish("w1", "StockAdded")
    world.relay()
    assert outcomes(world.deliver_new()) == ["applied"]


def test_a_discarded_event_is_not_replayed_and_a_second_discard_sends_nothing(
    world: RecoveryWorld,
) -> None:
    ids = world.publish("w1", "StockAdded", "StockAdded")
    world.poison(ids[1])
    world.relay()
    assert (
        world.call("DELETE", f"outbox/quarantine/{ids[1]}", params={"reason": "x"}).status_code
        == 200
    )
    sent = len(world.sent)
    again = body(world.call("DELETE", f"outbox/quarantine/{ids[1]}", params={"reason": "y"}))
    assert again["notice"] is None and "nothing new" in again["subscribersWillSee"]
    assert len(world.sent) == sent
    refused = problem(world.call("POST", f"outbox/quarantine/{ids[1]}/replay"), 409)
    assert "was discarded" in refused["detail"]
    listed = body(world.call("GET", "outbox/quarantine"))["items"]
    assert [(i["eventId"], i["status"]) for i in listed] == [(ids[1], "discarded")]
    assert body(world.call("GET", "outbox/status"))["quarantined"] == 0


def test_a_discard_notice_that_arrives_behind_a_gap_is_held_then_applied_in_order(
    world: RecoveryWorld,
) -> None:
    """v2 lost on its way, v3 given up: the notice waits behind v2 like an event."""
    ids = world.publish("w1", "StockAdded", "StockAdded", "StockAdded", "StockAdded")
    world.poison(ids[2])
    world.relay()
    assert outcomes(world.deliver_new(skip={ids[1]})) == ["applied", "gap recorded", "held"]
    world.call("DELETE", f"outbox/quarantine/{ids[2]}", params={"reason": "bad data"})
    assert outcomes(world.deliver_new()) == ["held"]  # the notice of v3 waits for v2
    [letter] = world.memory.dead_letters.letters(SUBSCRIPTION)
    answer = body(
        world.call(
            "POST",
            f"outbox/deadletters/{SUBSCRIPTION}/resubmit",
            body={"sequenceNumbers": [letter.sequence_number]},
        )
    )
    assert answer["done"] == 1
    [(_, resubmitted)] = world.memory.dead_letters.sent
    result = world.deliver(resubmitted)
    assert result is not None and result.applied == [2, 3, 4]
    stock = world.stock("w1")
    assert stock is not None and stock["applied"] == [1, 2, 4]


# -- dead letters -----------------------------------------------------------------------------


def dead_lettered_v2(world: RecoveryWorld) -> list[str]:
    """v1 applied, v2 dead-lettered at the subscription (its handler failed), v3 held."""
    ids = world.publish("w1", "StockAdded", "StockAdded", "StockAdded")
    world.relay()
    assert outcomes(world.deliver_new(skip={ids[1]})) == ["applied", "held"]
    return ids


def test_dead_letters_are_counted_listed_with_a_filter_and_peeked(world: RecoveryWorld) -> None:
    ids = dead_lettered_v2(world)
    counts = body(world.call("GET", "outbox/deadletters"))["entities"]
    assert [(c["name"], c["kind"], c["deadLetters"]) for c in counts] == [
        (SUBSCRIPTION, "subscription", 1),
        (OTHER, "subscription", 0),
    ]
    [item] = body(
        world.call("GET", f"outbox/deadletters/{SUBSCRIPTION}", params={"aggregateId": "w1"})
    )["items"]
    assert (item["eventId"], item["aggregateType"], item["version"], item["action"]) == (
        ids[1],
        KIND,
        2,
        "StockAdded",
    )
    assert item["deadLetterReason"] == "MaxDeliveryCountExceeded"
    assert item["deliveryCount"] == 10 and item["enqueuedTime"]
    none = body(
        world.call(
            "GET", f"outbox/deadletters/{SUBSCRIPTION}", params={"deadLetterReason": "timeout"}
        )
    )
    assert none["items"] == [] and none["hasMore"] is False
    whole = body(
        world.call("GET", f"outbox/deadletters/{SUBSCRIPTION}/messages/{item['sequenceNumber']}")
    )
    assert json.loads(whole["body"]) == {"sku": "a", "action": "StockAdded"}
    assert whole["deadLetterDescription"] == "handler failed: KeyError 'sku'"
    assert whole["applicationProperties"]["cloudEvents_id"] == ids[1]
    problem(world.call("GET", f"outbox/deadletters/{SUBSCRIPTION}/messages/999"), 404)
    problem(world.call("GET", "outbox/deadletters/unknown-subscription"), 404)


def test_a_resubmission_gets_through_duplicate_detection_to_its_subscription_only_once(
    world: RecoveryWorld, caplog: pytest.LogCaptureFixture
) -> None:
    ids = dead_lettered_v2(world)
    [letter] = world.memory.dead_letters.letters(SUBSCRIPTION)
    with caplog.at_level(logging.INFO, logger="cosmos_outbox.operators"):
        reply = world.call(
            "POST",
            f"outbox/deadletters/{SUBSCRIPTION}/resubmit",
            body={"sequenceNumbers": [letter.sequence_number]},
        )
    answer = body(reply)
    assert (answer["done"], answer["failed"], answer["remaining"]) == (1, 0, 0)
    assert world.memory.dead_letters.letters(SUBSCRIPTION) == []
    [(entity, sent)] = world.memory.dead_letters.sent
    assert entity == DeadLetterEntity(SUBSCRIPTION)
    # a MessageId of its own (the topic cannot drop it), the event id kept as its CloudEvents id
    assert sent.message_id == resubmission_id(ids[1], SUBSCRIPTION, 1) != ids[1]
    assert answer["handled"][0]["sentMessageId"] == sent.message_id
    properties = sent.application_properties
    assert properties["cloudEvents_id"] == ids[1]
    assert (properties["outboxTarget"], properties["outboxResubmission"]) == (SUBSCRIPTION, 1)
    assert (sent.session_id, sent.body) == ("w1", letter.body)
    assert f"subscription {SUBSCRIPTION} only" in answer["subscribersWillSee"]
    [audit] = [r for r in caplog.records if getattr(r, "outbox.audit", None)]
    assert audit.__dict__["outbox.audit"] == "deadletters.resubmit"

    # the subscriber applies it and the version it held, once; a redelivery is a duplicate
    result = world.deliver(sent)
    assert result is not None and result.applied == [2, 3]
    again = world.deliver(sent)
    assert again is not None and again.outcome is Outcome.DUPLICATE
    # another subscription's library subscriber (its rule without the clause) skips it
    elsewhere = Dispatcher(
        KIND,
        lambda: Projector(InMemoryStore(), Stock(), inbox_ttl_seconds=60),
        payloads=InMemoryPayloadStore,
        subscription=OTHER,
    )
    assert world.deliver(sent, elsewhere) is None


def test_a_dead_letter_leaves_its_queue_only_once_its_resubmission_was_accepted(
    world: RecoveryWorld,
) -> None:
    dead_lettered_v2(world)
    [letter] = world.memory.dead_letters.letters(SUBSCRIPTION)
    world.memory.dead_letters.fail_sends = True
    answer = body(
        world.call(
            "POST",
            f"outbox/deadletters/{SUBSCRIPTION}/resubmit",
            body={"sequenceNumbers": [letter.sequence_number]},
        )
    )
    assert (answer["done"], answer["failed"]) == (0, 1)
    assert "it stays" in answer["handled"][0]["failure"]
    assert len(world.memory.dead_letters.letters(SUBSCRIPTION)) == 1
    assert answer["subscribersWillSee"].startswith("nothing")


def test_a_resubmission_sent_twice_has_one_message_id_and_the_next_one_another() -> None:
    """A crash between the send and the removal leaves the dead letter: sent again, its
    resubmission has the same MessageId (dropped inside the window); dead-lettered again,
    the next resubmission is numbered 2 and has a new one."""
    world = RecoveryWorld()
    try:
        ids = dead_lettered_v2(world)
        [letter] = world.memory.dead_letters.letters(SUBSCRIPTION)
        entity = DeadLetterEntity(SUBSCRIPTION)
        first = resubmission(describe(letter), entity)
        assert resubmission(describe(letter), entity).message_id == first.message_id
        again = world.memory.dead_letters.dead_letter(
            SUBSCRIPTION,
            first.body,
            message_id=first.message_id,
            session_id="w1",
            application_properties=first.application_properties,
        )
        second = resubmission(describe(again), entity)
        assert second.application_properties["outboxResubmission"] == 2
        assert second.message_id not in (first.message_id, ids[1])
        assert second.application_properties["cloudEvents_id"] == ids[1]
    finally:
        world.close()


def test_discarding_a_dead_letter_gives_its_version_up_at_that_subscription_only(
    world: RecoveryWorld,
) -> None:
    ids = dead_lettered_v2(world)
    [letter] = world.memory.dead_letters.letters(SUBSCRIPTION)
    numbers = [letter.sequence_number]
    path = f"outbox/deadletters/{SUBSCRIPTION}/discard"
    problem(world.call("POST", path, body={"sequenceNumbers": numbers}), 400)  # no reason
    answer = body(
        world.call(
            "POST",
            path,
            body={"sequenceNumbers": numbers, "reason": "the order was cancelled by phone"},
        )
    )
    assert answer["done"] == 1 and world.memory.dead_letters.letters(SUBSCRIPTION) == []
    [(_, notice)] = world.memory.dead_letters.sent
    assert notice.subject == DISCARD_NOTICE
    assert notice.application_properties["outboxTarget"] == SUBSCRIPTION
    assert json.loads(notice.body)["eventId"] == ids[1]
    result = world.deliver(notice)
    assert result is not None and result.outcome is Outcome.GAP_ACCEPTED
    assert result.applied == [2, 3]
    [gap] = world.projector.status().accepted_gaps
    assert (gap.version, gap.subscription) == (2, SUBSCRIPTION)


def test_a_selection_names_its_dead_letters_one_way(world: RecoveryWorld) -> None:
    path = f"outbox/deadletters/{SUBSCRIPTION}/resubmit"
    problem(world.call("POST", path, body={}), 400)
    problem(world.call("POST", path, body={"all": True, "aggregateId": "w1"}), 400)
    problem(world.call("POST", path, body={"sequenceNumbers": [5]}), 404)
    # a filter, or all of them, is a bulk operation: refused here, naming its route
    refused = problem(world.call("POST", path, body={"all": True}), 400)
    assert "resubmit/operation" in json.dumps(refused)
    operation = f"{path}/operation"
    problem(world.call("POST", operation, body={"sequenceNumbers": [1]}), 400)
    problem(world.call("POST", operation, body={"all": True, "aggregateId": "w1"}), 400)


# -- re-drive ---------------------------------------------------------------------------------


def test_a_redrive_reaches_the_topic_under_new_message_ids_and_says_what_will_be_applied(
    world: RecoveryWorld, caplog: pytest.LogCaptureFixture
) -> None:
    ids = world.publish("w1", "StockAdded", "StockAdded")
    world.relay()
    world.deliver_new()
    later = world.publish("w1", "StockAdded")
    since = (datetime.now(UTC) - timedelta(hours=1)).isoformat().replace("+00:00", "Z")
    before = len(world.sent)
    pages = []
    request: dict[str, Any] = {"since": since, "pageSize": 2}
    with caplog.at_level(logging.INFO, logger="cosmos_outbox.operators"):
        while True:
            page = body(world.call("POST", "outbox/redrive", body=request))
            pages.append(page)
            if not page["hasMore"]:
                break
            request["continuationToken"] = page["continuationToken"]
    assert [(p["pageEvents"], p["done"], p["events"]) for p in pages] == [(2, 2, 3), (1, 3, 3)]
    last = pages[-1]
    assert (last["accepted"], last["quarantined"]) == (3, 0)
    assert len({p["redriveId"] for p in pages}) == 1
    # every watched subscription: the one whose subscriber the app knows, what it will do;
    # the other, what it receives (issue 66: it was left out of the forecast)
    assert last["subscribers"] == [
        {
            "subscription": OTHER,
            "alreadyApplied": 0,
            "held": 0,
            "toApply": 0,
            "known": False,
            "receives": 3,
            "unknown": 0,
            "whyUnknown": None,
        },
        {
            "subscription": SUBSCRIPTION,
            "alreadyApplied": 2,
            "held": 0,
            "toApply": 1,
            "known": True,
            "receives": 3,
            "unknown": 0,
            "whyUnknown": None,
        },
    ]
    redriven = world.sent[before:]
    assert [m.event_id for m in redriven] == [*ids, *later]
    assert all(m.message_id != m.event_id for m in redriven)
    assert {m.application_properties["outboxRedrive"] for m in redriven} == {last["redriveId"]}
    assert "new message(s)" in last["subscribersWillSee"]
    assert len([r for r in caplog.records if getattr(r, "outbox.audit", None)]) == 2
    # the subscriber drops what it applied, applies the rest, once
    assert outcomes(world.deliver_new()) == ["duplicate", "duplicate", "applied"]
    # a token is of its re-drive only
    problem(
        world.call(
            "POST",
            "outbox/redrive",
            body={
                "since": "2000-01-01T00:00:00Z",
                "continuationToken": pages[0]["continuationToken"],
            },
        ),
        400,
    )


def test_a_redrive_to_one_subscription_names_it_and_an_unknown_one_is_refused(
    world: RecoveryWorld,
) -> None:
    world.publish("w1", "StockAdded")
    since = "2000-01-01T00:00:00Z"
    page = body(world.call("POST", "outbox/redrive", body={"since": since, "subscription": OTHER}))
    assert page["subscription"] == OTHER
    # its rule takes what is targeted at it; the other subscription's drops it (issue 72)
    assert [(c["subscription"], c["known"], c["receives"]) for c in page["subscribers"]] == [
        (OTHER, False, 1),
        (SUBSCRIPTION, True, 0),
    ]
    assert world.sent[-1].application_properties["outboxTarget"] == OTHER
    problem(
        world.call("POST", "outbox/redrive", body={"since": since, "subscription": "nope"}), 404
    )


# -- the journey ------------------------------------------------------------------------------


def test_the_journey_of_an_event_and_of_its_aggregate(world: RecoveryWorld) -> None:
    ids = dead_lettered_v2(world)
    world.memory.backlog.leases = [LeaseBacklog("0", 0, None, pending_ids_complete=True)]
    journey = body(world.call("GET", f"outbox/journey/events/{ids[1]}"))
    assert (journey["stored"], journey["relay"], journey["version"]) == (True, "relayed", 2)
    [letter] = journey["deadLetters"]
    assert letter["entity"] == SUBSCRIPTION
    other, sight = journey["subscribers"]  # every watched subscription, by name
    assert (other["subscription"], other["state"], other["projectionVersion"]) == (
        OTHER,
        "unknown",
        None,
    )
    assert (sight["subscription"], sight["state"], sight["projectionVersion"]) == (
        SUBSCRIPTION,
        "not received",
        1,
    )
    assert "dead-lettered at projections" in journey["summary"]
    held = body(world.call("GET", f"outbox/journey/events/{ids[2]}"))
    assert held["subscribers"][1]["state"] == "held" and held["subscribers"][1]["waitingFor"] == 2

    world.memory.backlog.leases = [
        LeaseBacklog("0", 1, None, pending_ids=(ids[2],), pending_ids_complete=True)
    ]
    pending = body(world.call("GET", f"outbox/journey/events/{ids[2]}"))
    assert pending["relay"] == "not relayed yet"

    aggregate = body(world.call("GET", f"outbox/journey/aggregates/{KIND}/w1"))
    assert [e["version"] for e in aggregate["events"]] == [1, 2, 3]
    unknown, view = aggregate["subscribers"]
    assert (unknown["subscription"], unknown["known"]) == (OTHER, False)
    assert (view["projectionVersion"], view["heldVersions"], view["waitingFor"]) == (1, [3], 2)
    problem(world.call("GET", "outbox/journey/events/no-such-event"), 404)
    problem(world.call("GET", "outbox/journey/events/-bad"), 400)
    problem(world.call("GET", "outbox/journey/aggregates/9bad/w1"), 400)


def test_a_journey_says_when_the_relay_leases_cannot_tell(world: RecoveryWorld) -> None:
    [event] = world.publish("w1", "StockAdded")
    journey = body(world.call("GET", f"outbox/journey/events/{event}"))
    assert journey["relay"] == "unknown" and journey["stored"] is True


# -- subscribers' holds -----------------------------------------------------------------------


def test_every_held_version_says_why_and_release_gives_it_up_at_one_subscription(
    world: RecoveryWorld, caplog: pytest.LogCaptureFixture
) -> None:
    ids = world.publish("w1", "StockAdded", "StockAdded", "StockAdded")
    world.relay()
    with caplog.at_level(logging.WARNING, logger="cosmos_outbox.subscriber"):
        # v2 never arrives (its message expired on the subscription, say)
        results = [world.subscriber.handle(delivered(m)) for m in (world.sent[0], world.sent[2])]
        world.seen = 3
    assert outcomes(results) == ["applied", "held"]
    [line] = [r.getMessage() for r in caplog.records if "version 3 held" in r.getMessage()]
    assert "version 2 has not arrived" in line and "subscribers release" in line
    [view] = [s for s in body(world.call("GET", "outbox/subscribers"))["subscribers"] if s["known"]]
    assert view["subscription"] == SUBSCRIPTION and view["heldEvents"] == 1
    [held] = view["held"]
    assert (held["aggregateId"], held["missingVersion"], held["heldVersions"]) == ("w1", 2, [3])
    assert "has not arrived" in held["reason"] and "release" in held["release"]

    answer = body(
        world.call(
            "POST",
            f"outbox/subscribers/{SUBSCRIPTION}/release",
            body={"aggregateType": KIND, "aggregateId": "w1", "version": 2, "reason": "lost"},
        )
    )
    assert answer["notice"]["subscription"] == SUBSCRIPTION
    notice = world.sent[-1]
    assert json.loads(notice.body)["eventId"] == ids[1]  # what the outbox knows of it
    [result] = world.deliver_new()
    assert result is not None and result.applied == [2, 3]
    problem(
        world.call(
            "POST",
            "outbox/subscribers/nope/release",
            body={"aggregateType": KIND, "aggregateId": "w1", "version": 2, "reason": "x"},
        ),
        404,
    )


# -- edges ------------------------------------------------------------------------------------


def test_a_plain_function_app_with_the_blueprints_has_the_outboxs_health() -> None:
    memory = in_memory()
    outbox = Outbox(services=lambda: memory.services)
    app = func.FunctionApp(http_auth_level=func.AuthLevel.FUNCTION)
    app.register_functions(outbox.relay_blueprint())
    app.register_functions(operators_blueprint(outbox))
    with FunctionClient(app) as client:
        reply = client.request("GET", "outbox/health")
        assert (reply.status_code, body(reply)) == (200, {"status": "healthy"})
        health = client.functions["outbox_health"]
        [trigger] = [b for b in health.get_bindings() if b.type == "httpTrigger"]
        assert trigger.get_dict_repr()["authLevel"] == func.AuthLevel.ANONYMOUS


class CosmosLikePages(InMemoryStore):
    """Pages as Cosmos DB's cross-partition queries give them: a full page always has a token,
    even when nothing follows (its page is empty)."""

    def page_of_type(
        self, type_: str, *, page_size: int, continuation: str | None
    ) -> Page[dict[str, Any]]:
        page = super().page_of_type(type_, page_size=page_size, continuation=continuation)
        if page.continuation_token is None and len(page.items) == page_size:
            start = int((continuation or "mem:0")[4:])
            return Page(page.items, f"mem:{start + len(page.items)}")
        return page


def test_the_quarantines_last_page_has_no_token_even_where_the_store_gives_one() -> None:
    world = RecoveryWorld()
    try:
        store = CosmosLikePages()
        world.memory.store.__class__ = CosmosLikePages  # the same documents, Cosmos's paging
        del store
        ids = world.publish("w1", "StockAdded")
        world.poison(ids[0])
        world.relay()
        first = body(world.call("GET", "outbox/quarantine", params={"pageSize": "1"}))
        assert len(first["items"]) == 1
        assert (first["hasMore"], first["continuationToken"]) == (False, None)
    finally:
        world.close()


def test_a_transactions_session_id_over_the_limit_is_an_outbox_error_naming_it() -> None:
    memory = in_memory()
    outbox = Outbox(services=lambda: memory.services)
    with pytest.raises(SessionIdTooLongError) as raised:
        outbox.transaction("w" * 129, entity="warehouse")
    assert isinstance(raised.value, OutboxError) and isinstance(raised.value, ValueError)
    assert (raised.value.limit, raised.value.length) == (128, 129)
    assert "at most 128" in str(raised.value)


def test_the_watched_subscriptions_and_queues_are_read_from_the_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from cosmos_outbox.services import watched_from_settings
    from cosmos_outbox.settings import OutboxSettings, SettingsError, read_settings

    monkeypatch.setenv("CosmosDBConnection", "AccountEndpoint=https://x/;AccountKey=a2V5;")
    monkeypatch.setenv("COSMOS_CONTAINER", "stock")
    monkeypatch.setenv("OUTBOX_SUBSCRIPTIONS", " catalog=stock-projections, a b")
    with pytest.raises(SettingsError, match="OUTBOX_SUBSCRIPTIONS"):
        read_settings(OutboxSettings)
    monkeypatch.setenv("OUTBOX_SUBSCRIPTIONS", "catalog=stock-projections, audit,x=db/c")
    monkeypatch.setenv("OUTBOX_DEAD_LETTER_QUEUES", "commands")
    settings = read_settings(OutboxSettings)
    assert settings.subscriptions() == (
        ("catalog", None, "stock-projections"),
        ("audit", None, None),
        ("x", "db", "c"),
    )
    assert watched_from_settings(settings) == (
        DeadLetterEntity("catalog"),
        DeadLetterEntity("audit"),
        DeadLetterEntity("x"),
        DeadLetterEntity("commands", "queue"),
    )
    monkeypatch.setenv("OUTBOX_DEAD_LETTER_QUEUES", "commands=c")
    with pytest.raises(SettingsError, match="OUTBOX_DEAD_LETTER_QUEUES"):
        read_settings(OutboxSettings)


METRICS = """
import json, sys
from opentelemetry import metrics
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

reader = InMemoryMetricReader()
metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
from recovery_world import RecoveryWorld


def sums():
    found = {}
    for resource in reader.get_metrics_data().resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                values = [getattr(p, "value", None) for p in metric.data.data_points]
                if None not in values:  # sums (counters), not histograms
                    found[metric.name] = sum(values)
    return found


world = RecoveryWorld()
ids = world.publish("w1", "StockAdded", "StockAdded", "StockAdded")
world.poison(ids[1])
world.relay()
world.deliver_new()
held = sums()
world.call("DELETE", f"outbox/quarantine/{ids[1]}", params={"reason": "x"})
world.relay()
world.deliver_new()
print(json.dumps({"held": held, "after": sums()}))
world.close()
"""


def test_a_hold_and_its_release_are_in_the_subscribers_metrics() -> None:
    """The global meter provider (the worker's, in Azure) set in a process of its own: the
    `subscriber.events.held` up-down counter goes up at the hold and back to 0 when the
    discard notice releases it; `subscriber.gaps.accepted` counts the accepted gap."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    tests = Path(__file__).parents[1]  # where recovery_world.py is
    done = subprocess.run(
        [sys.executable, "-c", METRICS],
        capture_output=True,
        text=True,
        timeout=scaled(120),
        cwd=tests,
        env={**os.environ, "PYTHONPATH": str(tests)},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["held"]["subscriber.events.held"] == 1
    assert seen["after"]["subscriber.events.held"] == 0
    assert seen["after"]["subscriber.gaps.accepted"] == 1
