"""The Contacts app scaled out as on Flex Consumption, under chaos (issue 44 item 8): its HTTP
functions on 2 host instances behind one front, its relay (the Cosmos DB trigger) on 3, the
contacts container on 4 physical partitions, the subscriber app projecting; writers create and
update many contacts through the front while the container is split live, a relay instance is
SIGKILLed, another SIGSTOPped past the lease expiry and resumed, and one more is added.

Then: nothing lost (every committed event reaches the topic and the projection), nothing
delivered twice (the topic's duplicate detection drops the resends; the projection applies each
event once and equals the API version for version), no contact's events out of order (per
contact only: order is promised per partition key), and after each kill (SIGKILL or SIGSTOP)
every lease owned by a live instance: the lease intervals are set (FAST_TAKEOVER, funcstack's
local-only settings), the takeover waited for under a named deadline past expiry + one acquire
interval, its seconds reported, never asserted (cosmos-changefeed's own tests hold the lease
protocol: no lease taken before it expires).

Azure's behaviour followed, through funcstack: the change feed processor's lease protocol
(Azure/azure-cosmos-dotnet-v3 ``ChangeFeedProcessor``: owners, expiry, equal-partitions
balancing; packages/funcstack/docs/functions-host.md "The lease protocol"), Flex Consumption's
per-function scaling ("Flex Consumption plan hosting"), a split answered 410/1002 as the
gateway does (packages/funcstack/docs/cosmos.md "Physical partitions"), and Service Bus
duplicate detection within the deployed window (tools/servicebus-config.json, equal to
deploy/'s: tests/deploy/test_bicep.py). The figures go to .stack/e2e-report.json and
docs/faults.md.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import random
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import tests.subscriber  # noqa: F401  (puts subscriber/ on sys.path)
from cosmos_outbox_testing import event_fields
from funcstack import deadlines
from funcstack.cosmos import CosmosEndpoint
from funcstack.deadlines import LONG, SHORT
from funcstack.scaleout import AppInstances, Instance
from funcstack.servicebus import ServiceBusEndpoint
from tests.conftest import LATE_SETTLE_MS
from tests.contacts.conftest import indexed_functions
from tests.contacts.outbox.test_outbox_guarantees import (
    FAST_TAKEOVER,
    NOTHING_MORE,
    assert_exactly_once_in_order,
    dropped_as_duplicates,
    record,
    stored_events,
)
from tests.deploy.templates import iso_duration_seconds
from tests.subscriber.test_subscriber import invocations, projection
from tools.httpclient import Client
from tools.receive import count_at_least, drain
from tools.stack import SERVICEBUS_CONFIG, Ports, Stack

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.local_stack("instances killed, paused and added; the container split"),
]

#: The lease intervals of FAST_TAKEOVER (funcstack's local-only settings, milliseconds), in s.
ACQUIRE = int(FAST_TAKEOVER["FUNCTIONS_HOST_COSMOS_LEASE_ACQUIRE_INTERVAL"]) / 1000
EXPIRY = int(FAST_TAKEOVER["FUNCTIONS_HOST_COSMOS_LEASE_EXPIRATION_INTERVAL"]) / 1000
#: The Service Bus endpoint acknowledges each send this late (the message is on the topic at
#: once): a relay invocation lasts that long, so a relay instance killed or paused while it
#: has work is caught between a send and its checkpoint, and its batch is sent again by the
#: lease's next owner (in Azure an ack takes milliseconds: the same happens, less often).
SETTLE_MS = 1500
WRITERS = 8
#: Contacts a writer creates before it only updates them.
CONTACTS_PER_WRITER = 8
#: Writes committed between two faults, so each fault lands while the writers write.
WRITES_BETWEEN_FAULTS = 60
#: The least time between two writes of a writer: the writers' pace, so the backlog the relay
#: and the subscriber catch up on stays bounded on a fast machine.
PACE_SECONDS = 0.3


def relay_function() -> str:
    """The app's change-feed relay, found by indexing the app: its Cosmos DB trigger."""
    [name] = [
        name
        for name, f in indexed_functions().items()
        if json.loads(f.get_function_json())["bindings"][0]["type"] == "cosmosDBTrigger"
    ]
    return name


