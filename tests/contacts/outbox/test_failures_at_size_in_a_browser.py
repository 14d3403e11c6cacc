"""On call at size, in a real browser (headless Chromium) against the Contacts app on the stack
`make run` gives (issue 95's first "Done when").

DEAD_LETTERS dead letters of 7 causes over 3 subscriptions (all-events, contact-projection,
tail: the three watched), plus QUARANTINED events in the relay's quarantine. The dead letters are
outbox-shaped messages (the relay's properties, each with `outboxTarget` naming its subscription)
sent to the topic in the broker's batches and dead-lettered by this test as a subscriber refusing
them would (the azure-servicebus SDK), each with its cause; the app's failure ingest (on by
default) keeps each one as a record.

- The groups panel (read in the browser) shows exactly the 7 + the quarantine's group, each with
  the count that was dead-lettered (quarantined).
- The largest group (BIG, at all-events) is retried from its row with a canary of CANARY; while
  that operation is open a second Retry of the same group through the console is refused 409
  naming it.
- Once the host works a batch after the canary (its document read from the store), the
  app's host is SIGKILLed; the stack restarts it (funcstack's `host_restart`, as `make run` has
  it) and the restarted host takes the operation over after the dead one's lease and finishes
  it: the Operations panel shows it done, every item done, none failed.
- The subscriber at all-events (this test) receives every resubmission exactly once (counted by
  event id and by MessageId); it refuses FAIL_AGAIN of them again (never the canary's), and each
  of those shows 2 attempts in its history (`GET outbox/failures/{failureId}`, the id named by
  the event's journey); the group shows them, and only them, open again.

Every wait is for what the page, the API or the subscription shows, under a named deadline
(`funcstack.deadlines`); nothing is timed (the phases are printed with their times: read with
-s). One stack, one browser, one module."""

from __future__ import annotations

import collections
import json
import os
import random
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from azure.servicebus import NEXT_AVAILABLE_SESSION, ServiceBusMessage
from azure.servicebus.exceptions import OperationTimeoutError, SessionLockLostError
from selenium.webdriver.common.by import By

from cosmos_outbox.cosmos import CosmosDocumentStore
from cosmos_outbox.documents import FAILED_MESSAGE_TYPE, commit_operations, read_feed
from cosmos_outbox_testing import run_sync
from domain.contact import Contact
from domain.values import Company, Name
from funcstack.cosmos import CosmosEndpoint
from funcstack.deadlines import LONG, SHORT, wait_for
from funcstack.scaleout import RestartPolicy
from tests.contacts.outbox.browser import chromium
from tests.contacts.outbox.resubmissions import Refusal, Resubmissions
from tests.contacts.outbox.test_console_in_a_browser import (
    OPERATOR,
    Walk,
    sign_in_settings,
    signed_in,
)
from tests.contacts.outbox.test_operations_in_a_browser import (
    audit_lines,
    bus,
    operation_row,
    say,
)
from tests.contacts.outboxes import outbox_on
from tools.httpclient import Client
from tools.stack import Ports, Stack

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.local_stack(
        "signed in through funcstack's stand-in for App Service Authentication; the app's "
        "host SIGKILLed and restarted by the stack"
    ),
]
#: The walk's size: the dead letters over the 7 causes, issue 95's 10,000 (about 5 minutes on 2
#: quiet cores, 7 with both kept busy by `scripts/slow-machine`: the Functions app's ingest,
#: one dead letter a call, keeps about 120 a second quiet). WALK_DEAD_LETTERS=N for another.
DEAD_LETTERS = int(os.environ.get("WALK_DEAD_LETTERS", "10000"))
#: The events in the relay's quarantine, of one cause (issue 95: 500).
QUARANTINED = DEAD_LETTERS // 20
SUBSCRIPTIONS = ("all-events", "contact-projection", "tail")
#: Each cause: its subscription and its share of DEAD_LETTERS (the first, the big group).
SHARES = (
    ("all-events", 30),
    ("all-events", 8),
    ("all-events", 4),
    ("contact-projection", 19),
    ("contact-projection", 10),
    ("tail", 17),
    ("tail", 12),
)
#: The causes' texts: no digit, quote or GUID (the groups show a cause with those made
#: placeholders).
WHY = (
    "KeyError: customerId missing",
    "ValueError: phone number not valid",
    "TimeoutError: the CRM did not answer",
    "PermissionError: projection container refused",
    "RuntimeError: schema not known",
    "ConnectionError: search index down",
    "UnicodeDecodeError: body not text",
)
CAUSES = tuple(
    (entity, f"refused by the walk subscriber, {why}", DEAD_LETTERS * share // 100)
    for (entity, share), why in zip(SHARES, WHY, strict=True)
)
assert sum(n for _, _, n in CAUSES) == DEAD_LETTERS
BIG_ENTITY, BIG_CAUSE, BIG = CAUSES[0]
QUARANTINE_REASON = "ValueError: the walk set it aside, its body unreadable"
#: The canary of the big group's retry, and how long it waits for its events to fail again.
CANARY, CANARY_WAIT = 5, 30
#: Of the big group's resubmissions, how many the subscriber refuses again (never the canary's).
FAIL_AGAIN = 20
#: The sessions each session-ful subscription's dead letters are spread over.
SESSIONS = 20
REFUSED = "HandlerRefused"
#: Where the operations' documents are (the outbox's container, their own partition).
OPERATIONS = "outbox-operations"


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, shared_cosmos: CosmosEndpoint
) -> Iterator[Stack]:
    with Stack(
        shared_cosmos=shared_cosmos,
        workdir=tmp_path_factory.mktemp("failures-at-size") / "stack",
        ports=Ports.free(),
        host_restart=RestartPolicy(),  # what `make run` gives its stack (tools.stack.serve)
        settings_overrides={
            # the three subscriptions watched: their dead letters kept as failure records
            "OUTBOX_SUBSCRIPTIONS": "contact-projection=contact-projections,all-events,tail",
            # the operations' worker looks every 2 s (the app's default: 5 s)
            "OUTBOX_OPERATIONS_SCHEDULE": "*/2 * * * * *",
            "BACKLOG_ESTIMATE_SCHEDULE": "0 0 0 1 1 *",
            **sign_in_settings(),
        },
    ) as started:
        yield started


