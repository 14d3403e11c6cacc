"""``python -m tools.admin``: the operators' commands, through the admin HTTP API of a running
app — the local stack of ``make run`` (http://127.0.0.1:7071/api, no key) or the app in Azure:

    export OUTBOX_API=https://<app>.azurewebsites.net/api OUTBOX_ADMIN_KEY=<master key>
    python -m tools.admin status
    python -m tools.admin quarantine list [--page-size N]
    python -m tools.admin quarantine replay <eventId>
    python -m tools.admin quarantine discard <eventId> --reason "why"
    python -m tools.admin redrive --since 2026-11-22T08:00:00Z \
        [--aggregate-type <type> [--aggregate-id <id>] | --contact-id <id>]

``--api`` / ``--key`` / ``--timeout`` override ``OUTBOX_API`` / ``OUTBOX_ADMIN_KEY`` /
``OUTBOX_ADMIN_TIMEOUT`` (seconds, default 60). The key goes in the ``x-functions-key`` header
and is never printed.

Prints the API's JSON answer (exit 0). A problem document from the app goes to stderr (exit 1).
When the app cannot be reached or its answer is not the app's (connection refused, unknown
host, timeout, TLS failure, a gateway's HTML page, anything that is not JSON, 401/403): one
line on stderr saying what happened, exit 1, never a traceback.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import ssl
import sys
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

DEFAULT_API = "http://127.0.0.1:7071/api"
DEFAULT_TIMEOUT = 60.0


class AdminError(Exception):
    """The app could not be reached, or what answered was not the app's API: one line."""


def _why(reason: object) -> str:
    """A short cause for a failed connection."""
    if isinstance(reason, ssl.SSLCertVerificationError):
        return f"TLS certificate not accepted ({reason.verify_message})"
    if isinstance(reason, ssl.SSLError):
        return f"TLS failed ({reason.reason or reason})"
    if isinstance(reason, socket.gaierror):
        return "the host name does not resolve"
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused (is the app running? is the URL right?)"
    if isinstance(reason, OSError):
        return reason.strerror or type(reason).__name__
    return str(reason)


class Api:
    def __init__(self, base: str, key: str | None, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.base = base.rstrip("/")
        self.key = key
        self.timeout = timeout
        scheme = urllib.parse.urlsplit(self.base).scheme
        if scheme not in {"http", "https"}:
            raise AdminError(
                f"--api must be an http(s) URL such as {DEFAULT_API}, not {self.base!r}"
            )

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        url = f"{self.base}{path}"
        where = f"{method} {url.split('?')[0]}"
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, method=method)  # noqa: S310
        request.add_header("accept", "application/json")
        if data is not None:
            request.add_header("content-type", "application/json")
        if self.key:
            request.add_header("x-functions-key", self.key)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310
                status, ctype, raw = (
                    response.status,
                    response.headers.get_content_type(),
                    response.read(),
                )
        except urllib.error.HTTPError as error:
            status, ctype = error.code, error.headers.get_content_type()
            try:
                raw = error.read()
            except (OSError, http.client.HTTPException):
                raw = b""
        except urllib.error.URLError as error:
            if isinstance(error.reason, TimeoutError):
                raise AdminError(f"{where}: no answer within {self.timeout:g} s") from None
            raise AdminError(f"{where}: {_why(error.reason)}") from None
        except TimeoutError:
            raise AdminError(f"{where}: no answer within {self.timeout:g} s") from None
        except (OSError, http.client.HTTPException) as error:
            raise AdminError(f"{where}: the connection failed ({_why(error)})") from None
        if status in {401, 403}:
            hint = (
                "send the host's master key (--key or OUTBOX_ADMIN_KEY)"
                if not self.key
                else "the key was refused: the operators' routes need the host's master key"
            )
            raise AdminError(f"{where}: {status} {http.client.responses.get(status, '')}; {hint}")
        if not raw:
            return status, None
        try:
            return status, json.loads(raw)
        except ValueError:
            kind = "an HTML page" if ctype == "text/html" else f"not JSON ({ctype})"
            raise AdminError(
                f"{where}: {status} {http.client.responses.get(status, '')}, and the answer is "
                f"{kind}: not the app's API (a gateway or proxy? is the URL right, with /api?)"
            ) from None


def _quarantine_list(api: Api, page_size: int) -> tuple[int, Any]:
    """Every page, followed to the end."""
    items: list[Any] = []
    token: str | None = None
    while True:
        query = {"pageSize": str(page_size)} | ({"continuationToken": token} if token else {})
        status, page = api.call("GET", f"/outbox/quarantine?{urllib.parse.urlencode(query)}")
        if status != 200:
            return status, page
        if not isinstance(page, dict) or not isinstance(page.get("items"), list):
            raise AdminError("GET /outbox/quarantine: the answer is not a page of items")
        items += page["items"]
        token = page.get("continuationToken")
        if not token:
            return status, {"items": items, "count": len(items)}


def _timeout(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError("must be more than 0 seconds")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tools.admin", description="Operate the outbox through its admin API."
    )
    parser.add_argument(
        "--api",
        default=os.environ.get("OUTBOX_API", DEFAULT_API),
        help=f"the app's API base URL (OUTBOX_API; default {DEFAULT_API})",
    )
    parser.add_argument(
        "--key",
        default=os.environ.get("OUTBOX_ADMIN_KEY"),
        help="the host's master key (OUTBOX_ADMIN_KEY; Azure); not needed locally",
    )
    parser.add_argument(
        "--timeout",
        type=_timeout,
        default=os.environ.get("OUTBOX_ADMIN_TIMEOUT", str(DEFAULT_TIMEOUT)),
        help="seconds to wait for each answer (OUTBOX_ADMIN_TIMEOUT; default 60)",
    )
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
    redrive.add_argument("--aggregate-type", help="only events of this aggregate type")
    redrive.add_argument("--aggregate-id", help="only events of this aggregate (needs the type)")
    redrive.add_argument("--contact-id", help="only this contact's events")
    return parser


def _run(args: argparse.Namespace) -> tuple[int, Any]:
    api = Api(args.api, args.key, args.timeout)
    if args.command == "status":
        return api.call("GET", "/outbox/status")
    if args.command == "redrive":
        scope = {
            "aggregateType": args.aggregate_type,
            "aggregateId": args.aggregate_id,
            "contactId": args.contact_id,
        }
        payload = {"since": args.since} | {k: v for k, v in scope.items() if v}
        return api.call("POST", "/outbox/redrive", payload)
    if args.action == "list":
        return _quarantine_list(api, args.page_size)
    event = urllib.parse.quote(args.event_id, safe="")
    if args.action == "replay":
        return api.call("POST", f"/outbox/quarantine/{event}/replay")
    reason = urllib.parse.urlencode({"reason": args.reason})
    status, body = api.call("DELETE", f"/outbox/quarantine/{event}?{reason}")
    return status, body if body is not None else {"discarded": args.event_id, "reason": args.reason}


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        status, body = _run(args)
    except AdminError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    text = json.dumps(body, indent=2, ensure_ascii=False)
    if status >= 400:
        print(text, file=sys.stderr)
        return 1
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
