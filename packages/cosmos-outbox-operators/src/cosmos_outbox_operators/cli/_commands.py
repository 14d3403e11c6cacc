"""The commands of `cosmos-outbox`, each one or more calls of the app's operators' routes, and
what each prints: a few lines for a person, or the routes' JSON with `--json` (for scripts).
The routes are the app's over HTTP, or, with `--direct` (or `--settings FILE`), the same routes
served in-process on the stores with the app's settings (`_direct`): for an app whose relay
runs as `cosmos-outbox relay` processes, or that serves no operators' routes.

Exit codes: 0 done; 1 the app answered an error (its problem in one line on stderr; with
`--json`, the problem document, on one line) or could not be reached; 2 the command line is
wrong; 3 done in part (some dead letters could not be moved, or a re-drive quarantined events):
the output says which.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.parse
from collections.abc import Callable, Iterator
from typing import Any, TextIO, TypeAlias

from cosmos_outbox.settings import SettingsError
from cosmos_outbox_operators.cli._client import (
    DEFAULT_API,
    DEFAULT_TIMEOUT,
    KEY_VARIABLE,
    OperatorsApi,
    OperatorsApiError,
)
from cosmos_outbox_operators.cli._direct import DirectApi

#: The operators' routes: the app's over HTTP, or served in-process on the stores.
Api: TypeAlias = OperatorsApi | DirectApi

__all__ = ["main", "parser"]

API_VARIABLE = "COSMOS_OUTBOX_API"
TIMEOUT_VARIABLE = "COSMOS_OUTBOX_TIMEOUT"
PREFIX_VARIABLE = "COSMOS_OUTBOX_ROUTE_PREFIX"
DONE, FAILED, USAGE, PARTLY = 0, 1, 2, 3
DIRECT_HELP = "run on the stores with the app's settings, not through its routes"
SETTINGS_HELP = "a local.settings.json whose Values are read too (the environment wins)"


class AppProblemError(Exception):
    """The app answered an error: its status and problem document."""

    def __init__(self, status: int, problem: Any) -> None:
        super().__init__(status)
        self.status = status
        self.problem = problem

    def line(self) -> str:
        problem = self.problem if isinstance(self.problem, dict) else {}
        text = f"{self.status} {problem.get('title', '')}".strip()
        detail = problem.get("detail")
        errors = problem.get("errors") or []
        fields = "; ".join(
            f"{e.get('field')}: {e.get('message')}" for e in errors if isinstance(e, dict)
        )
        return ": ".join(p for p in (text, detail, fields) if p)


class Output:
    """Where a command writes: its result on stdout, progress on stderr (unless quiet)."""

    def __init__(self, *, as_json: bool, quiet: bool, out: TextIO, err: TextIO) -> None:
        self.as_json, self.quiet, self.out, self.err = as_json, quiet, out, err

    def result(self, body: Any, lines: Callable[[Any], Iterator[str]]) -> None:
        if self.as_json:
            print(json.dumps(body, indent=2, ensure_ascii=False), file=self.out)
        else:
            for line in lines(body):
                print(line, file=self.out)

    def progress(self, text: str) -> None:
        if not self.quiet:
            print(text, file=self.err, flush=True)


def _ok(api: Api, method: str, path: str, body: Any = None) -> Any:
    status, answer = api.call(method, path, body)
    if status >= 400:
        raise AppProblemError(status, answer)
    return answer


# -- the commands ---------------------------------------------------------------------------


def _status(api: Api, args: argparse.Namespace, out: Output) -> int:
    body = _ok(api, "GET", api.route("status"))

    def lines(s: Any) -> Iterator[str]:
        age = s.get("oldestPendingAgeSeconds")
        yield (
            f"pending {s['pending']} event(s)"
            + (f", the oldest {age:g} s old" if age is not None else "")
            + f"; quarantined {s['quarantined']}"
        )
        blocked = s.get("relayBlocked")
        if blocked:
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
        rules = s.get("targetRules")
        if rules:
            yield rules["summary"]

    out.result(body, lines)
    return DONE


def _health(api: Api, args: argparse.Namespace, out: Output) -> int:
    body = _ok(api, "GET", api.route("health"))
    out.result(body, lambda b: iter([json.dumps(b, ensure_ascii=False)]))
    return DONE


def _journey(api: Api, args: argparse.Namespace, out: Output) -> int:
    if args.event_id:
        event = urllib.parse.quote(args.event_id, safe="")
        body = _ok(api, "GET", api.route(f"journey/events/{event}"))
    else:
        kind, aggregate = (urllib.parse.quote(part, safe="") for part in args.aggregate)
        body = _ok(api, "GET", api.route(f"journey/aggregates/{kind}/{aggregate}"))

    def lines(j: Any) -> Iterator[str]:
        yield j["summary"]
        for event in j.get("events", []):
            yield f"  v{event.get('version')}: {event['summary']}"

    out.result(body, lines)
    return DONE


def _documents(api: Api, args: argparse.Namespace, out: Output) -> int:
    aggregate = urllib.parse.quote(args.aggregate_id, safe="")
    items = _pages(api, api.route(f"documents/{aggregate}"), args.page_size)

    def listed(body: Any) -> Iterator[str]:
        yield f"{body['count']} document(s) in partition {args.aggregate_id}"
        for d in body["items"]:
            version = f" v{d['version']}" if d.get("version") is not None else ""
            yield f"  {d.get('id')}  {d.get('type', '-')}{version}"

    out.result({"items": items, "count": len(items)}, listed)
    return DONE


def _pages(api: Api, path: str, page_size: int) -> list[Any]:
    """Every item of a paged listing, its pages followed to the end."""
    items: list[Any] = []
    token: str | None = None
    while True:
        separator = "&" if "?" in path else "?"
        query = {"pageSize": str(page_size)} | ({"continuationToken": token} if token else {})
        page = _ok(api, "GET", f"{path}{separator}{urllib.parse.urlencode(query)}")
        if not isinstance(page, dict) or not isinstance(page.get("items"), list):
            raise OperatorsApiError(f"GET {path}: the answer is not a page of items")
        items += page["items"]
        token = page.get("continuationToken")
        if not token:
            return items


def _quarantine(api: Api, args: argparse.Namespace, out: Output) -> int:
    if args.action == "list":
        items = _pages(api, api.route("quarantine"), args.page_size)

        def listed(body: Any) -> Iterator[str]:
            yield f"{body['count']} quarantine record(s)"
            for i in body["items"]:
                yield (
                    f"  {i['eventId']}  {i.get('aggregateType')} {i.get('aggregateId')} "
                    f"v{i.get('version')} {i.get('action')}  {i['status']}  {i['reason']}"
                )

        out.result({"items": items, "count": len(items)}, listed)
        return DONE
    event = urllib.parse.quote(args.event_id, safe="")
    if args.action == "replay":
        body = _ok(api, "POST", api.route(f"quarantine/{event}/replay"))
        out.result(
            body,
            lambda i: iter(
                [
                    f"event {i['eventId']}: {i['status']} (replays {i['replays']})"
                    + ("" if i["status"] == "resolved" else f": {i['reason']}")
                ]
            ),
        )
        return DONE
    body = _ok(api, "DELETE", api.route(f"quarantine/{event}", reason=args.reason))
    out.result(
        body,
        lambda d: iter(
            [
                f"event {d['eventId']} ({d.get('aggregateType')} {d.get('aggregateId')} "
                f"v{d.get('version')}) discarded by {d.get('discardedBy')}",
                f"subscribers will see: {d['subscribersWillSee']}",
            ]
        ),
    )
    return DONE


#: The dead letters' filter: each option's name on the command line, and the routes' name of it.
FILTER = {
    "aggregate_type": "aggregateType",
    "aggregate_id": "aggregateId",
    "action_name": "action",
    "dead_letter_reason": "deadLetterReason",
    "since": "since",
    "until": "until",
}


def _filter(args: argparse.Namespace) -> dict[str, Any]:
    """The filter given, by the routes' names."""
    given = {key: getattr(args, name, None) for name, key in FILTER.items()}
    return {key: value for key, value in given.items() if value is not None}


