"""The commands of `cosmos-outbox` (this package's), each one or more calls of the operators'
operations on the stores (`_direct`), and what each prints: a few lines for a person, or the
operations' JSON with `--json` (for scripts); progress on stderr (`--quiet`: none).

Exit codes: 0 done; 1 an operation answered an error (its problem in one line on stderr; with
`--json`, the problem document, on one line) or the settings are wrong; 2 the command line is
wrong; 3 done in part (dead letters not handled, a re-drive that quarantined events, a bulk
operation that failed items, paused after its canary or was cancelled): the output says
which."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeAlias

from cosmos_outbox.errors import OutboxError
from cosmos_outbox.operations import BULK_KINDS
from cosmos_outbox.settings import SettingsError
from cosmos_outbox_operators._routes.dead_letters import FILTER_FIELDS, FILTER_QUERY
from cosmos_outbox_operators.cli._direct import AppProblemError, DirectApi
from cosmos_outbox_operators.cli._failures import failure_commands, failures
from cosmos_outbox_operators.cli._mcp import mcp_command, serve_mcp
from cosmos_outbox_operators.cli._operations import (
    bulk_flags,
    canary_of,
    operation_commands,
    operations,
    started,
)
from cosmos_outbox_operators.cli._output import DONE, FAILED, PARTLY, USAGE, Output
from cosmos_outbox_operators.cli._output import will_see as _will_see
from cosmos_outbox_operators.cli._trust import TRUST_HINT, untrusted_endpoint

if TYPE_CHECKING:
    from cosmos_outbox import Outbox

__all__ = ["main", "parser"]

TIMEOUT_VARIABLE = "COSMOS_OUTBOX_TIMEOUT"
DEFAULT_TIMEOUT = 60.0


def _version(version: Any) -> str:
    return f"v{version}" if version is not None else "version unknown"


def _what(item: Any, *, action: bool = True) -> str:
    """An event (an answer's item) in words, never "None" (an operator cannot act on it):
    "contact c-1 v3 ContactRenamed"; "aggregate unknown" for a record that could not be read."""
    named = f" {item['action']}" if action and item.get("action") else ""
    if not item.get("aggregateId"):
        return "aggregate unknown" + named
    kind = item.get("aggregateType") or "aggregate"
    return f"{kind} {item['aggregateId']} {_version(item.get('version'))}{named}"


# -- the commands ---------------------------------------------------------------------------


def _status(api: DirectApi, args: argparse.Namespace, out: Output) -> int:
    def lines(s: Any) -> Iterable[str]:
        age = s.get("oldestPendingAgeSeconds")
        oldest = f", the oldest {age:g} s old" if age is not None else ""
        yield f"pending {s['pending']} event(s){oldest}; quarantined {s['quarantined']}"
        if blocked := s.get("relayBlocked"):
            yield (
                f"relay blocked on {blocked.get('eventId') or 'start'} since "
                f"{blocked.get('since')} ({blocked.get('attempts')} attempts): "
                f"{blocked.get('reason')}"
            )
        for lease in s.get("leases", []):
            yield (
                f"  lease {lease['lease']}: {lease['pending']} pending, owner "
                f"{lease.get('owner') or '-'}, checkpoint {lease.get('checkpointAt') or '-'}"
            )
        if rules := s.get("targetRules"):
            yield rules["summary"]

    return out.result(api.call("outbox_status"), lines)


def _health(api: DirectApi, args: argparse.Namespace, out: Output) -> int:
    return out.result(api.call("outbox_health"), lambda b: [json.dumps(b, ensure_ascii=False)])


def _journey(api: DirectApi, args: argparse.Namespace, out: Output) -> int:
    if args.event_id:
        body = api.call("event_journey", eventId=args.event_id)
    else:
        kind, aggregate = args.aggregate
        body = api.call("aggregate_journey", aggregateType=kind, aggregateId=aggregate)
    events = body.get("events", [])
    return out.result(
        body,
        lambda j: [
            j["summary"],
            *(f"  {_version(e.get('version'))}: {e['summary']}" for e in events),
            *(line for f in j.get("failures", []) for line in _failure_lines(f)),
        ],
    )


def _failure_lines(failure: Any) -> Iterable[str]:
    """A failed message kept as data, and its history: each attempt, each thing done to it."""
    yield (
        f"failure {failure['id']}: {failure['state']} at {failure['entity']}, "
        f"{failure['attemptCount']} attempt(s), first failed {failure['firstFailedAt']}, "
        f"last {failure['lastFailedAt']}"
    )
    for n, a in enumerate(failure["attempts"], start=1):
        yield (
            f"  attempt {n} at {a['at']}: dead letter #{a['sequenceNumber']} "
            f"{a.get('reason') or '-'}: {a.get('description') or '-'} "
            f"(delivered {a['deliveryCount']}x)"
        )
    for h in failure["history"]:
        operation = f" in operation {h['operation']}" if h.get("operation") else ""
        note = f": {h['note']}" if h.get("note") else ""
        yield f"  {h['what']} at {h['at']} by {h['by']}{operation}{note}"


def _show_failure(api: DirectApi, args: argparse.Namespace, out: Output) -> int:
    """`deadletters show ID`: one failed message kept as data, its attempts and history."""
    found = api.call("show_failure", failureId=args.failure_id)
    return out.result(found, lambda b: list(_failure_lines(b["failure"])))


def _listing(
    api: DirectApi,
    args: argparse.Namespace,
    out: Output,
    operation: str,
    head: str,
    item: Callable[[Any], str],
    **parameters: Any,
) -> int:
    """A paged listing, its pages followed to the end: `head` (its count in it), then a line
    per item."""
    items: list[Any] = []
    token: str | None = None
    while True:
        page = api.call(operation, pageSize=args.page_size, continuationToken=token, **parameters)
        items += page["items"]
        if not (token := page.get("continuationToken")):
            break
    return out.result(
        {"items": items, "count": len(items)},
        lambda b: [head.format(b["count"]), *(f"  {item(i)}" for i in b["items"])],
    )


def _documents(api: DirectApi, args: argparse.Namespace, out: Output) -> int:
    def item(d: Any) -> str:
        version = f" v{d['version']}" if d.get("version") is not None else ""
        return f"{d.get('id')}  {d.get('type', '-')}{version}"

    head = f"{{}} document(s) in partition {args.aggregate_id}"
    return _listing(
        api, args, out, "aggregate_documents", head, item, aggregateId=args.aggregate_id
    )


def _quarantine(api: DirectApi, args: argparse.Namespace, out: Output) -> int:
    if args.action == "list":
        return _listing(
            api,
            args,
            out,
            "list_quarantine",
            "{} quarantine record(s)",
            lambda i: f"{i['eventId']}  {_what(i)}  {i['status']}  {i['reason']}",
        )
    if args.action == "replay":
        replayed = api.call("replay_quarantined", eventId=args.event_id)
        return out.result(
            replayed,
            lambda i: [
                f"event {i['eventId']}: {i['status']} (replays {i['replays']})"
                + ("" if i["status"] == "resolved" else f": {i['reason']}")
            ],
        )
    if args.action == "adopt":
        return out.result(
            api.adopt_quarantine(
                lambda a: out.progress(
                    f"adopted {a['read']} of {a['of']} unresolved quarantine record(s) "
                    f"({a['new']} new)"
                )
            ),
            lambda a: [
                f"{a['read']} unresolved quarantine record(s) read, {a['new']} new failure "
                f"record(s) kept ({a['read'] - a['new']} kept already)"
                + (
                    f", {a['healed']} brought to their failure record's state"
                    if a["healed"]
                    else ""
                )
                + (f", {a['settled']} resolved or discarded meanwhile" if a["settled"] else "")
            ],
        )
    discarded = api.call("discard_quarantined", eventId=args.event_id, reason=args.reason)
    return out.result(
        discarded,
        lambda d: [
            f"event {d['eventId']} ({_what(d, action=False)}) discarded by {d.get('discardedBy')}",
            _will_see(d),
        ],
    )


def _filter(args: argparse.Namespace) -> dict[str, Any]:
    """The dead letters' filter given, by its fields' names (`_filters`)."""
    return {k: v for k in FILTER_FIELDS if (v := getattr(args, f"filter_{k}", None)) is not None}


def _dead_letters(api: DirectApi, args: argparse.Namespace, out: Output) -> int:
    action = args.action or "count"
    if action == "count":

        def counted(b: Any) -> Iterable[str]:
            for e in b["entities"]:
                more = "+" if e.get("atLeast") else ""
                yield f"{e['name']} ({e['kind']}): " + (
                    f"cannot be read: {e['error']}"
                    if e.get("error")
                    else f"{e['deadLetters']}{more} dead letter(s)"
                )

        return out.result(api.call("count_dead_letters"), counted)
    if action == "list":
        return _listing(
            api,
            args,
            out,
            "list_dead_letters",
            f"{{}} dead letter(s) at {args.entity}",
            lambda i: (
                f"#{i['sequenceNumber']}  {i.get('eventId') or '-'}  {_what(i)}  "
                f"{i.get('deadLetterReason')}: {i.get('deadLetterDescription')}  "
                f"(delivered {i['deliveryCount']}x, resubmitted {i['resubmissions']}x)"
            ),
            entity=args.entity,
            **_filter(args),
        )
    if action == "peek":
        letter = api.call("peek_dead_letter", entity=args.entity, sequenceNumber=args.number)
        return out.result(letter, lambda b: [json.dumps(b, indent=2, ensure_ascii=False)])
    if action == "show":
        return _show_failure(api, args, out)
    return _letters_acted(api, args, out, action)


def _repeated(
    out: Output, call: Callable[[Any], Any], said: Callable[[Any], str], again: Callable[[Any], Any]
) -> list[Any]:
    """The answers of `call(the previous answer)` while `again(answer)`, each said as
    progress: an action of at most a call's worth (a page) repeated until it is done."""
    answers: list[Any] = []
    while True:
        answers.append(answer := call(answers[-1] if answers else None))
        out.progress(said(answer))
        if not again(answer):
            return answers


def _letters_acted(api: DirectApi, args: argparse.Namespace, out: Output, action: str) -> int:
    """A resubmit or a discard: of dead letters named by their numbers, by this call; of those
    matching a filter (or all of them), a bulk operation (`_started`)."""
    numbers = args.sequence_numbers
    if not numbers:
        request = _filter(args) | ({"all": True} if args.all else {})
        request |= {"reason": args.reason} if action == "discard" else canary_of(args)
        begun = api.call(f"{action}_dead_letters_operation", request, entity=args.entity)
        return started(api, args, out, begun)
    request = {"sequenceNumbers": numbers} | (
        {"reason": args.reason} if action == "discard" else {}
    )
    answer = api.call(f"{action}_dead_letters", request, entity=args.entity)
    out.progress(f"{action}: {answer['done']} done, {answer['failed']} not at {args.entity}")

    def acted(b: Any) -> Iterable[str]:
        verb = "resubmitted" if action == "resubmit" else "discarded"
        yield f"{b['done']} dead letter(s) {verb} at {b['entity']}, {b['failed']} not"
        for h in b["handled"]:
            if h.get("failure"):
                yield f"  #{h['sequenceNumber']} ({h.get('eventId')}): {h['failure']}"
        yield _will_see(b)

    return out.result(answer, acted, PARTLY if answer["failed"] else DONE)


def _subscribers(api: DirectApi, args: argparse.Namespace, out: Output) -> int:
    if args.action == "release":
        kind, aggregate = args.aggregate
        request = {"aggregateType": kind, "aggregateId": aggregate, "version": args.version}
        released = api.call(
            "release_held", request | {"reason": args.reason}, subscription=args.subscription
        )
        return out.result(
            released,
            lambda b: [
                f"{kind} {aggregate} version {args.version} given up at {b['subscription']} "
                f"(notice {b['notice']['messageId']})",
                _will_see(b),
            ],
        )

    def lines(b: Any) -> Iterable[str]:
        for s in b["subscribers"]:
            letters = (
                f"{s['deadLetters']}{'+' if s['deadLettersAtLeast'] else ''} dead letter(s)"
                if s.get("deadLetters") is not None
                else f"dead letters unreadable ({s.get('deadLettersError')})"
            )
            held = (
                f"{s['heldEvents']} event(s) held"
                if s["known"]
                else "its projection container is not known (OUTBOX_SUBSCRIPTIONS name=container)"
            )
            yield f"{s['subscription']}: {letters}; {held}"
            for h in s["held"]:
                yield (
                    f"  {h.get('aggregateType')} {h['aggregateId']}: holds {h['heldVersions']} "
                    f"since {h.get('heldSince')}: {h['reason']}; {h['release']}"
                )
            for g in s["acceptedGaps"]:
                yield (
                    f"  accepted gap: {g.get('aggregateType')} {g['aggregateId']} "
                    f"v{g['version']} given up by {g.get('discardedBy')}: {g.get('reason')}"
                )

    return out.result(api.call("subscribers_status"), lines)


def _redrive(api: DirectApi, args: argparse.Namespace, out: Output) -> int:
    scope: dict[str, Any] = {"since": args.since}
    scope |= {
        k: v for k in ("aggregateType", "aggregateId", "subscription") if (v := vars(args)[k])
    }
    if args.operation or args.wait:  # a bulk operation: said, and with --wait followed
        return started(api, args, out, api.call("redrive_events_operation", scope))
    scope["pageSize"] = args.page_size

    def said(p: Any, so_far: str = "") -> str:
        return (
            f"redrive {p['redriveId']}: {so_far}{p['events']} event(s), {p['accepted']} accepted "
            f"by the topic as new messages, {p['quarantined']} quarantined"
        )

    [*_, page] = _repeated(
        out,
        lambda last: api.call(
            "redrive_events",
            scope | ({"continuationToken": last["continuationToken"]} if last else {}),
        ),
        lambda p: said(p, f"{p['done']} of "),
        lambda p: p.get("continuationToken"),
    )
    return out.result(
        page, lambda p: [said(p), _will_see(p)], PARTLY if page["quarantined"] else DONE
    )


def _groups(api: DirectApi, args: argparse.Namespace, out: Output) -> int:
    if not args.action:

        def listed(b: Any) -> Iterable[str]:
            yield f"{len(b['groups'])} failure group(s){' (at least)' if b['atLeast'] else ''}"
            for g in b["groups"]:
                yield (
                    f"  {g['id']}  {g['count']:>5}  {g['entity'] or 'quarantine'}  "
                    f"{g.get('aggregateType') or '-'} {g.get('action') or '-'}  {g['cause']}  "
                    f"(first {g.get('seen', 'seen')} {g.get('firstSeen')}, "
                    f"last {g.get('lastSeen')})"
                )
            for gap in b.get("unanswered", []):
                yield f"  not grouped: {gap['part']} ({gap['dependency']}: {gap['error']})"

        return out.result(api.call("list_groups"), listed)
    if args.action == "unarchive":

        def unarchived(b: Any) -> Iterable[str]:
            yield (
                f"group {b['group']['id']}: {b['unarchived']} unarchived, {b['remaining']} "
                f"still archived; {b['group']['count']} open"
            )

        return out.result(api.call("unarchive_group", groupId=args.group_id), unarchived)
    if args.action != "preview":
        request = {"action": args.action} | ({"reason": args.reason} if args.reason else {})
        request |= canary_of(args) if args.action == "retry" else {}
        begun = api.call("act_on_group", request, groupId=args.group_id)
        return started(api, args, out, begun)
    request = {"action": args.verb} | ({"reason": args.reason} if args.reason else {})
    preview = api.call("preview_group", request, groupId=args.group_id)

    def previewed(b: Any) -> Iterable[str]:
        yield f"group {b['group']['id']} ({b['group']['cause']}): {b['matching']} would touch"
        yield _will_see(b)

    return out.result(preview, previewed)


# -- the command line -------------------------------------------------------------------------


def _timeout(text: str) -> float:
    """A call's bound (`cosmos_outbox.http.bounded.checked_bound`: more than 0, at most 230)."""
    from cosmos_outbox.http.bounded import checked_bound

    try:
        return checked_bound(float(text), name="--timeout")
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a number of seconds more than 0 and at most 230: {text!r}"
        ) from None


