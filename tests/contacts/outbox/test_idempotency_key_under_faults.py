"""Idempotency-Key through the local Functions host, with the faults that make clients retry:
a write whose change commits while its worker dies before answering, retried with its key, has
one effect and one message on the topic; a key for another body is 422; a key past its TTL is
new. And the chaos run: writers retrying every write on 5xx and timeouts with their keys while
the worker is killed, the host restarted and the store paused: one contact per create key, each
contact's events exactly its versions, each event once on the topic.

One stack for the module, the chaos run last on it. Its Cosmos DB endpoint is not the run's
shared one: the tests freeze it (SIGSTOP) and kill the worker between its flights to it, and a
frozen shared endpoint would stall every other stack of the run. It is the test process's
faulted one (`faulted_cosmos` of tests/conftest.py), in a database of its own, which the
store's fault module faults after or before this one, never at once (one xdist unit:
tools/schedule.py). Service Bus is the run's
(`shared_servicebus`, a topic of the stack's own): no test stops, freezes or slows it, and each
counts only its topic's messages."""

from __future__ import annotations

import http.client
import json
import random
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from cosmos_outbox.documents import IDEMPOTENCY_TYPE
from funcstack import deadlines
from funcstack.cosmos import CosmosEndpoint
from funcstack.deadlines import LONG, LOOPBACK, SHORT
from funcstack.functions_host import RunningRunner
from funcstack.scaleout import RestartPolicy
from funcstack.servicebus import ServiceBusEndpoint
from tests.contacts.faults import (
    commit_then_kill_worker,
    frozen,
    kill_worker_with_answers_pending,
    wait_for,
    worker_pids,
)
from tests.contacts.outbox.test_outbox_guarantees import (
    FAST_TAKEOVER,
    NOTHING_MORE,
    assert_exactly_once_in_order,
    stored_events,
)
from tools.httpclient import Client, Reply
from tools.receive import Received, count_at_least, drain
from tools.stack import Ports, Stack

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.local_stack(
        "a stack of its own: the worker killed after a commit, the store paused, "
        "the backlog timer off"
    ),
]

KEY = "Idempotency-Key"
#: No backlog timer during the faults: it would call the store from the worker on its own.
#: FAST_TAKEOVER: the relay of a host started after a kill takes the killed host's lease in
#: seconds (the change feed processor's expiry is 60 s).
QUIET = {"FEED_POLL_DELAY_MS": "100", "BACKLOG_ESTIMATE_SCHEDULE": "0 0 0 1 1 *", **FAST_TAKEOVER}


def contact(tag: str) -> dict[str, str]:
    return {
        "firstName": tag,
        "lastName": "Retry",
        "email": f"{tag.lower()}@example.com",
        "companyName": "Idempotent",
    }


def documents(stack: Stack, kind: str) -> list[dict[str, Any]]:
    return list(
        stack.contacts_container().query_items(
            "SELECT * FROM c WHERE c.type = @type",
            parameters=[{"name": "@type", "value": kind}],
            enable_cross_partition_query=True,
        )
    )


def topic(stack: Stack) -> str:
    """The stack's topic on the shared Service Bus endpoint."""
    return stack.settings()["SERVICEBUS_TOPIC"]


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory,
    faulted_cosmos: CosmosEndpoint,
    shared_servicebus: ServiceBusEndpoint,
) -> Iterator[Stack]:
    with Stack(
        workdir=tmp_path_factory.mktemp("idempotency"),
        ports=Ports.free(),
        shared_cosmos=faulted_cosmos,
        shared_servicebus=shared_servicebus,
        settings_overrides=QUIET,
        # as `make run`'s: a host that dies comes back on its port (the worker's third death
        # within 30 minutes recycles it, as the Functions host does; the tests kill it often)
        host_restart=RestartPolicy(),
    ) as s:
        yield s


