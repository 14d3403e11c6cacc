"""The console's recovery panels in-process, on recovery_world.py's app (the library's subscriber
behind its subscription, dead letters and all on the test kit's fakes): the dead letters
(counted, listed with a filter, peeked, resubmitted and discarded one by one, as a selection or
all matching the filter, continued while more match), the journey of an event and of an
aggregate with its trace and its aggregate's documents, the subscribers' holds released, and a
re-drive followed page by page. Each panel is its route's answer as HTML, and each of its actions
is taken here as the page takes it: the request the button's own attributes make (its route, its
`data-json`), through the signed-in door; its answer says what subscribers will see.

The browser walks these panels in tests/contacts/outbox/test_console_in_a_browser.py."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from typing import Any

import pytest
from conftest import body, problem
from recovery_world import KIND, SUBSCRIPTION, RecoveryWorld

from cosmos_outbox.ports import LeaseBacklog
from cosmos_outbox.subscriber import Outcome
from cosmos_outbox_testing import delivered, run_sync

CONSOLE = "/api/outbox/console"
TRACE = "0af7651916cd43dd8448eb211c80319c"
TRACEPARENT = f"00-{TRACE}-b7ad6b7169203331-01"


def principal() -> str:
    claims = [
        {"typ": "name", "val": "ada@example.com"},
        {"typ": "oid", "val": "oid-ada"},
        {"typ": "roles", "val": "Outbox.Operator"},
    ]
    document = {"auth_typ": "aad", "claims": claims, "name_typ": "name", "role_typ": "roles"}
    return base64.b64encode(json.dumps(document).encode()).decode()


#: The page's own request: the operator, same origin, the page's token, asking for HTML.
PAGE = {
    "x-ms-client-principal": principal(),
    "host": "localhost",
    "origin": "http://localhost",
    "cookie": "outbox-console-csrf=t",
    "x-csrf-token": "t",
    "hx-request": "true",
}


@pytest.fixture(autouse=True)
def sign_in_enabled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WEBSITE_AUTH_ENABLED", "True")
    monkeypatch.setenv("OUTBOX_CONSOLE_SIGN_IN", "app-service-authentication")


@pytest.fixture
def world() -> Iterator[RecoveryWorld]:
    world = RecoveryWorld()
    world.memory.backlog.leases = [LeaseBacklog("0", 0, None, pending_ids_complete=True)]
    try:
        yield world
    finally:
        world.close()


VOID = ("input", "br", "meta", "link")


class Elements(HTMLParser):
    """Every start tag of an HTML fragment, with its attributes and the text inside it."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.found: list[tuple[str, dict[str, str], list[str]]] = []
        self._open: list[list[str]] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._apart(tag)
        text: list[str] = []
        self.found.append((tag, {k: v or "" for k, v in attrs}, text))
        if tag not in VOID:
            self._open.append(text)

    def handle_endtag(self, tag: str) -> None:
        if self._open and tag not in VOID:
            self._open.pop()
        self._apart(tag)

    def _apart(self, tag: str) -> None:
        """A cell, an item, a line: its text apart from the next one's."""
        if tag in ("td", "th", "li", "dt", "dd", "br", "p", "tr"):
            self.handle_data(" ")

    def handle_data(self, data: str) -> None:
        for text in self._open:
            text.append(data)


def elements(html: str, **wanted: str) -> list[tuple[dict[str, str], str]]:
    """The elements whose attributes have these values (`hx_post="..."` for hx-post; a value of
    "*": the attribute is there), with their text."""
    found = []
    for _, attrs, text in Elements(html).found:
        if all(
            (key := k.replace("_", "-")) in attrs and (v == "*" or attrs[key] == v)
            for k, v in wanted.items()
        ):
            found.append((attrs, " ".join("".join(text).split())))
    return found


def page(world: RecoveryWorld, path: str, **options: Any) -> str:
    """A panel's fragment (GET through the signed-in door, as htmx asks)."""
    reply = world.call("GET", f"outbox/console/{path}", headers=PAGE, **options)
    assert reply.status_code == 200 and reply.mimetype == "text/html", reply.get_body()
    return reply.get_body().decode()


