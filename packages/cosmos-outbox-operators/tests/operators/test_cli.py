"""The operators' command line (`cosmos-outbox`, `cosmos_outbox_operators.cli`) on an app's stores
(recovery_world.py's app, on the test kit's fakes: `main(argv, outbox=...)`, as an app's own
tool runs it): every command, its text and `--json` output, its progress lines and exit codes,
its one-line errors, and who its actions are audited as."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from deadlines import SHORT
from recovery_world import SUBSCRIPTION, RecoveryWorld

from cosmos_outbox_operators.cli import main

#: Who the command line acts as (`cli._direct.command_line_actor`: the user and the machine).
COMMAND_LINE = "the command line as "


@pytest.fixture
def served() -> Iterator[RecoveryWorld]:
    yield from RecoveryWorld.running()


def run(world: RecoveryWorld, *args: str, capsys: Any) -> tuple[int, str, str]:
    code = main(list(args), outbox=world.outbox)
    out, err = capsys.readouterr()
    return code, out, err


def test_status_and_health(served: RecoveryWorld, capsys: Any) -> None:
    world = served
    world.memory.target_rules.lacking("legacy")  # a subscription without the rule: named
    code, out, err = run(world, "status", capsys=capsys)
    assert code == 0 and out.startswith("pending 0 event(s); quarantined 0"), err
    assert "1 subscription(s) of topic" in out and "legacy (rule $Default: TrueFilter)" in out
    code, out, _ = run(world, "health", "--json", capsys=capsys)
    assert code == 0 and json.loads(out) == {"status": "healthy"}


def test_a_quarantined_event_discarded_from_the_command_line_says_what_subscribers_see(
    served: RecoveryWorld, capsys: Any
) -> None:
    world = served
    ids = world.publish("w1", "StockAdded", "StockAdded", "StockAdded")
    world.poison(ids[1])
    world.relay()
    world.deliver_new()
    code, out, _ = run(world, "quarantine", "list", capsys=capsys)
    assert code == 0 and ids[1] in out and "1 quarantine record(s)" in out
    code, out, _ = run(
        world,
        "quarantine",
        "discard",
        ids[1],
        "--reason",
        "entered by hand",
        capsys=capsys,
    )
    assert code == 0
    assert f"event {ids[1]} (warehouse w1 v2) discarded by {COMMAND_LINE}" in out
    assert "subscribers will see: OutboxEventDiscarded" in out
    [result] = world.deliver_new()
    assert result is not None and result.applied == [2, 3]
    code, out, err = run(world, "--json", "quarantine", "replay", ids[1], capsys=capsys)
    assert code == 1 and out == "" and json.loads(err)["status"] == 409
    code, _, err = run(world, "quarantine", "replay", "no-such-event", capsys=capsys)
    assert code == 1 and err.startswith("error: 404 Not Found") and len(err.splitlines()) == 1


def test_dead_letters_from_the_command_line_counted_listed_resubmitted(
    served: RecoveryWorld, capsys: Any
) -> None:
    world = served
    ids = world.publish("w1", "StockAdded", "StockAdded", "StockAdded")
    world.relay()
    world.deliver_new(skip={ids[1]})
    code, out, _ = run(world, "deadletters", capsys=capsys)
    assert code == 0 and f"{SUBSCRIPTION} (subscription): 1 dead letter(s)" in out
    code, out, _ = run(
        world,
        "deadletters",
        "list",
        SUBSCRIPTION,
        "--aggregate-id",
        "w1",
        capsys=capsys,
    )
    assert code == 0 and ids[1] in out and "MaxDeliveryCountExceeded" in out
    code, out, _ = run(
        world,
        "--json",
        "deadletters",
        "peek",
        SUBSCRIPTION,
        "1",
        capsys=capsys,
    )
    assert json.loads(out)["eventId"] == ids[1]
    code, _, err = run(world, "deadletters", "resubmit", SUBSCRIPTION, capsys=capsys)
    assert code == 2 and "name the dead letters" in err
    code, out, err = run(
        world,
        "deadletters",
        "resubmit",
        SUBSCRIPTION,
        "--all",
        "--canary",
        "0",
        "--wait",
        capsys=capsys,
    )
    assert code == 0, err
    # a bulk operation: started, followed (progress on stderr) until done
    assert "started: operation " in err and "done: 1 of 1 done" in err
    assert out.startswith("operation ") and " done: 1 of 1 done, 0 failed" in out, out
    [(_, resubmitted)] = world.memory.dead_letters.sent
    result = world.deliver(resubmitted)
    assert result is not None and result.applied == [2, 3]


def test_a_refused_resubmission_exits_3_and_says_which(served: RecoveryWorld, capsys: Any) -> None:
    world = served
    ids = world.publish("w1", "StockAdded", "StockAdded")
    world.relay()
    world.deliver_new(skip={ids[1]})
    world.memory.dead_letters.fail_sends = True
    code, out, _ = run(world, "deadletters", "resubmit", SUBSCRIPTION, "1", capsys=capsys)
    assert code == 3 and "#1" in out and "it stays" in out


def test_a_long_redrive_shows_its_progress_and_its_numbers(
    served: RecoveryWorld, capsys: Any
) -> None:
    world = served
    for n in range(5):
        world.publish(f"w{n}", "StockAdded")
    code, out, err = run(
        world,
        "redrive",
        "--since",
        "2000-01-01T00:00:00Z",
        "--page-size",
        "2",
        capsys=capsys,
    )
    assert code == 0, err
    progress = err.splitlines()
    assert len(progress) == 3 and "5 of 5 event(s)" in progress[-1]
    assert "2 of 5 event(s), 2 accepted by the topic as new messages" in progress[0]
    assert "5 event(s), 5 accepted by the topic as new messages, 0 quarantined" in out
    assert len(world.sent) == 5


def test_a_redrive_as_a_bulk_operation_followed_until_done(
    served: RecoveryWorld, capsys: Any
) -> None:
    world = served
    for n in range(5):
        world.publish(f"w{n}", "StockAdded")
    code, out, err = run(
        world, "redrive", "--since", "2000-01-01T00:00:00Z", "--wait", capsys=capsys
    )
    assert code == 0, err
    # started (its id said), followed (progress on stderr, worked from here too) until done
    assert "started: operation " in err and "done: 5 of 5 done" in err
    assert out.startswith("operation ") and " done: 5 of 5 done, 0 failed" in out, out
    assert "Re-drive of the stored events created since 2000-01-01" in out
    operation = out.split()[1]
    redriven = [m for m in world.sent if m.application_properties["outboxRedrive"] == operation]
    assert len(redriven) == len(world.sent) == 5
    code, out, _ = run(
        world, "redrive", "--since", "2000-01-01T00:00:00Z", "--operation", capsys=capsys
    )
    assert code == 0 and " created: 0 of ? (counting) done" in out, out  # started, not followed


def test_journey_and_subscribers_from_the_command_line(served: RecoveryWorld, capsys: Any) -> None:
    world = served
    ids = world.publish("w1", "StockAdded", "StockAdded", "StockAdded")
    world.relay()
    world.deliver_new(skip={ids[1]})
    code, out, _ = run(world, "journey", "--event-id", ids[1], capsys=capsys)
    assert code == 0 and "dead-lettered at projections" in out
    code, out, _ = run(world, "journey", "--aggregate", "warehouse", "w1", capsys=capsys)
    assert code == 0 and out.splitlines()[0].startswith("warehouse w1: 3 event(s) known")
    code, out, _ = run(world, "subscribers", capsys=capsys)
    assert code == 0 and "holds [3]" in out and "version 2 has not arrived" in out
    code, out, _ = run(
        world,
        "subscribers",
        "release",
        SUBSCRIPTION,
        "warehouse",
        "w1",
        "--version",
        "2",
        "--reason",
        "lost",
        capsys=capsys,
    )
    assert code == 0 and "version 2 given up at projections" in out


def test_an_aggregates_documents_from_the_command_line_every_page(
    served: RecoveryWorld, capsys: Any
) -> None:
    world = served
    ids = world.publish("w1", "StockAdded", "StockAdded", "StockAdded")
    code, out, err = run(world, "documents", "w1", "--page-size", "2", capsys=capsys)
    stored = world.memory.store.query("SELECT * FROM c", partition_key="w1")
    assert len(stored) > 2  # more than a page
    assert code == 0 and out.splitlines()[0] == f"{len(stored)} document(s) in partition w1", err
    assert f"  {ids[2]}  domainEvent v3" in out.splitlines()
    code, out, _ = run(world, "documents", "w1", "--json", capsys=capsys)
    assert code == 0 and {d["id"] for d in json.loads(out)["items"]} >= set(ids)


def test_a_settings_files_values_are_the_runs_only(
    served: RecoveryWorld, capsys: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # main() in a process that goes on (a tool's, a test's): the file's values must not stay
    # in its environment, where they would win over the next run's file (or a child's)
    monkeypatch.setenv("OUTBOX_CLI_KEPT", "the process's own")
    settings = tmp_path / "local.settings.json"
    values = {"OUTBOX_CLI_FROM_FILE": "this run's", "OUTBOX_CLI_KEPT": "the file's"}
    settings.write_text(json.dumps({"IsEncrypted": False, "Values": values}))
    code, _, err = run(served, "--settings", str(settings), "status", capsys=capsys)
    assert code == 0, err
    assert "OUTBOX_CLI_FROM_FILE" not in os.environ
    assert os.environ["OUTBOX_CLI_KEPT"] == "the process's own"


def test_settings_that_are_not_there_are_one_line_and_exit_1() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COSMOS", "Cosmos"))}
    done = subprocess.run(
        [sys.executable, "-m", "cosmos_outbox", "status"],
        capture_output=True,
        text=True,
        timeout=SHORT,
        env=env,
        check=False,
    )
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("error: invalid settings: COSMOS_CONTAINER")
    assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr


def test_failure_groups_are_listed_and_retried_by_group(served: RecoveryWorld, capsys: Any) -> None:
    world = served
    ids = world.publish("w1", "StockAdded", "StockAdded")
    world.relay()
    world.deliver_new(skip=set(ids))
    code, out, err = run(world, "groups", "--json", capsys=capsys)
    [group] = json.loads(out)["groups"]
    assert code == 0 and group["count"] == 2 and group["entity"] == SUBSCRIPTION
    code, out, err = run(world, "groups", capsys=capsys)
    assert out.splitlines()[0] == "1 failure group(s)" and group["id"] in out
    code, out, err = run(world, "groups", "preview", group["id"], "retry", capsys=capsys)
    assert code == 0 and f"group {group['id']}" in out and "2 would touch" in out, err
    code, out, err = run(world, "groups", "retry", group["id"], capsys=capsys)
    assert code == 0 and "created: 0 of ? (counting) done" in out, err  # started, not followed
    operation = out.split()[1]
    code, out, err = run(world, "operations", capsys=capsys)
    assert code == 0 and out.splitlines()[0] == "1 operation(s)" and operation in out
    # its canary (5 by default, 2 here: all of it) sent, then it is followed to its end
    code, out, err = run(world, "operations", "show", operation, "--wait", capsys=capsys)
    assert code == 0 and f"operation {operation} done: 2 of 2 done" in out, (out, err)
    assert "the canary held every item (2)" in out
    code, _, err = run(world, "operations", "cancel", operation, capsys=capsys)
    assert code == 1 and "409" in err and "nothing to cancel" in err
    with pytest.raises(SystemExit) as refused:  # a discard names its reason
        run(world, "groups", "discard", group["id"], capsys=capsys)
    assert refused.value.code == 2 and "--reason" in capsys.readouterr().err
