"""What the relay's fleet tests share (test_relay_fleet.py in `make test`, test_relay_chaos.py in
`make chaos`): writers committing one event a transaction per aggregate, the lease documents'
owners (a `cosmos-outbox relay` process by its instance name, a Functions trigger instance by
its `WEBSITE_INSTANCE_ID`), a watch recording every change of owner, relay processes as
instances of the stack (funcstack's `host_process`, what `funcstack run --process` starts), the
tally of what the test subscription received, and the sends per event the topic counted (its
duplicate detection's log)."""

from __future__ import annotations

import contextlib
import itertools
import json
import re
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from azure_stack import DATABASE, received
from deadlines import LONG, LOOPBACK, SHORT, wait_for

from cosmos_changefeed import read_again_on_headers_race
from cosmos_outbox import Outbox

if TYPE_CHECKING:
    from funcstack import LocalStack, ProcessInstances

RELAY_APP = Path(__file__).parents[1] / "relay_app"

#: The lease intervals of every relay in these tests (seconds): acquire, renew, expiry.
ACQUIRE, RENEW, EXPIRY = 0.5, 0.5, 3.0


def fast_trigger(expiry: float = EXPIRY) -> dict[str, str]:
    """The Functions trigger's lease intervals as the processes' (funcstack's local-only
    settings, ms)."""
    return {
        "FUNCTIONS_HOST_COSMOS_LEASE_ACQUIRE_INTERVAL": str(int(ACQUIRE * 1000)),
        "FUNCTIONS_HOST_COSMOS_LEASE_RENEW_INTERVAL": str(int(RENEW * 1000)),
        "FUNCTIONS_HOST_COSMOS_LEASE_EXPIRATION_INTERVAL": str(int(expiry * 1000)),
    }


def app_settings(stack: LocalStack, container: str, leases: str) -> dict[str, str]:
    """The relay app's settings on this stack (its local.settings.sample.json with the
    services' connection strings): what its Functions host would read."""
    values = stack.app_settings(
        RELAY_APP, {"COSMOS_CONTAINER": container, "COSMOS_LEASE_CONTAINER": leases}
    )["Values"]
    return {str(k): str(v) for k, v in values.items()}


def lease_documents(stack: LocalStack, leases: str) -> list[dict[str, Any]]:
    """The lease documents, read again when azure-cosmos's sync client meets its headers race
    (its background endpoint refresh writes into the headers a query copies: the product's
    own reads do the same)."""
    container = stack.container_client(DATABASE, leases)
    return read_again_on_headers_race(
        lambda: [
            d
            for d in container.query_items("SELECT * FROM c", enable_cross_partition_query=True)
            if "LeaseToken" in d
        ],
        what="the lease documents",
    )


def owner_name(owner: str | None) -> str | None:
    """A lease's owner as the instance's name: a relay process's `Owner` is its name; a
    Functions trigger's, in funcstack, `<WEBSITE_INSTANCE_ID>:<pid>:<guid>`."""
    return owner.split(":", 1)[0] if owner else None


def owners(stack: LocalStack, leases: str) -> dict[str, str | None]:
    """Each lease's owner (`owner_name`), by lease token."""
    documents = lease_documents(stack, leases)
    return {str(d["LeaseToken"]): owner_name(d.get("Owner")) for d in documents}


def until(condition: Callable[[], object], what: str, deadline: float = SHORT) -> float:
    """Wait until `condition()` (`deadlines.wait_for`, failing with `what` past `deadline`); the
    seconds it took, to report (never to assert: a takeover's bound is the lease settings', and
    the lease protocol's own tests hold it)."""
    start = time.monotonic()
    wait_for(condition, what, deadline)
    return time.monotonic() - start


def takeover(expiry: float = EXPIRY) -> float:
    """The deadline of a takeover: the lease settings' expiry and acquire interval, then SHORT
    for the machine (generous: a slow machine only ends the wait later)."""
    return expiry + ACQUIRE + SHORT


class Writers:
    """`n` aggregates, each written by a thread of its own, one event a transaction (`n` its
    step, 0, 1, 2, ...), until stopped: what each committed."""

    def __init__(self, stack: LocalStack, container: str, n: int) -> None:
        from cosmos_outbox import Services
        from cosmos_outbox.cosmos import CosmosDocumentStore

        self.outbox = Outbox()
        self.store = CosmosDocumentStore(stack.container_client(DATABASE, container))
        self.services = Services(store=self.store, publisher=_not_relaying, token_secret="t")
        self.committed = {f"agg-{uuid.uuid4().hex[:8]}": 0 for _ in range(n)}
        self.stopping = threading.Event()
        self.started = 0.0
        self.threads = [
            threading.Thread(target=self._write, args=(key,), daemon=True) for key in self.committed
        ]

    def _write(self, key: str) -> None:
        with self.outbox.override(self.services):
            while not self.stopping.is_set():
                with self.outbox.transaction(key, entity="step") as tx:
                    tx.publish("Stepped", {"n": self.committed[key]})
                    tx.commit()
                self.committed[key] += 1
                time.sleep(0.2)  # the writers' pace, not a verdict

    @property
    def total(self) -> int:
        return sum(self.committed.values())

    def at(self, seconds: float) -> None:
        """Sleep until `seconds` after the writers started (the run's schedule of faults, not a
        verdict)."""
        time.sleep(max(0.0, self.started + seconds - time.monotonic()))

    def __enter__(self) -> Writers:
        self.started = time.monotonic()
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(SHORT)  # its transaction committed (the store client bounds each call)
        alive = sum(thread.is_alive() for thread in self.threads)
        assert exc[0] is not None or not alive, f"{alive} writer(s) writing {SHORT:g} s after"