def _selection(args: argparse.Namespace) -> dict[str, Any]:
    body: dict[str, Any] = (
        {"sequenceNumbers": args.sequence_numbers} if args.sequence_numbers else {}
    )
    return body | _filter(args) | ({"all": True} if args.all else {})


def _dead_letters(api: Api, args: argparse.Namespace, out: Output) -> int:
    action = args.action or "count"
    if action == "count":
        body = _ok(api, "GET", api.route("deadletters"))

        def counted(b: Any) -> Iterator[str]:
            for e in b["entities"]:
                if e.get("error"):
                    yield f"{e['name']} ({e['kind']}): cannot be read: {e['error']}"
                else:
                    more = "+" if e.get("atLeast") else ""
                    yield f"{e['name']} ({e['kind']}): {e['deadLetters']}{more} dead letter(s)"

        out.result(body, counted)
        return DONE
    entity = urllib.parse.quote(args.entity, safe="")
    if action == "list":
        items = _pages(api, api.route(f"deadletters/{entity}", **_filter(args)), args.page_size)

        def listed(b: Any) -> Iterator[str]:
            yield f"{b['count']} dead letter(s) at {args.entity}"
            for i in b["items"]:
                yield (
                    f"  #{i['sequenceNumber']}  {i.get('eventId')}  {i.get('aggregateType')} "
                    f"{i.get('aggregateId')} v{i.get('version')} {i.get('action')}  "
                    f"{i.get('deadLetterReason')}: {i.get('deadLetterDescription')}  "
                    f"(delivered {i['deliveryCount']}x, resubmitted {i['resubmissions']}x)"
                )

        out.result({"items": items, "count": len(items)}, listed)
        return DONE
    if action == "peek":
        body = _ok(api, "GET", api.route(f"deadletters/{entity}/messages/{args.sequence_number}"))
        out.result(body, lambda b: iter([json.dumps(b, indent=2, ensure_ascii=False)]))
        return DONE
    return _letters_acted(api, args, out, action, entity)


