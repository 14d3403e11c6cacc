"""Recovery end to end on the local stack (one stack for the module: the Contacts app, its
subscriber app on `contact-projection`, Service Bus with the topic's duplicate-detection window
of a day, as deployed), every action taken with the package's command line (`python -m
cosmos_outbox`, the operators' routes):

1. a poison event is quarantined, then discarded: the subscriber, which held the version after
   it, applies it, and its status (the operators' `subscribers`) shows the accepted gap;
2. the subscriber's handler fails (its projection container misnamed: a bad deploy), the event
   is dead-lettered after MaxDeliveryCount, the subscriber is fixed, and the dead letter is
   resubmitted inside the duplicate window: applied exactly once, and the version held behind it
   too;
3. a re-drive inside the duplicate window: what its report says reached the topic is what the
   `all-events` subscription receives, and what it says the subscriber will apply is what it
   applies (nothing: it has them all).

Each fails on the code before issue 53: the discard sent nothing (the subscriber held version 3
for ever); a resubmission had nowhere to go but a MessageId the topic drops; the re-drive
answered "sent" for messages the topic dropped.

Cosmos DB and Service Bus are the run's (`shared_cosmos`, `shared_servicebus`: a database and a
topic of the stack's own): no test stops, freezes or slows them, counts the store's backlog or
changes the namespace; the endpoint's log, every stack's, is read for the one message id the
resubmission sent (`shared_servicebus_log`)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from azure.cosmos.exceptions import CosmosResourceNotFoundError

from funcstack import deadlines
from funcstack.cosmos import CosmosEndpoint
from funcstack.deadlines import LONG, SHORT
from funcstack.servicebus import ServiceBusEndpoint
from tests.contacts.outbox.test_operating_the_outbox import plant_history
from tests.contacts.outbox.test_outbox_guarantees import NOTHING_MORE
from tools.httpclient import Client
from tools.receive import Received, count_at_least, drain
from tools.stack import Ports, Stack

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.local_stack("the subscriber app in a host beside it, its log read"),
]
ROOT = Path(__file__).resolve().parents[3]
SUBSCRIPTION = "contact-projection"
#: the subscriber's line for each event it handled (cosmos_outbox.subscriber's dispatcher)
HANDLED = re.compile(
    r"event (?P<event>\S+) \(contact (?P<contact>\S+), version (?P<version>\d+), "
    r"delivery (?P<delivery>\d+)\): (?P<outcome>[a-z ]+)"
)


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory,
    shared_cosmos: CosmosEndpoint,
    shared_servicebus: ServiceBusEndpoint,
) -> Iterator[Stack]:
    workdir = Path(tmp_path_factory.mktemp("recovery"))
    with Stack(
        shared_cosmos=shared_cosmos,
        shared_servicebus=shared_servicebus,
        workdir=workdir / "stack",
        ports=Ports.free(),
        with_subscriber=True,
        # The app's own feed poll delay (1 s): no test here times the relay or kills it
        # mid-send; idle, a stack polling every 100 ms took 4.8 % of a core, every 1 s 1.3 %
        # (measured once; the figures' history is in git).
    ) as stack:
        yield stack


#: Who the command line acts as (the user and machine it runs as follow).
COMMAND_LINE = "the command line as "


def cli(stack: Stack, *args: str, code: int = 0) -> Any:
    """`python -m cosmos_outbox --json ...` on the Contacts app's stores; its JSON answer."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "cosmos_outbox",
            "--settings",
            str(stack.settings_file),
            "--json",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=LONG,  # a hang guard: an interpreter importing the SDKs, then a few calls
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == code, (done.stdout, done.stderr)
    return json.loads(done.stdout) if done.stdout else None


#: How often a wait asks the command line: each ask is an interpreter importing the SDKs (about
#: 0.9 s of CPU), and every 0.3 s a wait for the relay and the subscriber was mostly those.
CLI_EVERY = 2.0


def wait_for[T](
    check: Callable[[], T | None], what: str, deadline: float = LONG, *, every: float = 0.3
) -> T:
    """`funcstack.deadlines.wait_for`: by default under LONG (an event's way through the relay
    and the subscriber, ten deliveries before a dead letter), polling every 0.3 s."""
    return deadlines.wait_for(check, what, deadline, every=every)


def projection(stack: Stack, contact: str) -> dict[str, Any] | None:
    try:
        found: dict[str, Any] = stack.projections_container().read_item(
            contact, partition_key=contact
        )
    except CosmosResourceNotFoundError:
        return None
    return found