#: The top parser's commands, each added by one of the functions below.
Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def parser(prog: str = "cosmos-outbox") -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog=prog,
        description="Operate an app's outbox on its stores, with its settings (the "
        "environment's, and --settings).",
    )
    _global_options(top, defaults=True)
    # the global options are taken after the command too (`cosmos-outbox status --settings F`)
    flags = argparse.ArgumentParser(add_help=False)
    _global_options(flags, defaults=False)
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in (
        _readings,
        _quarantine_commands,
        _dead_letter_commands,
        _more_commands,
        failure_commands,
        mcp_command,
    ):
        add(commands, flags)
    return top


def _global_options(parser: argparse.ArgumentParser, *, defaults: bool) -> None:
    """`--settings`, `--timeout`, `--json`, `--quiet`: on the top parser with their defaults;
    on each command's with none (given there, they win; not given, the top's stand)."""

    def default(value: Any) -> Any:
        return value if defaults else argparse.SUPPRESS

    parser.add_argument(
        "--settings",
        metavar="FILE",
        default=default(None),
        help="a local.settings.json read too (the environment wins)",
    )
    parser.add_argument(
        "--timeout",
        type=_timeout,
        default=default(os.environ.get(TIMEOUT_VARIABLE, str(DEFAULT_TIMEOUT))),
        help=f"seconds each call may take ({TIMEOUT_VARIABLE}; default {DEFAULT_TIMEOUT:g})",
    )
    parser.add_argument(
        "--json", action="store_true", default=default(False), help="print the answers' JSON"
    )
    parser.add_argument(
        "--quiet", action="store_true", default=default(False), help="no progress on stderr"
    )