def _letters_acted(
    api: Api, args: argparse.Namespace, out: Output, action: str, entity: str
) -> int:
    """A resubmit or a discard, called again while matching dead letters remain."""
    request = _selection(args)
    if action == "discard":
        request["reason"] = args.reason
    done = failed = 0
    answers: list[Any] = []
    while True:
        answer = _ok(api, "POST", api.route(f"deadletters/{entity}/{action}"), request)
        answers.append(answer)
        done += answer["done"]
        failed += answer["failed"]
        out.progress(
            f"{action}: {done} done, {failed} not, {answer['remaining']} remaining at {args.entity}"
        )
        if not answer["remaining"] or not answer["done"] or request.get("sequenceNumbers"):
            break
    summary = {
        "action": action,
        "entity": args.entity,
        "done": done,
        "failed": failed,
        "remaining": answers[-1]["remaining"],
        "handled": [h for a in answers for h in a["handled"]],
        "subscribersWillSee": [a["subscribersWillSee"] for a in answers],
    }

    def acted(b: Any) -> Iterator[str]:
        verb = "resubmitted" if action == "resubmit" else "discarded"
        yield f"{b['done']} dead letter(s) {verb} at {b['entity']}, {b['failed']} not"
        for h in b["handled"]:
            if h.get("failure"):
                yield f"  #{h['sequenceNumber']} ({h.get('eventId')}): {h['failure']}"
        for text in dict.fromkeys(b["subscribersWillSee"]):
            yield f"subscribers will see: {text}"

    out.result(summary, acted)
    return PARTLY if failed else DONE


def _subscribers(api: Api, args: argparse.Namespace, out: Output) -> int:
    if args.action == "release":
        kind, aggregate = args.aggregate
        body = _ok(
            api,
            "POST",
            api.route(f"subscribers/{urllib.parse.quote(args.subscription, safe='')}/release"),
            {
                "aggregateType": kind,
                "aggregateId": aggregate,
                "version": args.version,
                "reason": args.reason,
            },
        )
        out.result(
            body,
            lambda b: iter(
                [
                    f"{kind} {aggregate} version {args.version} given up at "
                    f"{b['subscription']} (notice {b['notice']['messageId']})",
                    f"subscribers will see: {b['subscribersWillSee']}",
                ]
            ),
        )
        return DONE
    body = _ok(api, "GET", api.route("subscribers"))

    def lines(b: Any) -> Iterator[str]:
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

    out.result(body, lines)
    return DONE