def handled(stack: Stack, contact: str) -> list[dict[str, str]]:
    text = stack.log_path("subscriber").read_text("utf-8", "replace")
    return [m.groupdict() for m in HANDLED.finditer(text) if m["contact"] == contact]


def outcomes_once_logged_applied(
    stack: Stack, contact: str, version: str
) -> Counter[tuple[str, str]] | None:
    """The subscriber's outcomes for the contact, once its log says the version was applied."""
    outcomes = Counter((o["version"], o["outcome"]) for o in handled(stack, contact))
    return outcomes if outcomes[(version, "applied")] else None


def subscriber_view(stack: Stack) -> dict[str, Any]:
    [view] = [
        s for s in cli(stack, "subscribers")["subscribers"] if s["subscription"] == SUBSCRIPTION
    ]
    return dict(view)


def test_a_discarded_poison_event_releases_the_version_the_subscriber_held(stack: Stack) -> None:
    contact, ids = plant_history(stack.contacts_container(), "Dora", 2, big_version=2)
    # v1 applied, v2 quarantined by the relay (its notice recorded as a known gap), v3 held
    held = wait_for(
        lambda: next(
            (h for h in subscriber_view(stack)["held"] if h["aggregateId"] == contact), None
        ),
        "the subscriber to hold version 3",
        every=CLI_EVERY,
    )
    assert (held["missingVersion"], held["heldVersions"]) == (2, [3])
    assert "quarantined by the outbox" in held["reason"] and ids[1] in held["release"]

    discarded = cli(stack, "quarantine", "discard", ids[1], "--reason", "typed by hand")
    done = wait_for(
        lambda: (p := projection(stack, contact)) is not None and p["version"] == 3 and p,
        "the subscriber to apply version 3",
        deadline=SHORT,
    )
    # who acted, as it was (issue 66): the command line, as the user and machine it ran as
    assert discarded["status"] == "discarded"
    assert discarded["discardedBy"].startswith(COMMAND_LINE)
    assert discarded["notice"]["subject"] == "OutboxEventDiscarded"
    assert "accepted gap" in discarded["subscribersWillSee"]
    assert done["data"]["description"] == "Dora change 1"
    view = subscriber_view(stack)
    assert not [h for h in view["held"] if h["aggregateId"] == contact]
    [gap] = [g for g in view["acceptedGaps"] if g["aggregateId"] == contact]
    assert (gap["version"], gap["eventId"], gap["discardedBy"], gap["reason"]) == (
        2,
        ids[1],
        discarded["discardedBy"],
        "typed by hand",
    )
    journey = cli(stack, "journey", "--event-id", ids[1])
    assert journey["quarantine"]["status"] == "discarded"
    sights = {sight["subscription"]: sight["state"] for sight in journey["subscribers"]}
    assert (
        sights[SUBSCRIPTION] == "given up"
    )  # (all-events, whose subscriber is not known: unknown)