def act(world: RecoveryWorld, attrs: dict[str, str], **fields: Any) -> str:
    """What the page sends for an action element: its route (hx-post), its `data-json` and the
    form's fields (console.js's "outbox-json"), through the signed-in door; the answer's HTML."""
    route = attrs["hx-post"]
    assert route.startswith(f"{CONSOLE}/"), route
    sent = {**json.loads(attrs.get("data-json") or "{}"), **fields}
    reply = world.call("POST", route.removeprefix("/api/"), headers=PAGE, body=sent)
    assert reply.status_code in (200, 202), reply.get_body()
    return reply.get_body().decode()


def dead_lettered(world: RecoveryWorld, warehouse: str = "w1") -> list[str]:
    """v1 applied, v2 dead-lettered at the subscription (its handler failed), v3 held."""
    ids = world.publish(warehouse, "StockAdded", "StockAdded", "StockAdded")
    world.relay()
    world.deliver_new(skip={ids[1]})
    return ids


# -- dead letters -----------------------------------------------------------------------------


def test_the_dead_letters_panel_is_the_routes_counts_list_and_peek(world: RecoveryWorld) -> None:
    ids = dead_lettered(world)
    counts = page(world, "deadletters")
    [(row, text)] = elements(counts, data_entity=SUBSCRIPTION)
    assert "subscription 1" in text
    [(listing, _)] = elements(counts, hx_get=f"{CONSOLE}/deadletters/{SUBSCRIPTION}")
    assert listing["hx-target"] == "#dead-letter-list"

    listed = page(world, f"deadletters/{SUBSCRIPTION}")
    [item] = body(world.call("GET", f"outbox/deadletters/{SUBSCRIPTION}"))["items"]
    seq = item["sequenceNumber"]
    [(row, text)] = elements(listed, data_sequence_number=str(seq))
    assert row["data-event-id"] == ids[1]
    assert "StockAdded v2 of warehouse w1" in text and "MaxDeliveryCountExceeded" in text
    assert "handler failed: KeyError 'sku'" in text and " 10 " in text
    # the filter form is the list route's, with the filter it was listed by
    filtered = page(world, f"deadletters/{SUBSCRIPTION}", params={"aggregateId": "w1"})
    [(form, _)] = elements(filtered, aria_label="Filter the dead letters of projections")
    assert form["hx-get"] == f"{CONSOLE}/deadletters/{SUBSCRIPTION}"
    [(field, _)] = elements(filtered, name="aggregateId")
    assert field["value"] == "w1"
    none = page(world, f"deadletters/{SUBSCRIPTION}", params={"deadLetterReason": "timeout"})
    assert "No dead letters at projections match the filter" in none

    [(peek, _)] = elements(listed, hx_get=f"{CONSOLE}/deadletters/{SUBSCRIPTION}/messages/{seq}")
    assert peek["hx-trigger"] == "toggle once"
    peeked = page(world, f"deadletters/{SUBSCRIPTION}/messages/{seq}")
    for shown in (
        "MaxDeliveryCountExceeded",
        "handler failed: KeyError &#39;sku&#39;",
        "10 times",
        "cloudEvents_id",
        "&#34;sku&#34;: &#34;a&#34;",  # the body, indented JSON
    ):
        assert shown in peeked, shown
    [(link, _)] = elements(peeked, data_journey="event")
    assert link["data-event-id"] == ids[1]


def test_a_dead_letter_resubmitted_from_its_row_is_applied_once(world: RecoveryWorld) -> None:
    ids = dead_lettered(world)
    listed = page(world, f"deadletters/{SUBSCRIPTION}")
    [(button, _)] = elements(listed, hx_post=f"{CONSOLE}/deadletters/{SUBSCRIPTION}/resubmit")
    assert json.loads(button["data-json"]) == {"sequenceNumbers": [1]}
    assert "to projections only" in button["hx-confirm"]  # asked first, saying what they see
    assert "applies it once" in button["hx-confirm"]
    # from another origin: refused, nothing moved
    route = button["hx-post"].removeprefix("/api/")
    evil = {**PAGE, "origin": "https://evil.example"}
    refused = world.call("POST", route, headers=evil, body=json.loads(button["data-json"]))
    assert refused.status_code == 403 and len(world.memory.dead_letters.letters(SUBSCRIPTION)) == 1

    answer = act(world, button)
    [(outcome, text)] = elements(answer, data_outcome="resubmit-letters")
    assert (outcome["data-done"], outcome["data-failed"], outcome["data-remaining"]) == (
        "1",
        "0",
        "0",
    )
    assert "What subscribers see: 1 message(s) at subscription projections only" in text
    assert world.memory.dead_letters.letters(SUBSCRIPTION) == []
    [(_, sent)] = world.memory.dead_letters.sent
    result = world.deliver(sent)
    assert result is not None and result.applied == [2, 3]
    journey = page(world, f"journey/events/{ids[1]}")
    [(sight, text)] = elements(journey, data_subscription=SUBSCRIPTION, data_state="*")
    assert sight["data-state"] == "applied" and "applied" in text