def _readings(commands: Commands, flags: argparse.ArgumentParser) -> None:
    commands.add_parser("status", parents=[flags], help="the relay, its backlog, the quarantine")
    commands.add_parser("health", parents=[flags], help="the outbox's health")
    journey = commands.add_parser("journey", parents=[flags], help="where an event went")
    which = journey.add_mutually_exclusive_group(required=True)
    which.add_argument("--event-id", help="the event id")
    which.add_argument("--aggregate", nargs=2, metavar=("TYPE", "ID"), help="an aggregate's")
    documents = commands.add_parser(
        "documents", parents=[flags], help="an aggregate's documents, as stored (read only)"
    )
    documents.add_argument("aggregate_id", help="the aggregate id (its session id)")
    documents.add_argument("--page-size", type=int, default=100)


def _quarantine_commands(commands: Commands, flags: argparse.ArgumentParser) -> None:
    quarantine = commands.add_parser(
        "quarantine", parents=[flags], help="list, replay, discard or adopt"
    )
    actions = quarantine.add_subparsers(dest="action", required=True)
    listing = actions.add_parser("list", parents=[flags], help="every quarantine record")
    listing.add_argument("--page-size", type=int, default=100)
    actions.add_parser("replay", parents=[flags], help="send it again").add_argument("event_id")
    discard = actions.add_parser("discard", parents=[flags], help="give it up (notices sent)")
    discard.add_argument("event_id")
    discard.add_argument("--reason", required=True, help="why (the audit line, the notice)")
    actions.add_parser(
        "adopt",
        parents=[flags],
        help="keep each record without its failure record as one (OUTBOX_FAILURE_INGEST)",
    )