def duplicate_window_seconds() -> float:
    """The contacts topic's duplicate-detection window, as the local stack declares it."""
    config = json.loads(SERVICEBUS_CONFIG.read_text("utf-8"))
    [topic] = [
        t
        for ns in config["UserConfig"]["Namespaces"]
        for t in ns["Topics"]
        if t["Name"] == "contact-events"
    ]
    return iso_duration_seconds(topic["Properties"]["DuplicateDetectionHistoryTimeWindow"])


@dataclass
class Started:
    stack: Stack
    #: How long the stack took to start (services, the subscriber, the app's 6 instances).
    seconds: float


@pytest.fixture
def started(
    tmp_path: Path, shared_cosmos: CosmosEndpoint, late_servicebus: ServiceBusEndpoint
) -> Iterator[Started]:
    """On the run's Cosmos DB endpoint and the late Service Bus endpoint (tests/conftest.py's
    `late_servicebus`, acknowledging `SETTLE_MS` late; the claim check's killed relay uses it
    before this module), a database and a topic of its own."""
    assert SETTLE_MS == LATE_SETTLE_MS
    relay = relay_function()
    began = time.monotonic()
    with Stack(
        shared_cosmos=shared_cosmos,
        shared_servicebus=late_servicebus,
        workdir=tmp_path / "stack",
        ports=Ports.free(),
        with_subscriber=True,
        runner_instances={"http": 2, f"function:{relay}": 3},
        contacts_partitions=4,
        # the declared duplicate window (the deployed one), never a shorter one
        duplicate_window_seconds=None,
        settings_overrides={"FEED_POLL_DELAY_MS": "100", **FAST_TAKEOVER},
    ) as stack:
        yield Started(stack, time.monotonic() - began)


# -- the writers ----------------------------------------------------------------------------------


@dataclass
class Writers:
    """`WRITERS` threads writing through the API's front until stopped: each creates contacts
    of its own (up to `CONTACTS_PER_WRITER`) and changes their description or email."""

    url: str
    contacts: list[str] = field(default_factory=list)
    statuses: Counter[int] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _threads: list[threading.Thread] = field(default_factory=list)

    @property
    def committed(self) -> int:
        with self._lock:
            return sum(n for status, n in self.statuses.items() if status < 300)

    def start(self) -> Writers:
        self._threads = [
            threading.Thread(target=self._write, args=(n,), daemon=True) for n in range(WRITERS)
        ]
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(SHORT)  # its last request answered (the client's own timeout)
            assert not thread.is_alive(), f"a writer still writing {SHORT:g} s after its stop"

    def _write(self, n: int) -> None:
        rng = random.Random(n)
        client = Client(self.url)
        mine: list[str] = []
        try:
            while not self._stop.wait(PACE_SECONDS):
                if len(mine) < CONTACTS_PER_WRITER and (not mine or rng.random() < 0.4):
                    reply = client.request(
                        "POST",
                        "/contacts",
                        json_body={
                            "firstName": f"Chaos{n}",
                            "lastName": str(len(mine)),
                            "email": f"chaos{n}.{len(mine)}@example.com",
                            "companyName": "Scale",
                        },
                    )
                    if reply.status == 201:
                        mine.append(str(reply.json()["id"]))
                        with self._lock:
                            self.contacts.append(mine[-1])
                elif rng.random() < 0.5:
                    reply = client.request(
                        "POST",
                        f"/contacts/{rng.choice(mine)}/update-description",
                        json_body={"description": f"writer {n} at {time.monotonic():.3f}"},
                    )
                else:
                    reply = client.request(
                        "POST",
                        f"/contacts/{rng.choice(mine)}/update-email",
                        json_body={"email": f"w{n}.{rng.randrange(10**6)}@example.com"},
                    )
                with self._lock:
                    self.statuses[reply.status] += 1
                    if reply.status >= 300:
                        self.errors.append(f"{reply.status}: {reply.body[:200]!r}")
        except Exception as exc:  # a writer that dies is a failure the test reports
            with self._lock:
                self.errors.append(f"writer {n}: {type(exc).__name__}: {exc}")
        finally:
            client.close()

    def wait_for_more(self, writes: int, deadline: float = LONG) -> None:
        """Until `writes` more writes have committed (the faults land while they write)."""
        target = self.committed + writes
        wait_for(
            lambda: self.committed >= target or self.errors,
            f"{writes} more committed writes",
            deadline,
        )
        assert self.errors == [], self.errors[:5]