def test_a_selection_and_all_matching_the_filter_name_the_dead_letters_as_the_routes_do(
    world: RecoveryWorld,
) -> None:
    for warehouse in ("w1", "w2", "w3"):
        dead_lettered(world, warehouse)
    listed = page(world, f"deadletters/{SUBSCRIPTION}")
    [(bulk, _)] = elements(listed, data_letters=f"{CONSOLE}/deadletters/{SUBSCRIPTION}")
    assert {a["data-bulk"] for a, _ in elements(listed, data_bulk="*")} == {
        "resubmit-letters",
        "discard-letters",
    }
    assert bulk["data-entity"] == SUBSCRIPTION
    # no filter: "all" of them; a filter: the filter, as the list route was asked
    operation = f"{CONSOLE}/deadletters/{SUBSCRIPTION}/{{}}/operation"
    [(every, _)] = elements(listed, hx_post=operation.format("resubmit"))
    assert json.loads(every["data-json"]) == {"all": True}
    one = page(world, f"deadletters/{SUBSCRIPTION}", params={"aggregateId": "w2"})
    [(discard_all, _)] = elements(one, hx_post=operation.format("discard"))
    assert json.loads(discard_all["data-json"]) == {"aggregateId": "w2"}
    assert "given up at projections only" in discard_all["hx-confirm"]
    # a bulk operation: answered at once, its progress asked for again until it stops
    started = act(world, discard_all, reason="the warehouse was closed")
    [(outcome, text)] = elements(started, data_outcome="discard-letters")
    assert (outcome["data-state"], outcome["data-done"]) == ("created", "0")
    assert outcome["hx-get"] == f"{CONSOLE}/operations/{outcome['data-operation-id']}"
    assert "the warehouse was closed" in text
    run_sync(world.outbox.wiring().operations().bulk.work())
    later = world.call("GET", outcome["hx-get"].removeprefix("/api/"), headers=PAGE)
    [(outcome, text)] = elements(later.get_body().decode(), data_outcome="discard-letters")
    assert (outcome["data-state"], outcome["data-done"]) == ("done", "1")
    assert "hx-get" not in outcome  # finished: no longer asked for
    assert "OutboxEventDiscarded notice(s)" in text  # what subscribers see
    left = {d.session_id for d in world.memory.dead_letters.letters(SUBSCRIPTION)}
    assert left == {"w1", "w3"}

    # all of them: resubmitted, the canary given (all of it here: nothing to wait for)
    started = act(world, every, canary="5")
    [(outcome, _)] = elements(started, data_outcome="resubmit-letters")
    run_sync(world.outbox.wiring().operations().bulk.work())
    operations = page(world, "operations")
    [(row, text)] = elements(operations, data_operation_id=outcome["data-operation-id"])
    assert (row["data-state"], row["data-done"], row["data-items"]) == ("done", "2", "2")
    assert world.memory.dead_letters.letters(SUBSCRIPTION) == []


def preview(world: RecoveryWorld, attrs: dict[str, str], **fields: Any) -> Any:
    """What console.js asks before an action with a preview (`data-preview`): the action's own
    body posted to that route, through the signed-in door, as HTML (the dialog shows it)."""
    route = attrs["data-preview"]
    assert route == f"{attrs['hx-post'].removesuffix('/operation')}/preview", route
    sent = {**json.loads(attrs.get("data-json") or "{}"), **fields}
    return world.call("POST", route.removeprefix("/api/"), headers=PAGE, body=sent)


