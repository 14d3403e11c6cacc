"""The command line's bulk operations: `operations` (list), `operations show|cancel|continue ID`,
a bulk action's start (`started`: its id said, and with `--wait` followed until it stops,
worked from this process too, so that it finishes with no relay host running) and the options
every bulk action takes (`bulk_flags`: `--wait`, a retry's `--canary`, `--canary-wait`)."""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, TypeAlias

from cosmos_outbox.operations import BULK_KINDS
from cosmos_outbox_operators.cli._output import DONE, PARTLY, Output, will_see

if TYPE_CHECKING:
    from cosmos_outbox_operators.cli._direct import DirectApi

__all__ = ["bulk_flags", "canary_of", "operation_commands", "operations", "started"]

Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def canary_of(args: argparse.Namespace) -> dict[str, Any]:
    """A retry's canary options, as given."""
    given = {"canary": args.canary, "canaryWaitSeconds": args.canary_wait}
    return {k: v for k, v in given.items() if v is not None}


def _operation_line(o: Any) -> str:
    items = o["items"] if o["itemsKnown"] else "? (counting)"
    return (
        f"operation {o['id']} {o['state']}: {o['done']} of {items} done, {o['failed']} failed, "
        f"{o['skipped']} skipped ({o['summary']})"
    )


def _operation_lines(o: Any) -> Iterable[str]:
    yield _operation_line(o)
    yield f"  started by {o['who']} at {o['createdAt']}" + (
        f"; reason: {o['reason']}" if o.get("reason") else ""
    )
    if o.get("note"):
        yield f"  {o['note']}"
    yield from (f"  failed: {f}" for f in o["failures"])
    if o["canContinue"]:
        yield f"  continue it: cosmos-outbox operations continue {o['id']} (or cancel it)"
    yield will_see(o)


def _code(o: Any) -> int:
    """An operation's exit code: done without failure 0; else (failed items, paused,
    cancelled) 3."""
    return DONE if o["state"] == "done" and not o["failed"] else PARTLY


def started(api: DirectApi, args: argparse.Namespace, out: Output, started: Any) -> int:
    """A bulk operation started: said (its id), and with --wait followed until it stops."""
    out.progress(f"started: {_operation_line(started)}")
    if not getattr(args, "wait", False):
        return out.result(started, _operation_lines)
    return _followed(api, args, out, started)


#: How often --wait looks at an operation (and works it: a relay host may not run).
POLL_SECONDS = 1.0


def _followed(api: DirectApi, args: argparse.Namespace, out: Output, operation: Any) -> int:
    """Follow `operation` until it stops (done, paused, cancelled), working it from this
    process too (it finishes with no relay host running; where one holds it, this one
    watches), its progress on stderr."""
    said = ""
    while True:
        if operation["state"] in ("done", "paused", "cancelled") and not operation["inFlight"]:
            return out.result(operation, _operation_lines, _code(operation))
        api.work(budget_seconds=POLL_SECONDS * 5)
        operation = api.call("show_operation", operationId=operation["id"])
        if (line := _operation_line(operation)) != said:
            out.progress(said := line)
        else:
            time.sleep(POLL_SECONDS)


def operations(api: DirectApi, args: argparse.Namespace, out: Output) -> int:
    """`operations` (list), `show ID [--wait]`, `cancel ID`, `continue ID [--wait]`."""
    if not args.action:

        def listed(b: Any) -> Iterable[str]:
            yield f"{len(b['operations'])} operation(s)"
            yield from (f"  {_operation_line(o)}" for o in b["operations"])

        return out.result(api.call("list_operations"), listed)
    calls = {
        "show": "show_operation",
        "cancel": "cancel_operation",
        "continue": "continue_operation",
    }
    operation = api.call(calls[args.action], operationId=args.operation_id)
    if getattr(args, "wait", False):
        return _followed(api, args, out, operation)
    return out.result(operation, _operation_lines)


def bulk_flags(command: argparse.ArgumentParser, kind: str) -> None:
    """A bulk operation's options: --wait, and the canary of a kind that sends one
    (`BULK_KINDS`)."""
    command.add_argument(
        "--wait",
        action="store_true",
        help="follow the operation until it stops (working it from here too)",
    )
    bounds = BULK_KINDS.canary
    if BULK_KINDS[kind].canary:
        command.add_argument(
            "--canary", type=int, help=f"send this many first (default {bounds.size}; 0: no canary)"
        )
        command.add_argument(
            "--canary-wait",
            dest="canary_wait",
            type=float,
            help=f"seconds to wait for the canary to fail again (default {bounds.wait_seconds:g})",
        )


def operation_commands(commands: Commands, flags: argparse.ArgumentParser) -> None:
    """`operations` (list), `show`, `cancel`, `continue`."""
    operations = commands.add_parser(
        "operations", parents=[flags], help="bulk operations and their progress"
    )
    verbs = operations.add_subparsers(dest="action")
    for verb, text in (
        ("show", "one, with its progress"),
        ("cancel", "stop it (a batch in flight is finished)"),
        ("continue", "go on after its canary paused it"),
    ):
        acting = verbs.add_parser(verb, parents=[flags], help=text)
        acting.add_argument("operation_id")
        if verb != "cancel":
            acting.add_argument(
                "--wait", action="store_true", help="follow it until it stops (working it too)"
            )
