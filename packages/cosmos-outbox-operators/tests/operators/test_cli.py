"""The operators' command line (`cosmos-outbox`, `cosmos_outbox.cli`) against the operators'
routes of an app (recovery_world.py's, on the test kit's fakes) served over HTTP in-process, the
admin key checked as the host checks it: every command, its text and `--json` output, its
progress lines and exit codes, and its one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from recovery_world import SUBSCRIPTION, RecoveryWorld

from cosmos_outbox.cli import main

KEY = "the-master-key"


class Bridge(BaseHTTPRequestHandler):
    """An HTTP front for the app's functions (FunctionClient), checking the admin key."""

    def _serve(self) -> None:
        server = self.server
        assert isinstance(server, BridgeServer)
        server.seen.append((self.command, self.path, dict(self.headers)))
        url = urllib.parse.urlsplit(self.path)
        path = url.path.removeprefix("/api/")
        params = dict(urllib.parse.parse_qsl(url.query))
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else None
        if self.headers.get("x-functions-key") != KEY and not path.endswith("/health"):
            self.send_response(401)
            self.send_header("content-length", "0")
            self.end_headers()
            return
        reply = server.world.client.request(
            self.command,
            path,
            raw=raw,
            params=params,
            # what the host hands the worker: the key it checked too (the audit names its holder)
            headers={
                k: v
                for k, v in self.headers.items()
                if k.lower() in ("content-type", "x-functions-key")
            },
        )
        payload = reply.get_body()
        self.send_response(reply.status_code)
        self.send_header("content-type", reply.mimetype or "application/json")
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def do_DELETE(self) -> None:
        self._serve()

    def log_message(self, format: str, *args: object) -> None:
        return


class BridgeServer(ThreadingHTTPServer):
    world: RecoveryWorld
    seen: list[tuple[str, str, dict[str, str]]]


@pytest.fixture
def served() -> Iterator[tuple[RecoveryWorld, str]]:
    world = RecoveryWorld()
    server = BridgeServer(("127.0.0.1", 0), Bridge)
    server.world, server.seen = world, []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield world, f"http://127.0.0.1:{server.server_address[1]}/api"
    finally:
        server.shutdown()
        server.server_close()
        world.close()