def wait_for[T](
    check: Callable[[], T | None], what: str, deadline: float, *, every: float = 0.2
) -> T:
    """`funcstack.deadlines.wait_for`, polling every 0.2 s by default (each poll reads the
    leases or the logs)."""
    return deadlines.wait_for(check, what, deadline, every=every)


# -- the leases -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class LeaseView:
    token: str
    #: The instance owning it (the owner name's `WEBSITE_INSTANCE_ID`), None when unowned.
    instance: str | None


class Leases:
    """The relay's lease documents, read as they are (the change feed processor's schema:
    `LeaseToken`, `Owner` = `<WEBSITE_INSTANCE_ID>:<pid>:<random>` in funcstack)."""

    def __init__(self, stack: Stack) -> None:
        self._container = stack.container(stack.settings()["COSMOS_LEASE_CONTAINER"])
        self._prefix = stack.settings()["OUTBOX_PROCESSOR_NAME"]

    def read(self) -> list[LeaseView]:
        return [
            LeaseView(
                str(doc["LeaseToken"]),
                str(doc["Owner"]).split(":", 1)[0] if doc.get("Owner") else None,
            )
            for doc in self._container.query_items(
                "SELECT * FROM c", enable_cross_partition_query=True
            )
            if doc.get("LeaseToken") is not None and str(doc["id"]).startswith(self._prefix)
        ]

    def owners(self) -> Counter[str | None]:
        """Leases per owning instance (None: unowned)."""
        return Counter(lease.instance for lease in self.read())


def live_relays(app: AppInstances, relay: str) -> set[str]:
    """The relay instances that run: neither killed nor paused."""
    return {inst.name for inst in app.in_group(relay) if inst.alive and not inst.paused}


def lost_leases(instance: Instance) -> int:
    """The leases `instance` found taken over (its log's "lease ... lost" lines: the change
    feed processor's, cosmos-changefeed's logger)."""
    text = instance.log_path.read_text("utf-8", "replace")
    return len(re.findall(r"processor '[^']*': lease \S+ lost ", text))


def relay_counts(app: AppInstances, relay: str) -> Counter[str]:
    """What the relay's instances logged: documents the trigger delivered, and the relay's
    own count of messages sent ("relay invocation ok: received=.. sent=.."; an invocation
    cut short by a SIGKILL writes none)."""
    counts: Counter[str] = Counter()
    for inst in app.in_group(relay):
        text = inst.log_path.read_text("utf-8", "replace")
        counts["delivered"] += sum(
            int(n) for n in re.findall(r": delivered (\d+) document\(s\)", text)
        )
        counts["sent"] += sum(
            int(n)
            for n in re.findall(
                r"relay invocation ok: received=\d+ "
                r"sent=(\d+)",
                text,
            )
        )
        counts["failed_invocations"] += text.count("relay invocation failed")
    return counts


@dataclass
class Takeover:
    fault: str
    instance: str
    leases_held: int
    seconds: float


