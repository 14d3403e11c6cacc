"""The docs' lines that name `make run`'s stack, run on one (tools/doclines.py, context "stack"):
as written, from a shell that exported nothing, but for what a reader puts in -- the stack's
ports where a line says 7071 and 7072, its settings file where it says local.settings.json, and
each `<placeholder>`: a value the stack holds (a contact made for the line's block, its current
ETag, the next page's token, an event of it, an operation), or a stand-in where it holds none
(a dead letter's number, a failure group's id), named in `Ran.stand_ins`."""

from __future__ import annotations

import datetime as dt
import json
import re
import shlex
import urllib.error
import urllib.request
from typing import Any

from funcstack.deadlines import LONG, LOOPBACK, SHORT, wait_for
from tools.docblocks import ShellLine, broken_promise
from tools.doclines import PLACEHOLDER, Ran, block_assignments, fresh_shell, run_line
from tools.stack import Stack

#: The body of the contacts the lines' blocks are given.
ADA = {"firstName": "Ada", "lastName": "Lovelace", "email": "ada@example.com", "companyName": "E"}
#: Placeholders the stack holds nothing for: the stand-in each gets (the operation's answer is
#: then its 404).
STAND_INS = {
    "sequenceNumber": "1",
    "groupId": "0" * 12,  # the form of one (12 hexadecimal digits)
    "operationId": "00000000-0000-4000-8000-000000000000",  # a UUID
}
#: Lines whose placeholder names what the stack holds none of, though it holds the kind: an
#: event the relay quarantined (the stack's events were relayed).
QUARANTINED = re.compile(r"\bquarantine (replay|discard)\b")
#: An operator command's answer to a stand-in: one line, the operation's problem.
NOT_FOUND = re.compile(r"^error: 40[49] ")