def _redrive(api: Api, args: argparse.Namespace, out: Output) -> int:
    request: dict[str, Any] = {"since": args.since, "pageSize": args.page_size}
    for name, key in (
        ("aggregate_type", "aggregateType"),
        ("aggregate_id", "aggregateId"),
        ("subscription", "subscription"),
    ):
        value = getattr(args, name)
        if value is not None:
            request[key] = value
    while True:
        page = _ok(api, "POST", api.route("redrive"), request)
        out.progress(
            f"redrive {page['redriveId']}: {page['done']} of {page['events']} event(s), "
            f"{page['accepted']} accepted by the topic as new messages, "
            f"{page['quarantined']} quarantined"
        )
        if not page.get("continuationToken"):
            break
        request["continuationToken"] = page["continuationToken"]

    def lines(p: Any) -> Iterator[str]:
        yield (
            f"redrive {p['redriveId']}: {p['events']} event(s), {p['accepted']} accepted by the "
            f"topic as new messages, {p['quarantined']} quarantined"
        )
        yield f"subscribers will see: {p['subscribersWillSee']}"

    out.result(page, lines)
    return PARTLY if page["quarantined"] else DONE


def _groups(api: Api, args: argparse.Namespace, out: Output) -> int:
    if not args.action:
        body = _ok(api, "GET", api.route("groups"))

        def listed(b: Any) -> Iterator[str]:
            yield f"{len(b['groups'])} failure group(s){' (at least)' if b['atLeast'] else ''}"
            for g in b["groups"]:
                where = g["entity"] or "quarantine"
                yield (
                    f"  {g['id']}  {g['count']:>5}  {where}  {g.get('aggregateType') or '-'} "
                    f"{g.get('action') or '-'}  {g['cause']}  (first {g.get('firstSeen')}, "
                    f"last {g.get('lastSeen')})"
                )
            for gap in b.get("unanswered", []):
                yield f"  not grouped: {gap['part']} ({gap['dependency']}: {gap['error']})"

        out.result(body, listed)
        return DONE
    preview = args.action == "preview"
    request = {"action": args.verb if preview else args.action}
    if args.reason:
        request["reason"] = args.reason
    path = api.route(f"groups/{urllib.parse.quote(args.group_id, safe='')}/")
    answers = []
    while True:
        answer = _ok(api, "POST", path + ("preview" if preview else "act"), request)
        answers.append(answer)
        out.progress(f"{request['action']}: {answer['done']} done, {answer['remaining']} left")
        if preview or not answer["remaining"] or not answer["done"]:
            break

    def acted(b: Any) -> Iterator[str]:
        count, verb = (b["matching"], "would touch") if b["previewed"] else (b["done"], "done")
        yield f"group {b['group']['id']} ({b['group']['cause']}): {count} {verb}"
        yield from (f"  failed: {f}" for f in b["failed"])
        yield f"subscribers will see: {b['subscribersWillSee']}"

    failed = [f for a in answers for f in a["failed"]]
    out.result(dict(answers[-1], done=sum(a["done"] for a in answers), failed=failed), acted)
    return PARTLY if failed else DONE


# -- the command line -------------------------------------------------------------------------


