"""``python -m tools.admin``: the operators' commands, through the admin HTTP API of a
running app (``make run``: http://127.0.0.1:7071/api; ``--api`` for another, ``--key`` or
OUTBOX_ADMIN_KEY for the host's master key in Azure).

    python -m tools.admin status
    python -m tools.admin quarantine list [--page-size N]
    python -m tools.admin quarantine replay <eventId>
    python -m tools.admin quarantine discard <eventId> --reason "why"
    python -m tools.admin redrive --since 2026-11-22T08:00:00Z [--contact-id <id>]

Prints the API's JSON answer; a problem document goes to stderr with exit status 1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

DEFAULT_API = "http://127.0.0.1:7071/api"


class Api:
    def __init__(self, base: str, key: str | None) -> None:
        self.base = base.rstrip("/")
        self.key = key

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.base}{path}", data=data, method=method)  # noqa: S310
        if data is not None:
            request.add_header("content-type", "application/json")
        if self.key:
            request.add_header("x-functions-key", self.key)
        try:
            with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310
                raw = response.read()
                return response.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as error:
            raw = error.read()
            try:
                return error.code, json.loads(raw)
            except ValueError:
                return error.code, {"status": error.code, "detail": raw.decode(errors="replace")}


def _quarantine_list(api: Api, page_size: int) -> tuple[int, Any]:
    """Every page, followed to the end."""
    items: list[Any] = []
    token: str | None = None
    while True:
        query = {"pageSize": str(page_size)} | ({"continuationToken": token} if token else {})
        status, page = api.call("GET", f"/outbox/quarantine?{urllib.parse.urlencode(query)}")
        if status != 200:
            return status, page
        items += page["items"]
        token = page.get("continuationToken")
        if not token:
            return status, {"items": items, "count": len(items)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.admin",
                                     description="Operate the outbox through its admin API.")
    parser.add_argument("--api", default=os.environ.get("OUTBOX_API", DEFAULT_API))
    parser.add_argument("--key", default=os.environ.get("OUTBOX_ADMIN_KEY"),
                        help="the host's master key (Azure); not needed locally")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("status", help="backlog per lease and quarantined events")
    quarantine = commands.add_parser("quarantine", help="list, replay or discard")
    actions = quarantine.add_subparsers(dest="action", required=True)
    listing = actions.add_parser("list")
    listing.add_argument("--page-size", type=int, default=100)
    replay = actions.add_parser("replay")
    replay.add_argument("event_id")
    discard = actions.add_parser("discard")
    discard.add_argument("event_id")
    discard.add_argument("--reason", required=True)
    redrive = commands.add_parser("redrive", help="publish stored events again")
    redrive.add_argument("--since", required=True, help="RFC 3339, e.g. 2026-11-22T08:00:00Z")
    redrive.add_argument("--contact-id")
    args = parser.parse_args(argv)

    api = Api(args.api, args.key)
    if args.command == "status":
        status, body = api.call("GET", "/outbox/status")
    elif args.command == "redrive":
        payload = {"since": args.since} | ({"contactId": args.contact_id}
                                           if args.contact_id else {})
        status, body = api.call("POST", "/outbox/redrive", payload)
    elif args.action == "list":
        status, body = _quarantine_list(api, args.page_size)
    else:
        event = urllib.parse.quote(args.event_id, safe="")
        if args.action == "replay":
            status, body = api.call("POST", f"/outbox/quarantine/{event}/replay")
        else:
            reason = urllib.parse.urlencode({"reason": args.reason})
            status, body = api.call("DELETE", f"/outbox/quarantine/{event}?{reason}")
            body = body if body is not None else {"discarded": args.event_id,
                                                  "reason": args.reason}
    text = json.dumps(body, indent=2, ensure_ascii=False)
    if status >= 400:
        print(text, file=sys.stderr)
        return 1
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