@pytest.fixture(scope="module")
def walk(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Walk]:
    shots = tmp_path_factory.mktemp("failures-at-size-screenshots")
    print(f"\nscreenshots: {shots}")
    with chromium(tmp_path_factory.mktemp("chromium-profile")) as driver:
        yield signed_in(Walk(driver, stack, shots))


def outbox_message(entity: str, session: str, version: int) -> ServiceBusMessage:
    """A contact's event as the relay sends it (its properties), for `entity` only."""
    event = str(uuid.uuid4())
    return ServiceBusMessage(
        json.dumps({"contactId": session, "description": f"change {version}", "x": "y" * 150}),
        message_id=event,
        session_id=session,
        subject="ContactDescribedEvent",
        content_type="application/json",
        application_properties={
            "aggregateType": "contact",
            "contactId": session,
            "action": "ContactDescribedEvent",
            "version": version,
            "outboxFormat": 2,
            "cloudEvents_id": event,
            "cloudEvents_type": "ContactDescribedEvent",
            "cloudEvents_source": "/contacts",
            "outboxTarget": entity,
        },
    )


def send_batched(stack: Stack, messages: list[ServiceBusMessage]) -> None:
    """`messages` sent to the app's topic in the broker's batches."""
    with bus(stack) as client, client.get_topic_sender(stack.settings()["SERVICEBUS_TOPIC"]) as s:
        # under the 256 KB link limit by a margin (funcstack's broker counts a full SDK batch
        # 11 bytes over it and refuses it)
        batch = s.create_message_batch(max_size_in_bytes=250_000)
        for message in messages:
            try:
                batch.add_message(message)
            except ValueError:  # full
                s.send_messages(batch)
                batch = s.create_message_batch(max_size_in_bytes=250_000)
                batch.add_message(message)
        if len(batch):
            s.send_messages(batch)


def dead_letter_all(stack: Stack, entity: str, causes: dict[str, tuple[str, str]]) -> None:
    """Every message at `entity` received and dead-lettered with its cause (`causes`: session
    and cause by MessageId), as its subscriber refusing it would, until all of them are (a
    session left as soon as its last one is)."""
    left = set(causes)
    in_session = collections.Counter(session for session, _ in causes.values())
    end = time.monotonic() + LONG
    with bus(stack) as client:
        while left:
            assert time.monotonic() < end, f"{len(left)} never received at {entity}"
            try:
                with client.get_subscription_receiver(
                    stack.settings()["SERVICEBUS_TOPIC"],
                    entity,
                    session_id=NEXT_AVAILABLE_SESSION if entity != "tail" else None,
                    max_wait_time=5,
                    prefetch_count=100,
                ) as receiver:
                    while batch := receiver.receive_messages(100, max_wait_time=2):
                        for message in batch:
                            mid = str(message.message_id)
                            assert mid in causes, f"not the walk's message at {entity}: {mid}"
                            session, cause = causes[mid]
                            receiver.dead_letter_message(
                                message, reason=REFUSED, error_description=cause
                            )
                            if mid in left:
                                left.discard(mid)
                                in_session[session] -= 1
                        if not left or (entity != "tail" and in_session[session] == 0):
                            break
            except (OperationTimeoutError, SessionLockLostError):
                continue