def take_over(
    leases: Leases,
    app: AppInstances,
    relay: str,
    fault: str,
    inflict: Callable[[Instance], object],
    victim: Instance,
) -> Takeover:
    """Inflict `fault` on `victim`, then wait until every lease is owned by a live relay
    instance; that wait is the takeover."""
    held = leases.owners()[victim.name]
    assert held > 0, f"{victim.name} owns no lease: {leases.owners()}"
    inflict(victim)
    struck = time.monotonic()
    live = live_relays(app, relay)

    def all_live() -> bool:
        views = leases.read()
        return bool(views) and all(lease.instance in live for lease in views)

    wait_for(
        all_live,
        f"{victim.name}'s leases taken over after the {fault}",
        EXPIRY + ACQUIRE + SHORT,
        every=0.05,
    )
    return Takeover(fault, victim.name, held, round(time.monotonic() - struck, 2))


# -- the test -------------------------------------------------------------------------------------


def test_scaled_out_under_splits_kills_and_pauses_nothing_lost_nothing_twice_in_order(
    started: Started,
    late_servicebus_log: Path,
) -> None:
    stack, began = started.stack, time.monotonic()
    relay = relay_function()
    app = stack.runner_app
    assert app is not None and stack.servicebus is not None
    database = stack.settings()["COSMOS_DATABASE"]
    assert len(app.in_group("http")) == 2 and len(app.in_group(relay)) == 3
    assert len(stack.physical_partitions(database, stack.contacts_container_name)) == 4
    # the topic's duplicate window is the declared one, the deployed one (tests/deploy keeps
    # them equal): longer than a takeover with Azure's lease intervals (60 s expiry, 13 s
    # acquire) by far
    assert stack.duplicate_window_seconds is None
    assert duplicate_window_seconds() > 10 * (60 + 13)
    leases = Leases(stack)
    wait_for(
        lambda: (
            len(leases.read()) == 4
            and None not in leases.owners()
            and set(leases.owners()) <= live_relays(app, relay)
        ),
        "the 4 leases shared by the relay's instances",
        LONG,
    )

    writers = Writers(stack.api_url).start()
    try:
        writers.wait_for_more(WRITES_BETWEEN_FAULTS)
        children = stack.split_contacts()
        writers.wait_for_more(WRITES_BETWEEN_FAULTS)

        held = leases.owners()
        by_leases = sorted(app.in_group(relay), key=lambda i: -held[i.name])
        # asked not to come back (funcstack restarts a killed instance, as Azure replaces
        # one): the takeover measured is the survivors', as before
        killed = take_over(
            leases, app, relay, "SIGKILL", functools.partial(app.kill, restart=False), by_leases[0]
        )
        writers.wait_for_more(WRITES_BETWEEN_FAULTS)

        held = leases.owners()
        sleeper = next(
            i for i in app.in_group(relay) if i.name in live_relays(app, relay) and held[i.name]
        )
        lost_before = lost_leases(sleeper)
        paused = take_over(leases, app, relay, "SIGSTOP", app.pause, sleeper)
        # resumed past the lease expiry (the takeover can come sooner after the pause: a
        # lease expires counting from its last renewal, before the pause)
        time.sleep(max(0.0, EXPIRY + ACQUIRE - paused.seconds))  # a state, not a verdict
        app.resume(sleeper)
        # its renewal or its checkpoint finds each of its leases another's: it stops them
        wait_for(
            lambda: lost_leases(sleeper) - lost_before >= paused.leases_held,
            f"{sleeper.name} told its leases were lost",
            SHORT,
        )
        lost_on_resume = lost_leases(sleeper) - lost_before
        writers.wait_for_more(WRITES_BETWEEN_FAULTS)

        added = app.add_instance(relay)
        wait_for(
            lambda: leases.owners()[added.name] > 0,
            f"{added.name} takes its share of the leases",
            EXPIRY + SHORT,
        )
        writers.wait_for_more(WRITES_BETWEEN_FAULTS)
    finally:
        writers.stop()
    writing = time.monotonic() - began
    assert writers.errors == [], writers.errors[:5]
    # the front spread the writes over both HTTP instances (by backend URL)
    assert app.front is not None
    spread = sorted(app.front.forwarded.values())
    assert len(spread) == 2 and spread[0] > 0, app.front.forwarded

    # nothing lost, nothing twice, in order per contact: on the topic ...
    events = stored_events(stack)
    conn, topic = stack.servicebus.connection_string, stack.settings()["SERVICEBUS_TOPIC"]
    received = drain(conn, topic=topic, until=count_at_least(len(events)), timeout=LONG)
    received += drain(conn, topic=topic, until=lambda r: False, timeout=NOTHING_MORE)
    assert_exactly_once_in_order(received, events)

    # ... and in the subscriber's projection, version for version with the API
    contacts = {str(e["partitionKey"]) for e in events}
    assert set(writers.contacts) <= contacts
    client = Client(stack.api_url)
    try:
        expected = {c: client.request("GET", f"/contacts/{c}").json()["version"] for c in contacts}
    finally:
        client.close()
    assert sum(expected.values()) == len(events)

    def behind() -> dict[str, tuple[int | None, int]]:
        out = {}
        for contact, version in expected.items():
            got = projection(stack, contact)
            if (got or {}).get("version") != version:
                out[contact] = ((got or {}).get("version"), version)
        return out

    remaining = behind()
    deadline = time.monotonic() + LONG
    while remaining and time.monotonic() < deadline:
        time.sleep(1)
        remaining = behind()
    assert remaining == {}, (
        f"{len(remaining)} projections still behind after {LONG:g} s: {list(remaining.items())[:5]}"
    )
    outcomes = Counter(
        (i["contact"], i["version"]) for i in invocations(stack) if i["outcome"] == "applied"
    )
    assert [k for k, n in outcomes.items() if n > 1] == []
    assert len(outcomes) == len(events)

    # the figures
    dropped = dropped_as_duplicates(  # its own messages' resends (ids: the events')
        late_servicebus_log.read_text("utf-8", "replace"),
        {str(event_fields(e).event_id) for e in events},
    )
    relayed = relay_counts(app, relay)
    # the faults caught the relay between sends and checkpoints: a takeover resends what was
    # delivered and not checkpointed (at least once), and the topic drops it; every resend the
    # relay counted was dropped (a SIGKILLed invocation's sends are dropped too, never counted)
    assert dropped > 0, "no takeover sent anything again"
    assert relayed["sent"] - len(events) <= dropped
    record(
        "scale_out_chaos",
        {
            "http_instances": 2,
            "relay_instances": "3 (+1 added)",
            "physical_partitions": 4,
            "split_into": children,
            "leases_after": len(leases.read()),
            "writers": WRITERS,
            "contacts": len(expected),
            "events": len(events),
            "writes": dict(writers.statuses),
            "requests_per_http_instance": spread,
            "takeover_after_sigkill_s": killed.seconds,
            "leases_of_killed": killed.leases_held,
            "takeover_after_sigstop_s": paused.seconds,
            "leases_of_paused": paused.leases_held,
            "lease_expiry_s": EXPIRY,
            "acquire_interval_s": ACQUIRE,
            "leases_found_lost_on_resume": lost_on_resume,
            "documents_delivered_to_relay": relayed["delivered"],
            "messages_sent_by_relay": relayed["sent"],
            "relay_invocations_failed": relayed["failed_invocations"],
            "resends_counted_by_relay": relayed["sent"] - len(events),
            "resends_dropped_as_duplicates": dropped,
            "messages_received": len(received),
            "duplicates_received": 0,
            "subscriber_applied": len(outcomes),
            "subscriber_duplicates_ignored": sum(
                1 for i in invocations(stack) if i["outcome"] == "duplicate"
            ),
            "stack_start_s": round(started.seconds, 1),
            "seconds_writing": round(writing, 1),
            "seconds_after_start": round(time.monotonic() - began, 1),
            "at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        },
    )