def test_a_resubmit_all_and_a_discard_all_show_their_preview_first(world: RecoveryWorld) -> None:
    """Issue 66 item 3: the buttons acting on every dead letter name their preview; its answer,
    as the dialog shows it, says how many, of how many aggregates, and the first of them; a
    discard without its reason is refused there, before any confirmation; nothing moves."""
    a = dead_lettered(world, "w1")
    b = dead_lettered(world, "w2")
    listed = page(world, f"deadletters/{SUBSCRIPTION}")
    [(every, _)] = elements(
        listed, hx_post=f"{CONSOLE}/deadletters/{SUBSCRIPTION}/resubmit/operation"
    )
    reply = preview(world, every)
    assert reply.status_code == 200 and reply.mimetype == "text/html"
    shown = reply.get_body().decode()
    [(box, text)] = elements(shown, data_preview="resubmit")
    assert (box["data-entity"], box["data-matching"]) == (SUBSCRIPTION, "2")
    assert "2 dead letters at projections of 2 aggregates" in text
    firsts = [attrs["data-event-id"] for attrs, _ in elements(shown, data_sequence_number="*")]
    assert firsts == [a[1], b[1]]
    assert "StockAdded v2 of warehouse w1" in text and "What subscribers see:" in text

    [(discard_all, _)] = elements(
        listed, hx_post=f"{CONSOLE}/deadletters/{SUBSCRIPTION}/discard/operation"
    )
    refused = preview(world, discard_all)  # no reason: refused at the preview
    assert refused.status_code == 400
    assert elements(refused.get_body().decode(), role="alert", data_status="400")
    shown = preview(world, discard_all, reason="closed").get_body().decode()
    [(box, _)] = elements(shown, data_preview="discard")
    assert box["data-matching"] == "2"
    assert (
        len(world.memory.dead_letters.letters(SUBSCRIPTION)) == 2
        and not world.memory.dead_letters.sent
    )


def test_a_redrive_shows_its_preview_per_subscription_first(world: RecoveryWorld) -> None:
    ids = world.publish("w1", "StockAdded", "StockAdded")
    world.relay()
    world.deliver_new()
    sent = len(world.sent)
    html = world.call("GET", "outbox/console", headers=PAGE).get_body().decode()
    [(form, _)] = elements(html, hx_post=f"{CONSOLE}/redrive/operation")
    shown = preview(world, form, since="2000-01-01T00:00:00Z", aggregateType=KIND)
    [(box, text)] = elements(shown.get_body().decode(), data_preview="redrive")
    assert box["data-events"] == "2" and "2 stored events of 1 aggregate" in text
    [(_, counts)] = elements(shown.get_body().decode(), data_subscription=SUBSCRIPTION)
    assert counts.split()[1:] == ["2", "0", "0", "2"]  # receives, to apply, held, applied
    firsts = [
        attrs["data-event-id"]
        for attrs, _ in elements(shown.get_body().decode(), data_event_id="*")
    ]
    assert firsts == ids
    # bad input: refused at the preview, as a problem the page shows in the result
    refused = preview(world, form, since="yesterday")
    assert refused.status_code == 400 and "since" in refused.get_body().decode()
    assert len(world.sent) == sent


# -- the journey and the documents ------------------------------------------------------------