def lose_the_answer(
    stack: Stack,
    method: str,
    path: str,
    body: dict[str, Any],
    headers: dict[str, str],
    *,
    committed: Any,
) -> Reply | Exception:
    """Send the request; its change commits and its worker is killed before it answers."""
    assert stack.cosmos is not None and stack.runner is not None
    outcome: list[Reply | Exception] = []

    def request() -> None:
        client = Client(stack.api_url, timeout=SHORT)  # the host's answer once its worker died
        try:
            outcome.append(client.request(method, path, json_body=body, headers=headers))
        except Exception as exc:  # what a client sees of a host that lost its worker
            outcome.append(exc)
        finally:
            client.close()

    thread = threading.Thread(target=request)
    commit_then_kill_worker(
        stack.cosmos.started(),
        stack.runner.process,
        stack.cosmos.port,
        send=thread.start,
        committed=committed,
    )
    thread.join(LONG)
    assert outcome, f"the request did not end within {LONG:g} s"
    return outcome[0]


def test_a_create_committed_before_its_worker_died_is_answered_on_retry_once(
    stack: Stack,
) -> None:
    assert stack.servicebus is not None
    client = Client(stack.api_url)
    try:
        assert client.request("POST", "/contacts", json_body=contact("Warm")).status == 201
        body = contact("Lost")
        lost = lose_the_answer(
            stack,
            "POST",
            "/contacts",
            body,
            {KEY: '"create-lost-1"'},
            committed=lambda: any(
                d["data"]["name"]["firstName"] == "Lost" for d in documents(stack, "contact")
            ),
        )
        assert isinstance(lost, Exception) or lost.status >= 500, lost
        retry = client.request(
            "POST", "/contacts", json_body=body, headers={KEY: '"create-lost-1"'}
        )
    finally:
        client.close()
    assert retry.status == 201, retry.body
    assert retry.header("idempotent-replayed") == "true"
    [stored] = [d for d in documents(stack, "contact") if d["data"]["name"]["firstName"] == "Lost"]
    assert retry.header("location") == f"/api/contacts/{stored['id']}"
    assert retry.json()["id"] == stored["id"] and retry.json()["version"] == 1
    conn, mine = stack.servicebus.connection_string, topic(stack)
    received = drain(conn, until=count_at_least(2), timeout=SHORT, topic=mine)
    received += drain(conn, until=lambda r: False, timeout=NOTHING_MORE, topic=mine)
    created = [r for r in received if r.session_id == stored["id"]]
    assert [r.subject for r in created] == ["ContactCreatedEvent"]


def test_a_patch_committed_before_its_worker_died_is_one_event_and_the_same_answer(
    stack: Stack,
) -> None:
    client = Client(stack.api_url)
    try:
        created = client.request("POST", "/contacts", json_body=contact("Patched"))
        cid, etag = created.json()["id"], created.header("etag") or ""
        change = {"description": "changed once"}
        headers = {KEY: "patch-lost-1", "If-Match": etag}
        lost = lose_the_answer(
            stack,
            "PATCH",
            f"/contacts/{cid}",
            change,
            headers,
            committed=lambda: (
                stack.contacts_container().read_item(cid, partition_key=cid)["data"]["version"] == 2
            ),
        )
        assert isinstance(lost, Exception) or lost.status >= 500, lost
        retry = client.request("PATCH", f"/contacts/{cid}", json_body=change, headers=headers)
        read = client.request("GET", f"/contacts/{cid}")
    finally:
        client.close()
    assert retry.status == 200, retry.body  # not 412: the change the client sent landed
    assert retry.json() == read.json() and retry.json()["description"] == "changed once"
    assert retry.header("etag") == read.header("etag")
    events = [e for e in stored_events(stack) if e["partitionKey"] == cid]
    assert sorted(e["version"] for e in events) == [1, 2]