def dead_lettered(stack: Stack) -> dict[str, set[str]]:
    """CAUSES' dead letters at their subscriptions: each cause's event ids."""
    rng = random.Random(95)
    by_cause: dict[str, set[str]] = {}
    at: dict[str, dict[str, tuple[str, str]]] = {entity: {} for entity in SUBSCRIPTIONS}
    messages: list[ServiceBusMessage] = []
    for entity, cause, n in CAUSES:
        ids = set()
        for i in range(n):
            session = f"walk95-{entity}-{rng.randrange(SESSIONS)}"
            message = outbox_message(entity, session, i + 2)
            messages.append(message)
            ids.add(str(message.message_id))
            at[entity][str(message.message_id)] = (session, cause)
        by_cause[cause] = ids
    send_batched(stack, messages)
    workers = [
        threading.Thread(target=dead_letter_all, args=(stack, entity, at[entity]), daemon=True)
        for entity in SUBSCRIPTIONS
    ]
    failed: list[BaseException] = []
    threading.excepthook = lambda args: failed.append(args.exc_value or Exception())
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=LONG + SHORT)
    threading.excepthook = threading.__excepthook__
    assert not failed and not any(w.is_alive() for w in workers), failed
    return by_cause


def quarantined(stack: Stack, n: int, reason: str) -> set[str]:
    """`n` events (each a contact's description changed) put in the quarantine as the app's
    relay puts them, failed messages kept as data (OUTBOX_FAILURE_INGEST on: a failure record
    of each in its group, its summary counted): their ids. The events themselves are never
    written, so never relayed. One cause, one event type: one group."""
    store = CosmosDocumentStore(stack.contacts_container())
    quarantine = outbox_on(store, failure_records=True).wiring().quarantine
    put: set[str] = set()
    while len(put) < n:
        contact = Contact.create(
            name=Name(first_name="Quin", last_name="Walk"),
            email="quin@example.com",
            company=Company(company_name="Outbox"),
        )
        for i in range(min(50, n - len(put))):
            contact.describe(f"change {i}")
        operations = commit_operations(
            contact, contact.collect_events(), etag=None, event_ttl_seconds=864000, traceparent=None
        )
        for event in read_feed([dict(op.document or {}) for op in operations]):
            if getattr(event, "version", 1) > 1:  # its changes, not its creation
                run_sync(quarantine.put(event, reason=reason))  # type: ignore[arg-type]
                put.add(str(getattr(event, "event_id", "")))
    kept: list[Any] = list(
        stack.contacts_container().query_items(
            "SELECT VALUE c.eventId FROM c WHERE c.type = @type AND c.entityKind = 'quarantine'",
            parameters=[{"name": "@type", "value": FAILED_MESSAGE_TYPE}],
            enable_cross_partition_query=True,
        )
    )
    assert sorted(kept) == sorted(put), f"{len(kept)} failure records of {len(put)} quarantined"
    return put


def groups_shown(walk: Walk) -> dict[tuple[str, str], tuple[str, int]] | None:
    """The groups panel's rows as the page shows them now: (where, cause) -> (id, count)."""
    rows = walk.driver.execute_script(
        """return Array.from(document.querySelectorAll('#groups-panel tr[data-group-id]'))
             .map(r => [r.cells[0].innerText.trim(), r.cells[1].childNodes[0].textContent.trim(),
                        r.dataset.groupId, r.dataset.count]);"""
    )
    shown: dict[tuple[str, str], tuple[str, int]] = {}
    for where, cause, group, count in rows or []:
        shown[(str(where), str(cause))] = (str(group), int(count))
    return shown


def expected_groups(by_cause: dict[str, set[str]]) -> dict[tuple[str, str], int]:
    wanted = {
        (f"dead letters at {entity}", f"{REFUSED}: {cause}"): len(by_cause[cause])
        for entity, cause, _ in CAUSES
    }
    wanted[("the quarantine", QUARANTINE_REASON)] = QUARANTINED
    return wanted


def refresh_groups(walk: Walk) -> None:
    walk.driver.find_element(By.CSS_SELECTOR, "#groups .section-head button").click()
    time.sleep(1)  # the refresh's answer, before looking again (not a verdict)