def run(
    api: str, *args: str, monkeypatch: pytest.MonkeyPatch, capsys: Any, key: str | None = KEY
) -> tuple[int, str, str]:
    if key is None:
        monkeypatch.delenv("COSMOS_OUTBOX_KEY", raising=False)
    else:
        monkeypatch.setenv("COSMOS_OUTBOX_KEY", key)
    code = main(["--api", api, *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_status_and_health_and_the_key_from_the_environment_only(
    served: tuple[RecoveryWorld, str], monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    world, api = served
    world.memory.target_rules.lacking("legacy")  # a subscription without the rule: named
    code, out, err = run(api, "status", monkeypatch=monkeypatch, capsys=capsys)
    assert code == 0 and out.startswith("pending 0 event(s); quarantined 0"), err
    assert "1 subscription(s) of topic" in out and "legacy (rule $Default: TrueFilter)" in out
    code, out, _ = run(api, "health", "--json", monkeypatch=monkeypatch, capsys=capsys)
    assert code == 0 and json.loads(out) == {"status": "healthy"}
    code, out, err = run(api, "status", monkeypatch=monkeypatch, capsys=capsys, key=None)
    assert code == 1 and out == ""
    assert err.splitlines() == [err.strip()] and "401" in err and "COSMOS_OUTBOX_KEY" in err
    with pytest.raises(SystemExit) as usage:
        main(["--api", api, "--key", KEY, "status"])  # never an argument
    assert usage.value.code == 2
    capsys.readouterr()


def test_a_quarantined_event_discarded_from_the_command_line_says_what_subscribers_see(
    served: tuple[RecoveryWorld, str], monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    world, api = served
    ids = world.publish("w1", "StockAdded", "StockAdded", "StockAdded")
    world.poison(ids[1])
    world.relay()
    world.deliver_new()
    code, out, _ = run(api, "quarantine", "list", monkeypatch=monkeypatch, capsys=capsys)
    assert code == 0 and ids[1] in out and "1 quarantine record(s)" in out
    code, out, _ = run(
        api,
        "quarantine",
        "discard",
        ids[1],
        "--reason",
        "entered by hand",
        monkeypatch=monkeypatch,
        capsys=capsys,
    )
    assert code == 0
    assert f"event {ids[1]} (warehouse w1 v2) discarded by admin key" in out
    assert "subscribers will see: OutboxEventDiscarded" in out
    [result] = world.deliver_new()
    assert result is not None and result.applied == [2, 3]
    code, out, err = run(
        api, "--json", "quarantine", "replay", ids[1], monkeypatch=monkeypatch, capsys=capsys
    )
    assert code == 1 and out == "" and json.loads(err)["status"] == 409
    code, _, err = run(
        api, "quarantine", "replay", "no-such-event", monkeypatch=monkeypatch, capsys=capsys
    )
    assert code == 1 and err.startswith("error: 404 Not Found") and len(err.splitlines()) == 1


def test_dead_letters_from_the_command_line_counted_listed_resubmitted(
    served: tuple[RecoveryWorld, str], monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    world, api = served
    ids = world.publish("w1", "StockAdded", "StockAdded", "StockAdded")
    world.relay()
    world.deliver_new(skip={ids[1]})
    code, out, _ = run(api, "deadletters", monkeypatch=monkeypatch, capsys=capsys)
    assert code == 0 and f"{SUBSCRIPTION} (subscription): 1 dead letter(s)" in out
    code, out, _ = run(
        api,
        "deadletters",
        "list",
        SUBSCRIPTION,
        "--aggregate-id",
        "w1",
        monkeypatch=monkeypatch,
        capsys=capsys,
    )
    assert code == 0 and ids[1] in out and "MaxDeliveryCountExceeded" in out
    code, out, _ = run(
        api,
        "--json",
        "deadletters",
        "peek",
        SUBSCRIPTION,
        "1",
        monkeypatch=monkeypatch,
        capsys=capsys,
    )
    assert json.loads(out)["eventId"] == ids[1]
    code, _, err = run(
        api, "deadletters", "resubmit", SUBSCRIPTION, monkeypatch=monkeypatch, capsys=capsys
    )
    assert code == 2 and "name the dead letters" in err
    code, out, err = run(
        api,
        "deadletters",
        "resubmit",
        SUBSCRIPTION,
        "--all",
        monkeypatch=monkeypatch,
        capsys=capsys,
    )
    assert code == 0, err
    assert "resubmit: 1 done, 0 not, 0 remaining" in err  # progress on stderr
    assert "1 dead letter(s) resubmitted at projections" in out
    [(_, resubmitted)] = world.memory.dead_letters.sent
    result = world.deliver(resubmitted)
    assert result is not None and result.applied == [2, 3]


def test_a_refused_resubmission_exits_3_and_says_which(
    served: tuple[RecoveryWorld, str], monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    world, api = served
    ids = world.publish("w1", "StockAdded", "StockAdded")
    world.relay()
    world.deliver_new(skip={ids[1]})
    world.memory.dead_letters.fail_sends = True
    code, out, _ = run(
        api, "deadletters", "resubmit", SUBSCRIPTION, "1", monkeypatch=monkeypatch, capsys=capsys
    )
    assert code == 3 and "#1" in out and "it stays" in out


def test_a_long_redrive_shows_its_progress_and_its_numbers(
    served: tuple[RecoveryWorld, str], monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    world, api = served
    for n in range(5):
        world.publish(f"w{n}", "StockAdded")
    code, out, err = run(
        api,
        "redrive",
        "--since",
        "2000-01-01T00:00:00Z",
        "--page-size",
        "2",
        monkeypatch=monkeypatch,
        capsys=capsys,
    )
    assert code == 0, err
    progress = err.splitlines()
    assert len(progress) == 3 and "5 of 5 event(s)" in progress[-1]
    assert "2 of 5 event(s), 2 accepted by the topic as new messages" in progress[0]
    assert "5 event(s), 5 accepted by the topic as new messages, 0 quarantined" in out
    assert len(world.sent) == 5


def test_journey_and_subscribers_from_the_command_line(
    served: tuple[RecoveryWorld, str], monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    world, api = served
    ids = world.publish("w1", "StockAdded", "StockAdded", "StockAdded")
    world.relay()
    world.deliver_new(skip={ids[1]})
    code, out, _ = run(api, "journey", "--event-id", ids[1], monkeypatch=monkeypatch, capsys=capsys)
    assert code == 0 and "dead-lettered at projections" in out
    code, out, _ = run(
        api, "journey", "--aggregate", "warehouse", "w1", monkeypatch=monkeypatch, capsys=capsys
    )
    assert code == 0 and out.splitlines()[0].startswith("warehouse w1: 3 event(s) known")
    code, out, _ = run(api, "subscribers", monkeypatch=monkeypatch, capsys=capsys)
    assert code == 0 and "holds [3]" in out and "version 2 has not arrived" in out
    code, out, _ = run(
        api,
        "subscribers",
        "release",
        SUBSCRIPTION,
        "warehouse",
        "w1",
        "--version",
        "2",
        "--reason",
        "lost",
        monkeypatch=monkeypatch,
        capsys=capsys,
    )
    assert code == 0 and "version 2 given up at projections" in out


def test_an_aggregates_documents_from_the_command_line_every_page(
    served: tuple[RecoveryWorld, str], monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    world, api = served
    ids = world.publish("w1", "StockAdded", "StockAdded", "StockAdded")
    code, out, err = run(
        api, "documents", "w1", "--page-size", "2", monkeypatch=monkeypatch, capsys=capsys
    )
    stored = world.memory.store.query("SELECT * FROM c", partition_key="w1")
    assert len(stored) > 2  # more than a page
    assert code == 0 and out.splitlines()[0] == f"{len(stored)} document(s) in partition w1", err
    assert f"  {ids[2]}  domainEvent v3" in out.splitlines()
    code, out, _ = run(api, "documents", "w1", "--json", monkeypatch=monkeypatch, capsys=capsys)
    assert code == 0 and {d["id"] for d in json.loads(out)["items"]} >= set(ids)


def test_nothing_listening_is_one_line_and_exit_1() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "cosmos_outbox", "--api", "http://127.0.0.1:9/api", "status"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("error: GET http://127.0.0.1:9/api/outbox/status: ")
    assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr


def test_failure_groups_are_listed_and_retried_by_group(
    served: tuple[RecoveryWorld, str], monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    world, api = served
    ids = world.publish("w1", "StockAdded", "StockAdded")
    world.relay()
    world.deliver_new(skip=set(ids))
    code, out, err = run(api, "groups", "--json", monkeypatch=monkeypatch, capsys=capsys)
    [group] = json.loads(out)["groups"]
    assert code == 0 and group["count"] == 2 and group["entity"] == SUBSCRIPTION
    code, out, err = run(api, "groups", monkeypatch=monkeypatch, capsys=capsys)
    assert out.splitlines()[0] == "1 failure group(s)" and group["id"] in out
    code, out, err = run(
        api, "groups", "preview", group["id"], "retry", monkeypatch=monkeypatch, capsys=capsys
    )
    assert code == 0 and f"group {group['id']}" in out and "2 would touch" in out, err
    code, out, err = run(
        api, "groups", "retry", group["id"], monkeypatch=monkeypatch, capsys=capsys
    )
    assert code == 0 and "2 done" in out, err
    with pytest.raises(SystemExit) as refused:  # a discard names its reason
        run(api, "groups", "discard", group["id"], monkeypatch=monkeypatch, capsys=capsys)
    assert refused.value.code == 2 and "--reason" in capsys.readouterr().err