def test_the_same_key_with_another_body_is_422_over_http(stack: Stack) -> None:
    client = Client(stack.api_url)
    try:
        first = client.request(
            "POST", "/contacts", json_body=contact("Once"), headers={KEY: "reused"}
        )
        other = client.request(
            "POST", "/contacts", json_body=contact("Twice"), headers={KEY: "reused"}
        )
        malformed = client.request(
            "POST", "/contacts", json_body=contact("Bad"), headers={KEY: '"no end'}
        )
    finally:
        client.close()
    assert first.status == 201
    assert other.status == 422 and other.json()["title"] == "Unprocessable Content"
    assert (other.header("content-type") or "").startswith("application/problem+json")
    assert malformed.status == 400 and malformed.json()["errors"][0]["field"] == KEY
    names = {d["data"]["name"]["firstName"] for d in documents(stack, "contact")}
    assert "Once" in names and not {"Twice", "Bad"} & names


def test_a_key_past_its_ttl_is_a_new_key_over_http(stack: Stack) -> None:
    client = Client(stack.api_url)
    container = stack.contacts_container()
    try:
        first = client.request(
            "POST", "/contacts", json_body=contact("Expiring"), headers={KEY: "expiring"}
        )
        cid = first.json()["id"]
        [record] = [d for d in documents(stack, IDEMPOTENCY_TYPE) if d["partitionKey"] == cid]
        assert record["ttl"] == int(stack.settings()["IDEMPOTENCY_TTL_SECONDS"]) == 86400
        # the store's own TTL, shortened: wait until it has deleted the record
        container.replace_item(
            record["id"], {k: v for k, v in record.items() if not k.startswith("_")} | {"ttl": 1}
        )
        wait_for(
            lambda: not [d for d in documents(stack, IDEMPOTENCY_TYPE) if d["id"] == record["id"]],
            "the record's expiry",
        )
        again = client.request(
            "POST", "/contacts", json_body=contact("Expiring"), headers={KEY: "expiring"}
        )
        retry = client.request(
            "POST", "/contacts", json_body=contact("Expiring"), headers={KEY: "expiring"}
        )
    finally:
        client.close()
    assert again.status == 201 and again.header("idempotent-replayed") is None
    assert again.json()["id"] != cid  # a new contact: the key behaved as new
    assert retry.status == 201 and retry.header("location") == again.header("location")
    assert (
        len(
            [d for d in documents(stack, "contact") if d["data"]["name"]["firstName"] == "Expiring"]
        )
        == 2
    )


# -- chaos --------------------------------------------------------------------------------------


@dataclass
class Tally:
    """What the writers did and saw."""

    create_keys: dict[str, str] = field(default_factory=dict)  # key -> contact id answered
    change_keys: dict[str, str] = field(default_factory=dict)  # key -> contact id
    attempts: Counter[str] = field(default_factory=Counter)  # outcome of each attempt
    replays: int = 0
    unexpected: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def saw(self, outcome: str) -> None:
        with self.lock:
            self.attempts[outcome] += 1


#: One attempt's wait for its answer: past it the writer retries with its key, as a client
#: library does (the store paused past its client's 5 s bound answers 503 before this).
ATTEMPT_TIMEOUT = LOOPBACK
#: A writer's pause before it retries (its back-off), not a verdict.
RETRY_PAUSE = 0.3


def send(
    url: str,
    method: str,
    path: str,
    body: dict[str, Any],
    key: str,
    tally: Tally,
    deadline: float,
    *,
    if_match: str | None = None,
) -> tuple[int, dict[str, str], bytes] | None:
    """The request, retried with its key on 5xx, 429, timeouts and connection failures (as
    HTTP client libraries and gateways do) until it gets a definitive answer."""
    parts = url.split("://", 1)[1].split("/", 1)
    host, port = parts[0].rsplit(":", 1)
    prefix = "/" + parts[1].rstrip("/")
    payload = json.dumps(body).encode()
    while time.monotonic() < deadline:
        connection = http.client.HTTPConnection(host, int(port), timeout=ATTEMPT_TIMEOUT)
        try:
            connection.request(
                method,
                prefix + path,
                body=payload,
                headers={
                    "content-type": "application/json",
                    KEY: f'"{key}"',
                    **({"If-Match": if_match} if if_match else {}),
                },
            )
            response = connection.getresponse()
            data = response.read()
            status = response.status
            headers = {k.lower(): v for k, v in response.getheaders()}
        except (OSError, http.client.HTTPException) as exc:
            tally.saw(type(exc).__name__)
            time.sleep(RETRY_PAUSE)
            continue
        finally:
            connection.close()
        tally.saw(str(status))
        if status >= 500 or status == 429:
            time.sleep(RETRY_PAUSE)
            continue
        if headers.get("idempotent-replayed") == "true":
            with tally.lock:
                tally.replays += 1
        return status, headers, data
    return None