def test_an_events_journey_links_its_trace_and_its_aggregates_documents(
    world: RecoveryWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    with world.outbox.transaction("w9", entity=KIND, traceparent=TRACEPARENT) as tx:
        tx.publish("StockAdded", {"sku": "a"})
        tx.publish("StockAdded", {"sku": "b"})
        [first, second] = list(tx.commit().events)
    world.relay()
    world.deliver_new()
    journey = body(world.call("GET", f"outbox/journey/events/{first}"))
    assert journey["traceId"] == TRACE
    monkeypatch.setenv("OUTBOX_CONSOLE_TRACE_URL", "https://portal.example/logs?op={traceId}")
    shown = page(world, f"journey/events/{first}")
    steps = {a["data-step"]: text for a, text in elements(shown, data_step="*")}
    assert steps["stored"].startswith("Stored: yes")
    assert steps["relayed"].startswith("Relayed: relayed")
    assert steps["quarantine"] == "Quarantine: never quarantined"
    assert steps["dead-letters"] == "Dead letters: none at the watched subscriptions"
    assert "projections: applied" in steps["subscribers"]
    [(trace, _)] = elements(shown, href=f"https://portal.example/logs?op={TRACE}")
    assert trace["rel"] == "noopener noreferrer"
    [(documents, _)] = elements(shown, hx_get=f"{CONSOLE}/documents/w9")
    assert documents["hx-trigger"] == "toggle once"

    # the documents: the partition's, as stored, a page at a time
    pages, token = [], None
    while True:
        params = {"pageSize": "1"} | ({"continuationToken": token} if token else {})
        answer = body(world.call("GET", "outbox/documents/w9", params=params))
        pages.append(answer["items"])
        token = answer["continuationToken"]
        if not token:
            break
    ids = {d["id"] for items in pages for d in items}
    assert {first, second} <= ids and all(len(items) <= 1 for items in pages)
    assert {d["partitionKey"] for items in pages for d in items} == {"w9"}
    listed = page(world, "documents/w9")
    assert f"<code>{first}</code> (domainEvent, version 1" in listed
    # a token of one partition is refused for another
    token = body(world.call("GET", "outbox/documents/w9", params={"pageSize": "1"}))[
        "continuationToken"
    ]
    problem(world.call("GET", "outbox/documents/w1", params={"continuationToken": token}), 400)

    # an aggregate's journey: each event, each subscriber's view, its documents
    aggregate = page(world, f"journey/aggregates/{KIND}/w9")
    assert {a["data-event-id"] for a, _ in elements(aggregate, data_event_id="*")} >= {
        first,
        second,
    }
    [(_, view)] = elements(aggregate, data_subscription=SUBSCRIPTION)
    assert view.startswith("projections 2")  # at version 2
    assert elements(aggregate, hx_get=f"{CONSOLE}/documents/w9")


def test_the_journey_search_and_the_links_of_the_other_panels(world: RecoveryWorld) -> None:
    ids = dead_lettered(world)
    html = world.call("GET", "outbox/console", headers=PAGE).get_body().decode()
    [(form, _)] = elements(html, id="journey-form")
    assert form["data-base"] == CONSOLE and "disabled" not in form
    fields = {a["name"] for a, _ in elements(html, name="*")}
    assert {"eventId", "aggregateType", "aggregateId"} <= fields
    for path in ("deadletters", "subscribers"):
        assert elements(html, hx_get=f"{CONSOLE}/{path}", hx_trigger="*")
    # every journey link names what the search needs
    journey = page(world, f"journey/events/{ids[1]}")
    [(aggregate, _)] = elements(journey, data_journey="aggregate")
    assert (aggregate["data-aggregate-type"], aggregate["data-aggregate-id"]) == (KIND, "w1")
    [(show, _)] = elements(journey, data_show="#dead-letters")
    assert show["hx-get"] == f"{CONSOLE}/deadletters/{SUBSCRIPTION}?aggregateId=w1"


# -- the subscribers --------------------------------------------------------------------------


def test_a_held_version_says_why_and_is_released_from_the_subscribers_panel(
    world: RecoveryWorld,
) -> None:
    world.publish("w1", "StockAdded", "StockAdded", "StockAdded")
    world.relay()
    # v2 never arrives (its message expired on the subscription, say)
    world.subscriber.handle(delivered(world.sent[0]))
    world.subscriber.handle(delivered(world.sent[2]))
    world.seen = 3
    shown = page(world, "subscribers")
    [(_, text)] = elements(shown, data_aggregate_id="w1", data_missing_version="2")
    assert "version 2 has not arrived" in text  # why, in words
    [(release, _)] = elements(shown, hx_post=f"{CONSOLE}/subscribers/{SUBSCRIPTION}/release")
    assert json.loads(release["data-json"]) == {
        "aggregateType": KIND,
        "aggregateId": "w1",
        "version": 2,
    }
    assert (
        "records an accepted gap and applies the versions it held after it (3)"
        in (release["hx-confirm"])
    )
    [(unknown, text)] = elements(shown, data_subscription="other")
    assert "does not know this subscriber" in text and unknown is not None

    answer = act(world, release, reason="lost on its way")
    [(outcome, text)] = elements(answer, data_outcome="release")
    assert outcome["data-subscription"] == SUBSCRIPTION and "lost on its way" in text
    assert "What subscribers see:" in text
    [result] = world.deliver_new()
    assert result is not None and result.outcome is Outcome.GAP_ACCEPTED
    after = page(world, "subscribers")
    assert "projections holds nothing" in after and "Gaps projections accepted (1)" in after


# -- the re-drive -----------------------------------------------------------------------------


def test_a_redrive_from_the_page_is_an_operation_shown_with_its_progress(
    world: RecoveryWorld,
) -> None:
    """The Re-drive form starts a bulk operation: the result shows it (progress, state, a
    Cancel), asking for itself while it is open, until the relay's worker finished it."""
    world.publish("w1", "StockAdded", "StockAdded", "StockAdded")
    html = world.call("GET", "outbox/console", headers=PAGE).get_body().decode()
    [(form, _)] = elements(html, hx_post=f"{CONSOLE}/redrive/operation")
    begun = act(world, form, since="2000-01-01T00:00:00Z", aggregateType=KIND)
    [(shown, text)] = elements(begun, data_outcome="redrive")
    assert (shown["data-state"], shown["data-done"]) == ("created", "0")
    assert shown["hx-get"] == f"{CONSOLE}/operations/{shown['data-operation-id']}"  # asks again
    assert "Re-drive of the stored events created since 2000-01-01" in text
    assert "(counting its items)" in text and not world.sent  # nothing sent by the request
    [(cancel, _)] = elements(
        begun, hx_post=f"{CONSOLE}/operations/{shown['data-operation-id']}/cancel"
    )
    assert cancel["hx-target"] == "closest .result"
    run_sync(world.outbox.wiring().operations().bulk.work(budget_seconds=60))
    after = page(world, f"operations/{shown['data-operation-id']}")
    [(done, text)] = elements(after, data_outcome="redrive")
    assert (done["data-state"], done["data-done"], done["data-items"]) == ("done", "3", "3")
    assert "hx-get" not in done and "3 of 3 done" in text
    assert len(world.sent) == 3


def test_a_paged_redrive_is_continued_with_its_running_totals(world: RecoveryWorld) -> None:
    """`console/redrive` (one page per request) shows a page's report, and Continue sends the
    next page of the same re-drive."""
    world.publish("w1", "StockAdded", "StockAdded", "StockAdded")
    form = {"hx-post": f"{CONSOLE}/redrive"}
    first = act(world, form, since="2000-01-01T00:00:00Z", pageSize=2)
    [(report, text)] = elements(first, data_outcome="redrive")
    assert "in progress: 2 of 3 stored events sent so far" in text and "1 left" in text
    [(more, _)] = elements(first, data_redrive_continue="")
    sent = json.loads(more["data-json"])
    assert sent["since"] == "2000-01-01T00:00:00Z" and sent["pageSize"] == 2
    assert sent["continuationToken"]
    assert elements(first, data_redrive_follow="")  # and to the end
    last = act(world, more)
    [(done, text)] = elements(last, data_outcome="redrive")
    assert done["data-redrive-id"] == report["data-redrive-id"]  # the same re-drive
    assert "Re-drive done: 3 stored events sent of 3 found." in text
    assert not elements(last, data_redrive_continue="")
    assert len(world.sent) == 3


# -- scheduled events -------------------------------------------------------------------------


def test_the_journey_shows_a_scheduled_event_scheduled_overdue_released_or_cancelled(
    world: RecoveryWorld,
) -> None:
    later = timedelta(minutes=15)

    def scheduled(**due: Any) -> str:
        with world.outbox.transaction("w5", entity=KIND) as tx:
            event = tx.publish("StockCounted", {"sku": "a"}, **(due or {"deliver_after": later}))
            tx.commit()
        return event

    with world.memory:  # the kit's clock is the outbox's
        coming, dropped = scheduled(), scheduled()
        overdue = scheduled(deliver_at=datetime.now(UTC) - timedelta(minutes=5))
        world.relay()
        with world.outbox.transaction("w5", entity=KIND) as tx:
            tx.cancel(dropped)
            tx.commit()

        def step(event_id: str) -> tuple[str, str]:
            shown = page(world, f"journey/events/{event_id}")
            [(attrs, text)] = elements(shown, data_step="scheduled")
            return attrs["data-schedule"], text

        state, text = step(coming)
        assert state == "scheduled" and "(in 1" in text and "can still be cancelled" in text
        state, text = step(dropped)
        assert state == "cancelled" and "never sent" in text
        state, text = step(overdue)
        assert state == "overdue" and "its release has not come" in text
        status = page(world, "status")
        [(figure, _)] = elements(status, data_scheduled="*")
        assert (figure["data-scheduled"], figure["data-overdue"]) == ("2", "1")
        world.memory.clock.advance(later)
        world.relay()
        state, text = step(coming)
        assert state == "released" and "then relayed as any event" in text
        aggregate = page(world, f"journey/aggregates/{KIND}/w5")
        cells = [a["data-schedule"] for a, _ in elements(aggregate, data_schedule="*")]
        assert sorted(cells) == ["cancelled", "released", "released"]
