"""The relay anywhere under chaos (issue 64's "Done when"), in `make chaos`, not in `make test`
(marked `chaos`: deselected unless `-m` names it; about 4 minutes of wall time for the three
runs). Each run has writers committing one event a transaction on 6 aggregates for 60 s or
more on a container of 4 physical partitions, the relay's instances sharing one lease
container (lease expiry 3 s, acquire and renew 0.5 s: funcstack's local-only settings for the
Functions trigger, the command's options for the processes), then counts what the test
subscription received: 0 lost, 0 received twice, 0 out of order per aggregate.

* Scale-out chaos with processes: 3 `cosmos-outbox relay` processes (funcstack's
  `host_process`, what `funcstack run --process` starts), a live split (4 leases become 5), the
  process holding most leases SIGKILLed, another SIGSTOPped past its leases' expiry and resumed,
  one added; each takeover waited for (from the fault until every lease is owned by a running
  instance) under expiry + acquire + SHORT, and its seconds printed (the lease protocol's own
  tests hold that no lease is taken before it expires).
* The same with a mixed fleet: 2 Functions trigger instances (funcstack's host, relay_app) and
  2 processes on the same leases: a trigger instance SIGKILLed, a process paused, a trigger
  instance added.
* The hand-over, under load: the relay on the Functions trigger (2 instances), processes
  started and the trigger stopped, then the trigger started and the processes SIGTERMed; each
  hand-over's leases taken before the stopped side's could have expired (the run's lease expiry
  is `HANDOVER_EXPIRY`, a minute: only a stop that released them is taken over sooner), and
  every event re-sent (its sends counted by the topic's duplicate detection) is within the
  batches in flight: at most `BATCH` per lease that changed owner in the window.

The figures are printed (`-s`): `make chaos` shows them.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

pytest.importorskip(
    "funcstack",
    reason="funcstack in this interpreter (Python 3.13+) runs these tests: its services",
)

from azure_stack import DATABASE
from deadlines import SHORT

from funcstack import LocalStack
from funcstack.scaleout import AppInstances, Instance
from relay.fleet import (
    ACQUIRE,
    EXPIRY,
    RELAY_APP,
    RENEW,
    LeaseWatch,
    TopicLog,
    Writers,
    app_settings,
    fast_trigger,
    owners,
    parts,
    relay_processes,
    takeover,
    tally,
    until,
)

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

#: Seconds the writers write in a chaos run (the faults land between 8 s and 44 s).
WRITING = 62.0
WRITERS = 6
#: MAX_ITEMS_PER_INVOCATION of the hand-over run: the batch in flight, at most.
BATCH = 5
#: The hand-over run's poll delay (FEED_POLL_DELAY_MS): a lease's changes gather for a second
#: (about 7 at the writers' pace), so its batches are full ones (`BATCH`); with the 0.1 s of
#: the others, a batch held one or two changes, and a relay that checkpointed only every 10th
#: batch re-sent no more than `BATCH` per lease that changed owner: the bound did not see it.
HANDOVER_POLL_MS = 1000


@dataclass
class Fleet:
    """The relay's instances on one lease container: groups of funcstack instances (a Functions
    app's, a process's), each instance a lease owner under its name."""

    stack: LocalStack
    leases: str
    groups: list[AppInstances]
    takeovers: list[tuple[str, str, int, float]] = field(default_factory=list)

    def instances(self) -> list[tuple[AppInstances, Instance]]:
        return [(group, inst) for group in self.groups for inst in group.instances]

    def running(self) -> set[str]:
        return {
            inst.name for _, inst in self.instances() if inst.down is None and inst.alive
        } - self.paused()

    def paused(self) -> set[str]:
        return {inst.name for _, inst in self.instances() if inst.paused}

    def held(self) -> Counter[str | None]:
        return Counter(owners(self.stack, self.leases).values())

    def all_held_by_running(self) -> bool:
        found = owners(self.stack, self.leases)
        return bool(found) and set(found.values()) <= self.running()

    def holding(self, group: AppInstances, *, most: bool = True) -> Instance:
        """The running instance of `group` holding the most (or fewest but one) leases."""
        held = self.held()
        candidates = [
            inst for inst in group.instances if inst.name in self.running() and held[inst.name]
        ]
        assert candidates, f"no running instance of {group.name} holds a lease: {held}"
        return sorted(candidates, key=lambda inst: -held[inst.name] if most else held[inst.name])[0]

    def take_over(self, fault: str, victim: Instance, inflict: Callable[[], object]) -> float:
        """Inflict `fault` on `victim`; the seconds until every lease is owned by a running
        instance (recorded in `takeovers`)."""
        leases_held = self.held()[victim.name]
        struck = time.monotonic()
        inflict()
        until(self.all_held_by_running, f"takeover after {fault}", takeover())
        took = time.monotonic() - struck
        self.takeovers.append((fault, victim.name, leases_held, round(took, 2)))
        return took


def chaos_run(
    stack: LocalStack,
    container: str,
    fleet: Fleet,
    *,
    kill_from: AppInstances,
    pause_from: AppInstances,
    add_to: AppInstances,
) -> dict[str, Any]:
    """Writers for `WRITING` s; meanwhile a live split, a SIGKILL, a pause past expiry, an
    instance added. What it measured (printed); asserts nothing lost, twice or out of order."""
    until(
        lambda: len(owners(stack, fleet.leases)) == 4 and fleet.all_held_by_running(),
        "the 4 leases shared by the fleet",
    )
    marks: list[tuple[str, float]] = []
    with Writers(stack, container, WRITERS) as writers:

        def mark(what: str) -> None:
            marks.append((what, round(time.monotonic() - writers.started, 1)))

        writers.at(8)
        mark("split")
        children = stack.split(DATABASE, container)  # live, as Azure splits on its own
        until(
            lambda: len(owners(stack, fleet.leases)) == 5 and fleet.all_held_by_running(),
            "the split's 5 leases held",
            takeover(),
        )
        writers.at(18)
        mark("SIGKILL")
        killed = fleet.holding(kill_from)
        fleet.take_over("SIGKILL", killed, lambda: kill_from.kill(killed, restart=False))
        writers.at(30)
        mark("SIGSTOP")
        paused = fleet.holding(pause_from)
        took = fleet.take_over("SIGSTOP", paused, lambda: pause_from.pause(paused))
        # kept paused past its leases' expiry (a state the run needs, not a verdict)
        time.sleep(max(0.0, EXPIRY + ACQUIRE - took))
        pause_from.resume(paused)
        mark("SIGCONT")
        until(
            lambda: fleet.held()[paused.name] > 0,
            f"{paused.name} taking its share again",
            takeover(),
        )
        writers.at(44)
        mark("add")
        adding = time.monotonic()
        added = add_to.add_instance(None)  # ready: started, and (a process) listening
        until(
            lambda: fleet.held()[added.name] > 0,
            f"{added.name} taking its share",
            takeover(),
        )
        took_added = time.monotonic() - adding
        writers.at(WRITING)
    mark("writers stopped")
    counted = tally(stack, writers.committed)
    mark("received")
    held = fleet.held()
    figures = {
        **counted.counts(),
        "split_into": children,
        "takeovers_s": fleet.takeovers,
        "added_took_share_s": round(took_added, 2),
        "leases_at_end": dict(held),
        "marks": marks,
    }
    print(f"\n{figures}")
    assert (counted.lost, counted.twice, counted.out_of_order) == (0, 0, 0), counted.line()
    assert len(owners(stack, fleet.leases)) == 5
    return figures


def test_three_relay_processes_under_a_split_a_kill_a_pause_and_one_more(
    funcstack_services: LocalStack, four_partitions: str, leases: str
) -> None:
    stack, container = funcstack_services, four_partitions
    values = app_settings(stack, container, leases)
    with parts(stack) as started:
        started.append("relay")
        processes = relay_processes(stack, "relay", 3, values)
        fleet = Fleet(stack, leases, [processes])
        chaos_run(
            stack, container, fleet, kill_from=processes, pause_from=processes, add_to=processes
        )


def test_a_mixed_fleet_of_trigger_instances_and_processes_under_the_same_chaos(
    funcstack_services: LocalStack, funcstack_app: Any, four_partitions: str, leases: str
) -> None:
    stack, container = funcstack_services, four_partitions
    values = app_settings(stack, container, leases)
    trigger = funcstack_app(
        RELAY_APP,
        settings={
            "COSMOS_CONTAINER": container,
            "COSMOS_LEASE_CONTAINER": leases,
            **fast_trigger(),
        },
        name="mixed-fn",
        instances=2,
        restart=False,
    ).instances
    assert trigger is not None
    with parts(stack) as started:
        started.append("mixed")
        processes = relay_processes(stack, "mixed", 2, values)
        fleet = Fleet(stack, leases, [trigger, processes])
        chaos_run(stack, container, fleet, kill_from=trigger, pause_from=processes, add_to=trigger)


#: The hand-over run's lease expiry: a minute, as Azure's (scaled: TEST_DEADLINE_SCALE), so that a
#: stop that did not release its leases (they wait for this expiry) is not taken over before the
#: hand-over's deadline, and one that did is, at the next acquire round, on any machine.
HANDOVER_EXPIRY = SHORT


def test_the_relay_hands_over_trigger_to_processes_and_back_resending_only_batches_in_flight(
    funcstack_services: LocalStack, funcstack_app: Any, four_partitions: str, leases: str
) -> None:
    """docs/relay-anywhere.md's steps, under load: processes started beside the trigger's 2
    instances, the trigger stopped (its leases released, the processes take them); the trigger
    started again, the processes SIGTERMed (their leases released, the trigger takes them)."""
    stack, container = funcstack_services, four_partitions
    batch = {"MAX_ITEMS_PER_INVOCATION": str(BATCH), "FEED_POLL_DELAY_MS": str(HANDOVER_POLL_MS)}
    values = {**app_settings(stack, container, leases), **batch}
    host_settings = {
        "COSMOS_CONTAINER": container,
        "COSMOS_LEASE_CONTAINER": leases,
        **batch,
        **fast_trigger(HANDOVER_EXPIRY),
    }
    topic = TopicLog(stack)

    def trigger(name: str) -> AppInstances:
        hosted = funcstack_app(
            RELAY_APP, settings=host_settings, name=name, instances=2, restart=False
        )
        instances: AppInstances | None = hosted.instances
        assert instances is not None
        return instances

    def held_by(group: AppInstances) -> Callable[[], bool]:
        names = {inst.name for inst in group.instances}
        return lambda: set(owners(stack, leases).values()) <= names

    def shared_with(group: AppInstances) -> Callable[[], bool]:
        names = {inst.name for inst in group.instances}
        return lambda: names <= set(owners(stack, leases).values())

    first = trigger("handover-fn-a")
    until(
        lambda: (
            len(owners(stack, leases)) == 4
            and held_by(first)()
            and None not in owners(stack, leases).values()
        ),
        "the trigger's 2 instances holding the 4 leases",
    )
    #: (what, when it began, the topic's log mark then)
    windows: list[tuple[str, float, int]] = []
    handovers: dict[str, dict[str, float]] = {}

    def hand_over(what: str, start: Callable[[], AppInstances], stop: str) -> AppInstances:
        """The new side started (it shares the leases), then the part `stop` stopped (SIGTERM:
        its leases released) until the new side holds every lease: before the stopped side's
        leases could have expired (renewed at most a renew interval before the stop), so
        released, not expired; timed from the stop (printed)."""
        windows.append((what, time.monotonic(), topic.mark()))
        to = start()
        until(shared_with(to), f"{what}: the leases shared")
        stopping = time.monotonic()
        stack.stop_part(stop)
        stopped = time.monotonic()
        until(
            held_by(to),
            f"{what}: every lease taken before the stopped side's could expire (released)",
            max(0.0, HANDOVER_EXPIRY - RENEW - (time.monotonic() - stopping)),
        )
        handovers[what] = {
            "stop_s": round(stopped - stopping, 2),
            "taken_s": round(time.monotonic() - stopping, 2),
        }
        return to

    with (
        parts(stack) as started,
        LeaseWatch(stack, leases) as watch,
        Writers(stack, container, WRITERS) as writers,
    ):
        windows.append(("the trigger", time.monotonic(), topic.mark()))
        writers.at(12)
        started.append("handover")
        processes = hand_over(
            "trigger -> processes",
            lambda: relay_processes(stack, "handover", 2, values, expiry=HANDOVER_EXPIRY),
            first.name,
        )
        writers.at(36)
        hand_over("processes -> trigger", lambda: trigger("handover-fn-b"), "handover")
        writers.at(60)
    ended, end_mark = time.monotonic(), topic.mark()
    counted = tally(stack, writers.committed)
    ids = set(counted.ids.values())
    per_window = []
    bounds = [*windows[1:], ("end", ended, end_mark)]
    for (what, began, mark), (_, until_, until_mark) in zip(windows, bounds, strict=True):
        resent = sum(topic.dropped(ids, mark, until_mark).values())
        per_window.append((what, resent, watch.transfers(began, until_)))
    sends = Counter(1 + n for n in [topic.dropped(ids).get(i, 0) for i in ids])
    logs = {inst.name: inst.log_path.read_text("utf-8", "replace") for inst in processes.instances}
    figures = {
        **counted.counts(),
        "handovers": handovers,
        "resent_and_lease_transfers_per_window": per_window,
        "events_by_sends": dict(sorted(sends.items())),
        # 0: exited on its own after the SIGTERM; -9: funcstack's kill 1.5 s after it
        "process_exit_codes": {i.name: i.runner.process.returncode for i in processes.instances},
        "batch": BATCH,
    }
    print(f"\n{figures}")
    assert (counted.lost, counted.twice, counted.out_of_order) == (0, 0, 0), counted.line()
    for what, resent, transfers in per_window:
        # re-sent: only what was in flight, at most a batch per lease that changed owner
        assert resent <= BATCH * transfers, (what, resent, transfers)
    for name, log in logs.items():
        assert "its leases released" in log and "not released" not in log, (name, log[-2000:])