def retry_from_the_row(walk: Walk, group: str) -> tuple[str, str | None]:
    """The group's Retry… (canary CANARY, waiting CANARY_WAIT) through its preview and dialog:
    the dialog's text, and what `#groups-result` shows after (an operation's id, or None)."""
    shown = walk.find('#groups-result [data-outcome="group-retry"][data-operation-id]')
    earlier = shown.get_attribute("data-operation-id") if shown is not None else None
    walk.ask_group_retry(group, canary=CANARY, waiting=CANARY_WAIT)
    text = walk.confirm()

    def answered() -> tuple[str, str | None] | None:
        problem = walk.find("#groups-result .problem[data-status]")
        if problem is not None:
            return problem.text, None
        card = walk.find('#groups-result [data-outcome="group-retry"][data-operation-id]')
        started = card.get_attribute("data-operation-id") if card is not None else None
        return (text, started) if started is not None and started != earlier else None

    return walk.wait("the retry's answer", answered, SHORT)


def api_json(stack: Stack, path: str) -> Any:
    """The app's answer to a GET of `path` (None: not a 200 yet, e.g. a 503 while Cosmos DB
    answers slowly under load; the caller waits for it)."""
    api = Client(stack.api_url)
    try:
        answer = api.request("GET", path)
        return answer.json() if answer.status == 200 else None
    finally:
        api.close()


def stored_operation(stack: Stack, operation: str) -> dict[str, Any]:
    """The operation's document as the store holds it (the operations' own partition)."""
    return dict(stack.contacts_container().read_item(operation, partition_key=OPERATIONS))


def host_pid(stack: Stack) -> int | None:
    """The pid of the contacts app's host while it runs."""
    runner = stack.runner
    return runner.process.pid if runner is not None and runner.process.poll() is None else None