def _filters(command: argparse.ArgumentParser) -> None:
    """The dead letters' filter, as the routes declare it (`filter_<its field's name>`)."""
    for field in FILTER_QUERY:
        option = "--" + re.sub("([A-Z])", r"-\1", field.name).lower()
        command.add_argument(option, dest=f"filter_{field.name}", help=field.description)


def _dead_letter_commands(commands: Commands, flags: argparse.ArgumentParser) -> None:
    letters = commands.add_parser("deadletters", parents=[flags], help="dead letters")
    verbs = letters.add_subparsers(dest="action")
    verbs.add_parser("count", parents=[flags], help="per watched subscription (the default)")
    listed = verbs.add_parser("list", parents=[flags], help="one subscription's (or queue's)")
    listed.add_argument("entity", help="the subscription (or queue)")
    listed.add_argument("--page-size", type=int, default=100)
    _filters(listed)
    peek = verbs.add_parser("peek", parents=[flags], help="one dead letter, whole")
    peek.add_argument("entity")
    peek.add_argument("number", type=int, metavar="sequence_number")
    show = verbs.add_parser(
        "show",
        parents=[flags],
        help="one failed message kept as data (OUTBOX_FAILURE_INGEST): its attempts, its history",
    )
    show.add_argument("failure_id", help="failure-<32 hex>: a peek's failure.id, a journey's")
    for verb, text in (
        ("resubmit", "send them again, to that subscription only"),
        ("discard", "give them up at that subscription (its subscriber is told)"),
    ):
        acting = verbs.add_parser(verb, parents=[flags], help=text)
        acting.add_argument("entity")
        acting.add_argument("sequence_numbers", nargs="*", type=int, help="these (or a filter)")
        acting.add_argument(
            "--all", action="store_true", help="every one of them (a bulk operation)"
        )
        _filters(acting)
        bulk_flags(acting, f"deadletters.{verb}")
        if BULK_KINDS[f"deadletters.{verb}"].reason:
            acting.add_argument("--reason", required=True, help="why (audit line, notices)")