class DocsStack:
    """The stack, and what its lines' placeholders are filled with."""

    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.api = stack.api_url.rstrip("/")
        self._contacts: dict[tuple[str, int], str] = {}

    # -- the stack's values -------------------------------------------------------------------

    def _request(self, method: str, path: str, body: Any = None) -> tuple[int, Any, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(  # noqa: S310 - the stack's http://127.0.0.1
            f"{self.api}/{path}",
            data=data,
            method=method,
            headers={"content-type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=SHORT) as reply:  # noqa: S310
                raw = reply.read()
                return reply.status, reply.headers, json.loads(raw) if raw else None
        except urllib.error.HTTPError as refused:
            return refused.code, refused.headers, None

    def contact(self, line: ShellLine) -> str:
        """The contact of the line's block (made on first use, with two more beside it, so that
        a list of 2 has a next page)."""
        key = (line.doc, line.block)
        if key not in self._contacts:
            made = [self._request("POST", "contacts", ADA) for _ in range(3)]
            assert all(status == 201 for status, _, _ in made), made
            self._contacts[key] = str(made[0][2]["id"])
        return self._contacts[key]

    def etag(self, contact: str) -> str:
        status, headers, _ = self._request("GET", f"contacts/{contact}")
        assert status == 200, status
        return str(headers["ETag"]).removeprefix("W/").strip('"')

    def token(self) -> str:
        _, headers, _ = self._request("GET", "contacts?pageSize=2")
        token = headers.get("x-continuation-token")
        assert token, "the contact list has no second page"
        return str(token)

    def event(self, contact: str) -> str:
        def events() -> list[Any] | None:
            status, _, body = self._request("GET", f"outbox/journey/aggregates/contact/{contact}")
            return body["events"] if status == 200 and body and body.get("events") else None

        return str(
            wait_for(events, f"contact {contact}'s events in its journey", SHORT)[0]["eventId"]
        )

    def operation(self) -> str | None:
        status, _, body = self._request("GET", "outbox/operations")
        items = body.get("items") if status == 200 and body else None
        return str(items[0]["id"]) if items else None

    def projected(self, contact: str) -> None:
        """Wait until the subscriber's projection of `contact` is there."""
        url = f"http://127.0.0.1:{self.stack.ports.subscriber}/api/projections/contacts/{contact}"

        def there() -> bool:
            try:
                with urllib.request.urlopen(url, timeout=LOOPBACK) as reply:
                    return bool(reply.status == 200)
            except OSError:
                return False

        wait_for(there, f"the subscriber's projection of contact {contact}", LONG)

    # -- a line --------------------------------------------------------------------------------

    def filled(self, line: ShellLine, text: str) -> tuple[str, tuple[str, ...]]:
        """`text` with the stack's ports, settings file and placeholders; the stand-ins used."""
        assert self.stack.settings_file is not None
        text = text.replace("127.0.0.1:7071", f"127.0.0.1:{self.stack.ports.runner}")
        text = text.replace("127.0.0.1:7072", f"127.0.0.1:{self.stack.ports.subscriber}")
        text = re.sub(r"(?<![\w/.-])local\.settings\.json\b", str(self.stack.settings_file), text)
        stand_ins: list[str] = []

        def value(match: re.Match[str]) -> str:
            name = match["name"]
            if name in ("id", "contactId"):
                contact = self.contact(line)
                if "projections" in text:
                    self.projected(contact)
                return contact
            if name == "etag":
                return self.etag(self.contact(line))
            if name == "token":
                return self.token()
            if name == "eventId":
                if QUARANTINED.search(text):
                    stand_ins.append("eventId (of a quarantined event: none is)")
                return self.event(self.contact(line))
            if name == "subscription":
                return "contact-projection"
            if name == "time before the loss":
                hour_ago = dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)
                return hour_ago.strftime("%Y-%m-%dT%H:%M:%SZ")
            if name == "operationId" and (operation := self.operation()) is not None:
                return operation
            stand_ins.append(name)
            return STAND_INS.get(name, "none")

        return PLACEHOLDER.sub(value, text), tuple(stand_ins)

    def run(self, line: ShellLine) -> Ran:
        before = [self.filled(line, s.text)[0] for s in block_assignments(line)]
        text, stand_ins = self.filled(line, line.text)
        assigned = re.match(r"^([A-Z_][A-Z0-9_]*)=", text)
        script = f'{text}\nprintf "%s" "${assigned[1]}"' if assigned else text
        done = run_line(script, fresh_shell(), before=before, timeout=LONG)
        return Ran(text, done.returncode, done.stdout, done.stderr, stand_ins)


#: azure-cosmos's own warning when its start-up health check of the account's endpoint is slow
#: (a busy machine): logged by the SDK, not said by the command.
SDK_HEALTH_CHECK = re.compile(
    r"^Marking https?://\S+ unavailable for (Read|Write)\. Source: _endpoints_health_check$"
)


def verdict(ran: Ran) -> str | None:
    """What the run showed, when it is what the line promises (None: it is not): exit 0; an
    operator command's 3 (done in part); or, for a line run with a stand-in, the operation's
    own 404 or 409, one line, exit 1. Never a usage error, a settings error or a traceback."""
    if ran.code == 0:
        broken = broken_promise(ran.text, ran.out, ran.err)
        if broken is not None:
            return None
        if re.match(r"^[A-Z_][A-Z0-9_]*=", ran.text) and not ran.out:
            return None  # an assignment that assigned nothing
        return "exit 0"
    said = [line for line in ran.err.strip().splitlines() if not SDK_HEALTH_CHECK.match(line)]
    operator = "cosmos-outbox" in shlex.split(ran.text, comments=True)[0]
    if ran.code == 3 and operator and "Traceback" not in ran.err:
        return "exit 3 (done in part)"
    if ran.code == 1 and operator and ran.stand_ins and len(said) == 1 and NOT_FOUND.match(said[0]):
        return f"exit 1, for the stand-in {', '.join(ran.stand_ins)}: {said[0][:80]}"
    return None