def writer(stack: Stack, n: int, tally: Tally, stop: threading.Event, deadline: float) -> None:
    rng = random.Random(n)
    mine: list[str] = []
    etags: dict[str, str] = {}  # each change is conditional on the ETag of the last answer
    while not stop.is_set() and time.monotonic() < deadline:
        if not mine or rng.random() < 0.1:
            key = f"w{n}-create-{uuid.uuid4()}"
            answer = send(
                stack.api_url,
                "POST",
                "/contacts",
                contact(f"W{n}C{len(mine)}"),
                key,
                tally,
                deadline,
            )
            if answer is None or answer[0] != 201:
                tally.unexpected.append(f"create {key}: {answer and answer[:1]}")
                continue
            cid = json.loads(answer[2])["id"]
            with tally.lock:
                tally.create_keys[key] = cid
            mine.append(cid)
            etags[cid] = answer[1]["etag"]
        else:
            cid = rng.choice(mine)
            key = f"w{n}-change-{uuid.uuid4()}"
            method, path, body, status = rng.choice(
                [
                    ("PATCH", f"/contacts/{cid}", {"description": key}, 200),
                    ("POST", f"/contacts/{cid}/update-description", {"description": key}, 204),
                ]
            )
            answer = send(
                stack.api_url, method, path, body, key, tally, deadline, if_match=etags[cid]
            )
            if answer is None or answer[0] != status:  # a 412 here: a lost answer's change
                tally.unexpected.append(f"change {key}: {answer and answer[:1]}")
                continue
            with tally.lock:
                tally.change_keys[key] = cid
            etags[cid] = answer[1]["etag"]


#: The faults, in this order, 1-2 s apart (a count, not a duration: the same run however busy
#: the machine is).
FAULTS = (
    "kill worker",
    "pause store",
    "kill worker",
    "kill worker",
    "restart host",
    "pause store",
    "kill worker",
    "kill worker",
    "pause store",
)


def running_host(stack: Stack, *, not_: RunningRunner | None = None) -> RunningRunner:
    """The contacts app's host (another than `not_`) once it runs with its worker (after a
    restart: the stack's, or the host's own recycling at its worker's third death)."""

    def running() -> RunningRunner | None:
        runner = stack.runner
        if runner is None or runner is not_ or runner.process.poll() is not None:
            return None
        return runner if len(worker_pids(runner.process.pid)) == 1 else None

    return deadlines.wait_for(running, "the host running with its worker", SHORT, every=0.01)


def chaos(stack: Stack, stop: threading.Event, faults: Counter[str]) -> None:
    """FAULTS, then `stop`. Killing the worker: with the store's answers to its calls waiting,
    unread, in its sockets (the writes among them have committed, and their answers die with
    it: what a client retries after a 500); at its third death within 30 minutes (the tests
    before killed it twice) the host recycles itself and the stack starts it again. Pausing the
    store: 2-8 s (past the store client's 5 s bound now and then: 503). Restarting the host:
    SIGKILLed, started again by the stack on its port. Its sleeps are the faults' schedule (how
    far apart, how long a pause), never a verdict."""
    assert stack.cosmos is not None
    rng = random.Random(31)
    try:
        for fault in FAULTS:
            time.sleep(rng.uniform(1, 2))
            runner = running_host(stack)
            if fault == "kill worker":
                if kill_worker_with_answers_pending(
                    stack.cosmos.started(), runner.process, stack.cosmos.port
                ):
                    faults["worker_killed_with_answers_pending"] += 1
                else:
                    faults["worker_killed"] += 1
            elif fault == "pause store":
                with frozen(stack.cosmos.started()):
                    time.sleep(rng.uniform(2, 8))
                faults["store_paused"] += 1
            else:
                stack.kill_runner()  # the stack starts it again, as Azure restarts a host
                running_host(stack, not_=runner)
                faults["host_killed_and_restarted"] += 1
        time.sleep(2)  # the writers write on after the last fault
    finally:
        stop.set()