def _more_commands(commands: Commands, flags: argparse.ArgumentParser) -> None:
    """`subscribers` (status, release), `groups` (list, preview, retry, discard), `operations`,
    `redrive`."""
    subscribers = commands.add_parser("subscribers", parents=[flags], help="what they hold")
    subs = subscribers.add_subparsers(dest="action")
    subs.add_parser("status", parents=[flags], help="per watched subscription (the default)")
    release = subs.add_parser("release", parents=[flags], help="give a version up there")
    release.add_argument("subscription")
    release.add_argument("aggregate", nargs=2, metavar=("TYPE", "ID"))
    release.add_argument("--version", type=int, required=True)
    release.add_argument("--reason", required=True)
    groups = commands.add_parser("groups", parents=[flags], help="failures grouped by cause")
    verbs = groups.add_subparsers(dest="action")
    preview = verbs.add_parser("preview", parents=[flags], help="what an action would do")
    preview.add_argument("group_id")
    preview.add_argument("verb", choices=("retry", "discard"))
    preview.add_argument("--reason", help="why (a discard needs one)")
    for verb, text in (("retry", "replay or resubmit them"), ("discard", "give them up")):
        acting = verbs.add_parser(verb, parents=[flags], help=f"{text} (a bulk operation)")
        acting.add_argument("group_id")
        acting.add_argument(
            "--reason", required=BULK_KINDS[f"groups.{verb}"].reason, help="why (audit line)"
        )
        bulk_flags(acting, f"groups.{verb}")
    unarchive = verbs.add_parser(
        "unarchive", parents=[flags], help="bring its archived failure records back"
    )
    unarchive.add_argument("group_id")
    operation_commands(commands, flags)
    redrive = commands.add_parser("redrive", parents=[flags], help="send stored events again")
    redrive.add_argument("--since", required=True, help="RFC 3339, e.g. 2026-11-22T08:00:00Z")
    redrive.add_argument("--aggregate-type", dest="aggregateType", help="of this type only")
    redrive.add_argument("--aggregate-id", dest="aggregateId", help="this one's (with the type)")
    redrive.add_argument("--subscription", help="to this subscription only (else to all)")
    redrive.add_argument("--page-size", type=int, default=100, help="events per call")
    redrive.add_argument(
        "--operation",
        action="store_true",
        help="as a bulk operation, worked by the relay's hosts (not page by page from here)",
    )
    bulk_flags(redrive, "redrive")


