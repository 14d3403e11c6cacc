"""The command line's `failures` (list, show, retry, archive, unarchive): the failure records of
either kind (dead letters, the quarantine's: OUTBOX_FAILURE_INGEST), listed with the filters of
`GET failures` and acted on by their ids through the routes `failures/{failureId}/...`."""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, TypeAlias

from cosmos_outbox_operators.cli._output import DONE, PARTLY, Output, will_see

if TYPE_CHECKING:
    from cosmos_outbox_operators.cli._direct import DirectApi

__all__ = ["failure_commands", "failures"]

Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def failure_commands(commands: Commands, flags: argparse.ArgumentParser) -> None:
    """`failures` (list, show, retry, archive, unarchive): either kind, by the records' ids."""
    failures = commands.add_parser(
        "failures",
        parents=[flags],
        help="failed messages kept as data, dead letters and quarantined events alike",
    )
    verbs = failures.add_subparsers(dest="action", required=True)
    listing = verbs.add_parser("list", parents=[flags], help="a page after another, filtered")
    listing.add_argument("--kind", choices=("deadLetter", "quarantine"), help="of this kind")
    listing.add_argument("--status", choices=("open", "resolved", "archived"), help="in this state")
    listing.add_argument("--group", help="of this failure group (its id)")
    listing.add_argument("--page-size", type=int, default=100)
    for verb, text in (
        ("show", "one, its attempts and history"),
        ("retry", "send it again (a dead letter resubmitted, a quarantined event replayed)"),
        ("archive", "give it up (its notice sent, its record archived)"),
        ("unarchive", "bring an archived dead letter's record back among the open ones"),
    ):
        acting = verbs.add_parser(verb, parents=[flags], help=text)
        acting.add_argument("failure_id", help="failure-<32 hex>: a list's id, a journey's")
        if verb == "archive":
            acting.add_argument("--reason", required=True, help="why (audit line, notice)")


def failures(api: DirectApi, args: argparse.Namespace, out: Output) -> int:
    """`failures list|show|retry|archive|unarchive`: the failure records of either kind (dead
    letters, the quarantine's), listed with the route's filters and acted on by their ids."""
    # the listing and the failure's lines are the other commands' (which import this module)
    from cosmos_outbox_operators.cli._commands import _listing, _show_failure, _what

    if args.action == "list":
        filters = {"kind": args.kind, "status": args.status, "group": args.group}
        return _listing(
            api,
            args,
            out,
            "list_failures",
            "{} failure(s)",
            lambda f: (
                f"{f['id']}  {f['kind']}  {f['state']}  {f['entity']}  {_what(f)}  "
                f"{f.get('reason') or '-'} ({f['attemptCount']} attempt(s), last "
                f"{f['lastFailedAt']})"
            ),
            **filters,
        )
    if args.action == "show":
        return _show_failure(api, args, out)
    if args.action == "archive":
        acted = api.call("archive_failure", failureId=args.failure_id, reason=args.reason)
    else:
        acted = api.call(f"{args.action}_failure", failureId=args.failure_id)

    def said(a: Any) -> Iterable[str]:
        yield f"failure {a['id']} ({a['kind']}) {a['action']}: {a['outcome']}"
        yield will_see(a)

    return out.result(acted, said, DONE if acted["done"] else PARTLY)