# its waits are each under a named deadline: the whole walk gets their sum
@pytest.mark.timeout(12 * LONG)
def test_ten_thousand_failures_grouped_exactly_and_a_big_group_retried_through_a_host_kill(
    walk: Walk, stack: Stack
) -> None:
    began = time.monotonic()
    quarantine = quarantined(stack, QUARANTINED, QUARANTINE_REASON)
    say(began, f"{len(quarantine)} events quarantined")
    by_cause = dead_lettered(stack)
    say(began, f"{sum(map(len, by_cause.values()))} dead letters of {len(by_cause)} causes")

    # the groups panel: exactly the 7 causes' groups and the quarantine's, each counted as it
    # was dead-lettered (quarantined), once every dead letter is kept
    wanted = expected_groups(by_cause)
    last: list[dict[tuple[str, str], int]] = []

    def exact() -> dict[tuple[str, str], tuple[str, int]] | None:
        shown = groups_shown(walk)
        counts = {key: n for key, (_, n) in (shown or {}).items()}
        if counts == wanted:
            return shown
        if not last or last[-1] != counts:
            last.append(counts)
        refresh_groups(walk)
        return None

    try:
        shown = walk.wait("the 8 groups counted exactly", exact, 2 * LONG)
    except AssertionError:
        raise AssertionError(f"groups shown last: {last[-1:]}; wanted {wanted}") from None
    say(began, f"the groups panel: {sorted(wanted.values())}")
    walk.shot("groups-exact", "#groups")
    group, _ = shown[(f"dead letters at {BIG_ENTITY}", f"{REFUSED}: {BIG_CAUSE}")]

    big = by_cause[BIG_CAUSE]
    refuse = set(random.Random(9595).sample(sorted(big), FAIL_AGAIN + CANARY))
    assert stack.servicebus is not None
    subscriber = Resubmissions(
        stack.servicebus.connection_string,
        stack.settings()["SERVICEBUS_TOPIC"],
        BIG_ENTITY,
        Refusal(frozenset(refuse), CANARY, REFUSED, BIG_CAUSE),
    )
    subscriber.start()
    try:
        dialog, operation = retry_from_the_row(walk, group)
        assert operation is not None, dialog
        assert f"Retry the {BIG} event(s) of this group" in dialog, dialog
        say(began, f"operation {operation} started from the console")
        # a second operation on the same group while the first is open: refused, 409 naming it
        refusal, again = retry_from_the_row(walk, group)
        assert again is None and "(409)" in refusal and operation in refusal, refusal
        say(began, f"a second retry refused: {refusal}")
        walk.shot("second-retry-refused", "#groups")

        walk.driver.find_element(By.CSS_SELECTOR, "#operations .section-head button").click()
        canary = wait_for(
            lambda: (
                (o := api_json(stack, f"/outbox/operations/{operation}"))
                and (o["done"] + o["failed"] or o["state"] not in ("created", "canary"))
                and not o["inFlight"]
                and o
            ),
            "the canary sent",
            LONG,
        )
        assert (canary["state"], canary["done"], canary["items"]) == ("canary", CANARY, BIG)
        wait_for(lambda: sum(subscriber.seen().values()) == CANARY, "the canary received")
        say(began, "the canary sent and received")

        # the host SIGKILLed mid-operation: once it works a batch after the canary (its keys
        # written, some of it perhaps sent; the operation's document read from the store)
        held = wait_for(
            lambda: (
                (doc := stored_operation(stack, operation))["owner"]
                and doc["batch"]
                and doc["state"] == "running"
                and doc
            ),
            "the host working a batch after the canary",
            LONG,
            every=0.02,
        )
        killed = host_pid(stack)
        assert killed is not None
        os.kill(killed, signal.SIGKILL)
        at_kill = stored_operation(stack, operation)
        assert at_kill["state"] != "done" and at_kill["owner"] == held["owner"], at_kill
        say(began, f"host {killed} SIGKILLed working a batch, at {at_kill['counts']}")
        wait_for(lambda: host_pid(stack) not in (None, killed), "the host restarted", SHORT)
        say(began, f"the stack restarted the host ({host_pid(stack)})")

        def finished() -> dict[str, str] | None:
            row = operation_row(walk, operation)
            return row if row is not None and row["state"] == "done" else None

        done = walk.wait("the operation done by the restarted host", finished, 2 * LONG)
        say(began, f"the operation done: {done}")
        walk.shot("operation-done", "#operations")
        assert (done["items"], done["done"], done["failed"]) == (str(BIG), str(BIG), "0"), done
        wait_for(lambda: set(subscriber.seen()) >= big, "every resubmission received", LONG)
    finally:
        subscriber.stop(timeout=SHORT)
    assert not subscriber.is_alive(), "the subscription was never drained"
    events, refused = subscriber.seen(), subscriber.refused
    # every item sent exactly once: one message per event id, one MessageId each (a message the
    # broker gave again after a lost lock is the same message: `redelivered`)
    assert subscriber.others == 0, "only resubmissions reach the big entity"
    assert set(events) == big
    assert subscriber.twice() == {}, f"received more than once: {subscriber.twice()}"
    assert len(subscriber.message_ids) == BIG and set(subscriber.message_ids.values()) == {1}
    assert len(refused) >= FAIL_AGAIN, refused
    say(
        began,
        f"{len(events)} received once each; {len(refused)} refused again; "
        f"{subscriber.redelivered} given again by the broker (a lock lost)",
    )

    # those refused again: the same failure with a second attempt, open again in their group
    def histories() -> list[dict[str, Any]] | None:
        found = []
        for event in refused:  # the event's journey names its failure; the failure its history
            journey = api_json(stack, f"/outbox/journey/events/{event}")
            kept = [f for f in (journey or {}).get("failures", []) if f["entity"] == BIG_ENTITY]
            shown = api_json(stack, f"/outbox/failures/{kept[0]['id']}") if kept else None
            if shown is None:
                return None
            found.append(shown["failure"])
        return found if all(f["attemptCount"] == 2 for f in found) else None

    for failure in wait_for(histories, "each refused again with its second attempt", SHORT):
        assert (failure["state"], len(failure["attempts"])) == ("open", 2), failure
        assert [a["reason"] for a in failure["attempts"]] == [REFUSED, REFUSED], failure
        assert [(n["what"], n["operation"]) for n in failure["history"]] == [
            ("retried", operation)
        ], failure
    after = {key: n for key, n in wanted.items() if key[1] != f"{REFUSED}: {BIG_CAUSE}"}
    after[(f"dead letters at {BIG_ENTITY}", f"{REFUSED}: {BIG_CAUSE}")] = len(refused)

    def regrouped() -> bool | None:
        counts = {key: n for key, (_, n) in (groups_shown(walk) or {}).items()}
        if counts == after:
            return True
        refresh_groups(walk)
        return None

    walk.wait("the big group open again with those refused again only", regrouped, SHORT)
    walk.shot("groups-after", "#groups")
    [line] = [line for line in audit_lines(stack, "operations.groups.retry") if operation in line]
    assert f"by {OPERATOR}" in line and f"done: {BIG} of {BIG} done, 0 failed" in line, line
    say(began, "done")