def test_a_dead_letter_resubmitted_inside_the_duplicate_window_is_applied_once(
    stack: Stack, shared_servicebus_log: Path
) -> None:
    api = Client(stack.api_url)
    try:
        # a bad deploy: the subscriber's projection container misnamed, every event fails
        stack.stop_subscriber()
        stack.start_subscriber(PROJECTION_CONTAINER="no-such-container")
        created = api.request(
            "POST",
            "/contacts",
            json_body={
                "firstName": "Lena",
                "lastName": "Letter",
                "email": "lena@example.com",
                "companyName": "Dead",
            },
        )
        assert created.status == 201, created.body
        contact = created.json()["id"]
        [letter] = wait_for(
            lambda: cli(stack, "deadletters", "list", SUBSCRIPTION, "--aggregate-id", contact)[
                "items"
            ],
            "the event to be dead-lettered after MaxDeliveryCount",
            every=CLI_EVERY,
        )
        assert (letter["version"], letter["deadLetterReason"]) == (1, "MaxDeliveryCountExceeded")
        assert letter["deliveryCount"] == 10
        event = letter["eventId"]

        # fixed: deployed again with the right setting; a later event is held behind version 1
        stack.stop_subscriber()
        stack.start_subscriber()
        described = api.request(
            "POST", f"/contacts/{contact}/update-description", json_body={"description": "v2"}
        )
        assert described.status == 204, described.body
        wait_for(
            lambda: any(o["outcome"] == "held" for o in handled(stack, contact)),
            "version 2 to be held",
        )
    finally:
        api.close()

    [letter] = cli(stack, "deadletters", "list", SUBSCRIPTION, "--aggregate-id", contact)["items"]
    number = str(letter["sequenceNumber"])  # named: one request acts on it (a filter: an operation)
    resubmitted = cli(stack, "deadletters", "resubmit", SUBSCRIPTION, number)
    done = wait_for(
        lambda: (p := projection(stack, contact)) is not None and p["version"] == 2 and p,
        "the resubmitted event and the one held behind it to be applied",
        deadline=SHORT,
    )
    assert (resubmitted["done"], resubmitted["failed"], resubmitted["remaining"]) == (1, 0, 0)
    [moved] = resubmitted["handled"]
    assert moved["eventId"] == event and moved["sentMessageId"] != event
    assert done["data"]["description"] == "v2"
    # the subscriber's log is written by its host after the projection (make test once read it
    # a moment before the line came)
    outcomes = wait_for(
        lambda: outcomes_once_logged_applied(stack, contact, "1"),
        "the subscriber's log to say version 1 was applied",
    )
    assert outcomes[("1", "applied")] == 1  # once, by the event id
    assert cli(stack, "deadletters", "list", SUBSCRIPTION, "--aggregate-id", contact)["items"] == []
    # inside the window: the event's own MessageId was taken, the resubmission's was new
    log = shared_servicebus_log.read_text("utf-8", "replace")
    assert f"duplicate message id {moved['sentMessageId']}" not in log


def test_a_redrive_inside_the_window_reports_what_the_subscription_received(stack: Stack) -> None:
    connection = stack.servicebus.connection_string if stack.servicebus else ""
    topic = stack.settings()["SERVICEBUS_TOPIC"]
    api = Client(stack.api_url)
    try:
        created = api.request(
            "POST",
            "/contacts",
            json_body={
                "firstName": "Reed",
                "lastName": "Drive",
                "email": "reed@example.com",
                "companyName": "Again",
            },
        )
        assert created.status == 201, created.body
        contact = created.json()["id"]
        for text in ("one", "two"):
            reply = api.request(
                "POST", f"/contacts/{contact}/update-description", json_body={"description": text}
            )
            assert reply.status == 204, reply.body
    finally:
        api.close()
    wait_for(
        lambda: (p := projection(stack, contact)) is not None and p["version"] == 3,
        "the subscriber to apply the three events",
    )
    # the contact's session of all-events emptied of its three events, so that only the
    # re-drive arrives there after
    drain(connection, until=count_at_least(3), timeout=SHORT, topic=topic, sessions=[contact])

    report = cli(
        stack,
        "redrive",
        "--since",
        "2000-01-01T00:00:00Z",
        "--aggregate-type",
        "contact",
        "--aggregate-id",
        contact,
    )
    assert (report["events"], report["accepted"], report["quarantined"]) == (3, 3, 0)
    counts = {c["subscription"]: c for c in report["subscribers"]}
    mine = counts[SUBSCRIPTION]
    assert (mine["alreadyApplied"], mine["held"], mine["toApply"], mine["known"]) == (3, 0, 0, True)
    # a subscription whose subscriber the app does not know is named too, with what it receives
    assert (counts["all-events"]["known"], counts["all-events"]["receives"]) == (False, 3)
    received: list[Received] = drain(
        connection,
        until=lambda got: len(got) >= report["accepted"],
        timeout=SHORT,
        topic=topic,
        sessions=[contact],
    )
    received += drain(  # no more
        connection,
        until=lambda got: False,
        timeout=NOTHING_MORE,
        topic=topic,
        sessions=[contact],
    )
    assert len(received) == report["accepted"]
    assert sorted(r.properties["cloudEvents_id"] for r in received) == sorted(
        e["id"]
        for e in stack.contacts_container().query_items(
            "SELECT c.id FROM c WHERE c.type = 'domainEvent'", partition_key=contact
        )
    )
    assert {r.properties["outboxRedrive"] for r in received} == {report["redriveId"]}
    # the subscriber received them too, and applied none (it had them all)
    wait_for(
        lambda: sum(o["outcome"] == "duplicate" for o in handled(stack, contact)) >= 3,
        "the subscriber to drop the three re-driven events",
    )
    projected = projection(stack, contact)
    assert projected is not None and projected["version"] == 3