def _timeout(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError("must be more than 0 seconds")
    return value


def _filters(command: argparse.ArgumentParser) -> None:
    command.add_argument("--aggregate-type", help="only those of this aggregate type")
    command.add_argument("--aggregate-id", help="only those of this aggregate (with the type)")
    command.add_argument("--action", dest="action_name", help="only those of this event type")
    command.add_argument(
        "--dead-letter-reason", help="only those whose dead-letter reason or description has it"
    )
    command.add_argument("--since", help="only those enqueued at or after (RFC 3339)")
    command.add_argument("--until", help="only those enqueued before (RFC 3339)")


def _flags() -> argparse.ArgumentParser:
    """--json and --quiet, taken after the command too (`cosmos-outbox status --json`)."""
    flags = argparse.ArgumentParser(add_help=False)
    flags.add_argument("--json", action="store_true", default=argparse.SUPPRESS)
    flags.add_argument("--quiet", action="store_true", default=argparse.SUPPRESS)
    return flags


def parser(prog: str = "cosmos-outbox") -> argparse.ArgumentParser:
    flags = _flags()
    top = argparse.ArgumentParser(
        prog=prog,
        description="Operate an app's outbox through its operators' routes. The admin key (the "
        f"host's master key) is read from {KEY_VARIABLE}, or asked for when the app wants it "
        "and the terminal is interactive; never given as an argument.",
    )
    top.add_argument(
        "--api",
        default=os.environ.get(API_VARIABLE, DEFAULT_API),
        help=f"the app's API base URL, with /api ({API_VARIABLE}; default {DEFAULT_API})",
    )
    top.add_argument(
        "--route-prefix",
        default=os.environ.get(PREFIX_VARIABLE, "outbox"),
        help=f"the operators' routes' prefix ({PREFIX_VARIABLE}; default outbox)",
    )
    top.add_argument(
        "--timeout",
        type=_timeout,
        default=os.environ.get(TIMEOUT_VARIABLE, str(DEFAULT_TIMEOUT)),
        help=f"seconds to wait for each answer ({TIMEOUT_VARIABLE}; default 60)",
    )
    top.add_argument("--direct", action="store_true", help=DIRECT_HELP)
    top.add_argument("--settings", metavar="FILE", help=f"{SETTINGS_HELP}; implies --direct")
    top.add_argument("--json", action="store_true", help="print the routes' JSON (for scripts)")
    top.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in (
        _readings,
        _quarantine_commands,
        _dead_letter_commands,
        _subscriber_commands,
        _group_commands,
    ):
        add(commands, flags)
    redrive = commands.add_parser("redrive", parents=[flags], help="send stored events again")
    redrive.add_argument("--since", required=True, help="RFC 3339, e.g. 2026-11-22T08:00:00Z")
    redrive.add_argument("--aggregate-type", help="only events of this aggregate type")
    redrive.add_argument("--aggregate-id", help="only this aggregate's (with the type)")
    redrive.add_argument("--subscription", help="to this subscription only (else to all)")
    redrive.add_argument("--page-size", type=int, default=100, help="events per call")
    return top


#: The top parser's commands, each added by one of the functions below.
Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def _readings(commands: Commands, flags: argparse.ArgumentParser) -> None:
    commands.add_parser(
        "status", parents=[flags], help="the relay's backlog per lease, the quarantine"
    )
    commands.add_parser(
        "health", parents=[flags], help="the outbox's health (the store, the relay)"
    )
    journey = commands.add_parser(
        "journey", parents=[flags], help="where an event (or an aggregate's) went"
    )
    which = journey.add_mutually_exclusive_group(required=True)
    which.add_argument("--event-id", help="the event id")
    which.add_argument("--aggregate", nargs=2, metavar=("TYPE", "ID"), help="an aggregate")

    documents = commands.add_parser(
        "documents", parents=[flags], help="an aggregate's documents, as stored (read only)"
    )
    documents.add_argument("aggregate_id", help="the aggregate id (its partition key)")
    documents.add_argument("--page-size", type=int, default=100)


def _quarantine_commands(commands: Commands, flags: argparse.ArgumentParser) -> None:
    quarantine = commands.add_parser("quarantine", help="list, replay or discard")
    actions = quarantine.add_subparsers(dest="action", required=True)
    listing = actions.add_parser("list", parents=[flags], help="every quarantine record")
    listing.add_argument("--page-size", type=int, default=100)
    replay = actions.add_parser("replay", parents=[flags], help="send the event again")
    replay.add_argument("event_id")
    discard = actions.add_parser(
        "discard", parents=[flags], help="give the event up (subscribers are told)"
    )
    discard.add_argument("event_id")
    discard.add_argument("--reason", required=True, help="why (the audit line, the notice)")


def _dead_letter_commands(commands: Commands, flags: argparse.ArgumentParser) -> None:
    letters = commands.add_parser(
        "deadletters", parents=[flags], help="the subscriptions' dead letters"
    )
    verbs = letters.add_subparsers(dest="action")
    verbs.add_parser(
        "count", parents=[flags], help="how many each watched subscription (and queue) holds"
    )
    listed = verbs.add_parser(
        "list", parents=[flags], help="one subscription's, matching the filters"
    )
    listed.add_argument("entity", help="the subscription (or queue)")
    listed.add_argument("--page-size", type=int, default=100)
    _filters(listed)
    peek = verbs.add_parser("peek", parents=[flags], help="one dead letter, whole")
    peek.add_argument("entity")
    peek.add_argument("sequence_number", type=int)
    for verb, text in (
        ("resubmit", "send them again (through duplicate detection), to that subscription"),
        ("discard", "give them up at that subscription (its subscriber is told)"),
    ):
        acting = verbs.add_parser(verb, parents=[flags], help=text)
        acting.add_argument("entity")
        acting.add_argument(
            "sequence_numbers", nargs="*", type=int, help="the dead letters (or a filter)"
        )
        acting.add_argument("--all", action="store_true", help="every one of them")
        _filters(acting)
        if verb == "discard":
            acting.add_argument("--reason", required=True, help="why (audit line, notices)")


def _subscriber_commands(commands: Commands, flags: argparse.ArgumentParser) -> None:
    subscribers = commands.add_parser(
        "subscribers", parents=[flags], help="what subscribers hold, and why"
    )
    subs = subscribers.add_subparsers(dest="action")
    subs.add_parser("status", parents=[flags], help="per watched subscription (the default)")
    release = subs.add_parser(
        "release", parents=[flags], help="give a version up at one subscription"
    )
    release.add_argument("subscription")
    release.add_argument("aggregate", nargs=2, metavar=("TYPE", "ID"))
    release.add_argument("--version", type=int, required=True)
    release.add_argument("--reason", required=True)


def _group_commands(commands: Commands, flags: argparse.ArgumentParser) -> None:
    groups = commands.add_parser(
        "groups", parents=[flags], help="failures grouped by cause; retry or discard a group"
    )
    verbs = groups.add_subparsers(dest="action")
    preview = verbs.add_parser("preview", parents=[flags], help="what an action would do")
    preview.add_argument("group_id")
    preview.add_argument("verb", choices=("retry", "discard"))
    preview.add_argument("--reason", help="why (a discard needs one)")
    for verb, text in (
        ("retry", "replay its quarantined events, or resubmit its dead letters"),
        ("discard", "give its events up (subscribers are told)"),
    ):
        acting = verbs.add_parser(verb, parents=[flags], help=text)
        acting.add_argument("group_id")
        acting.add_argument("--reason", required=verb == "discard", help="why (audit line)")


_RUN: dict[str, Callable[[Api, argparse.Namespace, Output], int]] = {
    "status": _status,
    "health": _health,
    "journey": _journey,
    "documents": _documents,
    "quarantine": _quarantine,
    "deadletters": _dead_letters,
    "subscribers": _subscribers,
    "redrive": _redrive,
    "groups": _groups,
}


def main(argv: list[str] | None = None, *, prog: str = "cosmos-outbox") -> int:
    args = parser(prog).parse_args(argv)
    if (
        args.command == "deadletters"
        and args.action in ("resubmit", "discard")
        and not args.sequence_numbers
        and not args.all
        and not _filter(args)
    ):
        print(
            f"{prog}: error: name the dead letters: sequence numbers, a filter, or --all",
            file=sys.stderr,
        )
        return USAGE
    out = Output(as_json=args.json, quiet=args.quiet, out=sys.stdout, err=sys.stderr)
    try:
        api: Api = (
            DirectApi(settings_file=args.settings, prefix=args.route_prefix, timeout=args.timeout)
            if args.direct or args.settings
            else OperatorsApi(
                args.api,
                os.environ.get(KEY_VARIABLE),
                args.timeout,
                prefix=args.route_prefix,
                ask_key=True,
            )
        )
        return _RUN[args.command](api, args, out)
    except (OperatorsApiError, SettingsError) as error:
        print(f"error: {error}", file=sys.stderr)
        return FAILED
    except AppProblemError as problem:
        if args.json:
            print(json.dumps(problem.problem, separators=(",", ":")), file=sys.stderr)
        else:
            print(f"error: {problem.line()}", file=sys.stderr)
        return FAILED
    except KeyboardInterrupt:
        return 130