_RUN: dict[str, Callable[[DirectApi, argparse.Namespace, Output], int]] = {
    "status": _status,
    "health": _health,
    "journey": _journey,
    "documents": _documents,
    "quarantine": _quarantine,
    "deadletters": _dead_letters,
    "subscribers": _subscribers,
    "redrive": _redrive,
    "groups": _groups,
    "operations": operations,
    "failures": failures,
    "mcp": serve_mcp,
}


def main(
    argv: list[str] | None = None, *, prog: str = "cosmos-outbox", outbox: Outbox | None = None
) -> int:
    """Run the command line `argv` on `outbox` (an app's own tool's; default: the `Outbox`
    the settings describe); its exit code. The values of a `--settings` file are in the
    environment for the run only (where it had none of its own): the caller's process goes on
    without them."""
    args = parser(prog).parse_args(argv)
    acting = args.command == "deadletters" and args.action in ("resubmit", "discard")
    if acting and not (args.sequence_numbers or args.all or _filter(args)):
        print(f"{prog}: error: name the dead letters: numbers, a filter, or --all", file=sys.stderr)
        return USAGE
    out = Output(as_json=args.json, quiet=args.quiet, out=sys.stdout, err=sys.stderr)
    added: list[str] = []
    try:
        if args.settings:
            from cosmos_outbox.relay import use_local_settings

            added = use_local_settings(args.settings)
        if outbox is None:
            from cosmos_outbox import Outbox

            outbox = Outbox()
        outbox.operations()  # the settings read before any call: a wrong one is one line
        # the calls' bound: a person at a terminal waits for the stores' first answer, which a
        # host's caller would not
        return _RUN[args.command](DirectApi(outbox, bound_seconds=args.timeout), args, out)
    except SettingsError as error:
        print(f"error: {error}", file=sys.stderr)
        return FAILED
    except AppProblemError as problem:
        if problem.status == 503 and (untrusted := untrusted_endpoint()) is not None:
            return _untrusted(untrusted)
        compact = json.dumps(problem.problem, separators=(",", ":"))
        print(compact if args.json else f"error: {problem.line()}", file=sys.stderr)
        return FAILED
    except KeyboardInterrupt:
        return 130
    except OutboxError as error:  # raised before an operation could answer (the store's client)
        untrusted = untrusted_endpoint()
        if untrusted is not None:
            return _untrusted(untrusted)
        print(f"error: {type(error).__name__}: {error}", file=sys.stderr)
        return FAILED
    finally:
        # the file's settings were this run's: a process that calls main() goes on without them
        for name in added:
            os.environ.pop(name, None)


def _untrusted(endpoint: str) -> int:
    """One line: the endpoint's certificate is not trusted here, and what to set."""
    print(
        f"error: the Cosmos DB endpoint {endpoint} presents a certificate this process does not "
        f"trust: {TRUST_HINT}",
        file=sys.stderr,
    )
    return FAILED