def test_writers_retrying_with_keys_under_worker_kills_and_store_pauses_have_one_effect_each(
    tmp_path: Path, stack: Stack
) -> None:
    """On the module's stack, last: what its store and topic held before the run (the tests
    above wrote it, and their undrained messages wait on the topic) is set aside by id, so every
    contact, event and message counted is the run's, as on a stack of its own."""
    assert stack.servicebus is not None
    earlier_contacts = {d["id"] for d in documents(stack, "contact")}
    earlier_events = {e["id"] for e in stored_events(stack)}
    writers = 6
    tally, faults, stop = Tally(), Counter[str](), threading.Event()
    started = time.monotonic()
    # the writers give up past it (a request never answered): the run itself is FAULTS, a count
    deadline = started + 2 * LONG
    threads = [
        threading.Thread(target=writer, args=(stack, n, tally, stop, deadline))
        for n in range(writers)
    ]
    threads.append(threading.Thread(target=chaos, args=(stack, stop, faults)))
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()) + LOOPBACK)
        assert not t.is_alive(), f"{t.name} still running past the writers' deadline"
    seconds = round(time.monotonic() - started, 1)
    contacts = [d for d in documents(stack, "contact") if d["id"] not in earlier_contacts]
    events = [e for e in stored_events(stack) if e["id"] not in earlier_events]

    def the_runs(received: list[Received]) -> list[Received]:
        return [r for r in received if r.message_id not in earlier_events]

    conn, mine = stack.servicebus.connection_string, topic(stack)
    received = drain(
        conn,
        until=lambda got: len({r.message_id for r in the_runs(got)}) >= len(events),
        timeout=LONG,
        topic=mine,
    )
    received += drain(conn, until=lambda r: False, timeout=NOTHING_MORE, topic=mine)
    received = the_runs(received)
    versions: dict[str, list[int]] = defaultdict(list)
    for event in events:
        versions[event["partitionKey"]].append(event["version"])
    changes = Counter(tally.change_keys.values())
    report = {
        "writers": writers,
        "seconds": seconds,
        "faults": dict(faults),
        "attempts": dict(tally.attempts),
        "answers_replayed": tally.replays,
        "create_keys": len(tally.create_keys),
        "contacts": len(contacts),
        "change_keys": len(tally.change_keys),
        "events": len(events),
        "messages_received": len(received),
        "unexpected": tally.unexpected,
        "contacts_whose_events_are_not_their_versions": sorted(
            c["id"]
            for c in contacts
            if sorted(versions[c["id"]]) != list(range(1, c["data"]["version"] + 1))
        ),
    }
    (tmp_path / "idempotency-chaos.json").write_text(json.dumps(report, indent=2))
    print("idempotency chaos:", json.dumps(report))
    assert not tally.unexpected
    assert sum(faults.values()) == len(FAULTS)
    assert len({c["id"] for c in contacts}) == len(contacts) == len(tally.create_keys)
    assert {c["id"] for c in contacts} == set(tally.create_keys.values())
    assert report["contacts_whose_events_are_not_their_versions"] == []
    for c in contacts:  # created, then exactly one event per change key
        assert c["data"]["version"] == 1 + changes[c["id"]], c["id"]
    assert len(events) == len(tally.create_keys) + len(tally.change_keys)
    assert_exactly_once_in_order(received, events)
    assert tally.replays >= 1  # and the faults did lose answers of committed writes