def _not_relaying() -> Any:
    raise AssertionError("the writers only write; the relay sends")


@dataclass
class LeaseWatch:
    """A thread reading the lease documents every `every` seconds until stopped: each change
    of a lease's owner, with when it was seen (`time.monotonic()`)."""

    stack: LocalStack
    leases: str
    every: float = 0.05
    #: (when, lease token, previous owner, new owner), in the order seen.
    changes: list[tuple[float, str, str | None, str | None]] = field(default_factory=list)
    _last: dict[str, str | None] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            try:
                now, seen = time.monotonic(), owners(self.stack, self.leases)
            except Exception:  # noqa: S112 - a read refused under load: the next one sees it
                continue
            for token, owner in seen.items():
                if token in self._last and self._last[token] != owner:
                    self.changes.append((now, token, self._last[token], owner))
                self._last[token] = owner

    def transfers(self, start: float, end: float) -> int:
        """The leases that passed to a new owner between `start` and `end`: every change to an
        owner (a release, None, is not one: the next owner's take is)."""
        return sum(1 for when, _, _, new in self.changes if start <= when < end and new)

    def __enter__(self) -> LeaseWatch:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(LOOPBACK)


def relay_command_line(expiry: float = EXPIRY) -> str:
    """`cosmos-outbox relay` as `funcstack run --process relay=...` gives it: its probes on the
    instance's port, the fleet's lease intervals."""
    return (
        f"{sys.executable} -m cosmos_outbox relay --port {{port}} "
        f"--lease-acquire-interval {ACQUIRE:g} --lease-renew-interval {RENEW:g} "
        f"--lease-expiration-interval {expiry:g}"
    )


def relay_processes(
    stack: LocalStack, name: str, n: int, values: Mapping[str, str], expiry: float = EXPIRY
) -> ProcessInstances:
    """`n` `cosmos-outbox relay` processes as instances of the stack (`<name>-1`..), each ready
    (its /ready: listening) before the next; the app's `values` win over the environment. Not
    restarted when killed (the takeover measured is the others')."""
    from funcstack import ProcessSpec

    spec = ProcessSpec(name, relay_command_line(expiry), n, "http://127.0.0.1:{port}/ready")
    return stack.host_process(spec, overrides=dict(values), restart=None)


@dataclass
class Tally:
    """What the test subscription received of the writers' events, per aggregate: lost
    (committed, never received), twice (received more than once) and out of order (received
    before a step it follows)."""

    events: int
    received: int
    lost: int
    twice: int
    out_of_order: int
    #: The received messages' ids (the events' ids), by (aggregate, step).
    ids: dict[tuple[str, int], str]

    def counts(self) -> dict[str, int]:
        return {
            "events": self.events,
            "received": self.received,
            "lost": self.lost,
            "twice": self.twice,
            "out_of_order": self.out_of_order,
        }

    def line(self) -> str:
        return (
            f"{self.events} events, {self.received} received: {self.lost} lost, "
            f"{self.twice} twice, {self.out_of_order} out of order"
        )


def tally(stack: LocalStack, committed: Mapping[str, int], wait: float = LONG) -> Tally:
    """Receive the writers' events from the test subscription (each aggregate a session: the
    order the topic keeps), and count them: what is missing by `wait`, a deadline, is counted
    as lost."""
    total = sum(committed.values())
    # fewer than committed by the deadline: counted as lost below
    messages = received(stack, set(committed), total, wait=wait, exact=False)
    steps: dict[str, list[int]] = {}
    ids: dict[tuple[str, int], str] = {}
    for message in messages:
        n = int(json.loads(b"".join(message.body))["n"])
        steps.setdefault(str(message.session_id), []).append(n)
        ids[(str(message.session_id), n)] = str(message.message_id)
    lost = twice = out_of_order = 0
    for key, n in committed.items():
        got = steps.get(key, [])
        counts = Counter(got)
        lost += sum(1 for step in range(n) if step not in counts)
        twice += sum(c - 1 for c in counts.values())
        out_of_order += sum(1 for a, b in itertools.pairwise(got) if b < a)
    return Tally(total, len(messages), lost, twice, out_of_order, ids)


class TopicLog:
    """The Service Bus endpoint's log: the sends its duplicate detection dropped, by message
    id (an event sent `1 + dropped` times). `mark()` is where the log ends now: a window of
    the run is between two marks."""

    DROPPED = re.compile(r"duplicate message id (\S+) dropped")

    def __init__(self, stack: LocalStack) -> None:
        self.path = stack.log_path("servicebus")

    def mark(self) -> int:
        return self.path.stat().st_size if self.path.exists() else 0

    def dropped(self, ids: set[str], start: int = 0, end: int | None = None) -> Counter[str]:
        """The sends of `ids` dropped as duplicates between two marks (the whole log: 0, None)."""
        with self.path.open("rb") as log:
            log.seek(start)
            text = log.read(None if end is None else end - start).decode("utf-8", "replace")
        return Counter(m for m in self.DROPPED.findall(text) if m in ids)


@contextlib.contextmanager
def parts(stack: LocalStack) -> Iterator[list[str]]:
    """The names of the stack's parts a test starts (`host_process`'s), stopped at its end."""
    started: list[str] = []
    try:
        yield started
    finally:
        for name in reversed(started):
            if name in stack.scaled:
                stack.stop_part(name)
