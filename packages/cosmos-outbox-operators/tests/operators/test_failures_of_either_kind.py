"""The one set of routes for a failure of either kind (OUTBOX_FAILURE_INGEST on), in-process on
recovery_world.py's app: dead letters drained into failure records beside events the relay
quarantined (records of the pseudo-entity `quarantine`), listed together by `GET failures` (by
kind, state and group, a page at a time), and each retried, archived or unarchived by its
record's id through the use case of its kind; an action a bulk operation holds, or one through
the console's door without the operator role, is refused; the same through the command line
and the MCP server's tools."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from conftest import body, problem
from mcp import Client
from recovery_world import SUBSCRIPTION, RecoveryWorld

from cosmos_outbox.documents import FAILED_MESSAGE_TYPE, failure_record
from cosmos_outbox.operations import Actor
from cosmos_outbox_operators.cli import main
from cosmos_outbox_operators.mcp import Caller, mcp_server
from operators.test_console_recovery import CONSOLE, PAGE, elements, page
from operators.test_console_recovery import act as pressed
from operators.test_dead_letters_as_records import drained
from operators.test_installed_commands import installed
from operators.test_mcp import AZURE, OPERATOR, agent, call, http_session, refused, run

REASON = "written by a bug"


@pytest.fixture
def world() -> Iterator[RecoveryWorld]:
    for running in RecoveryWorld.running():
        running.memory.services = dataclasses.replace(running.memory.services, failure_ingest=True)
        yield running


def mixed(world: RecoveryWorld) -> dict[str, list[str]]:
    """Two events quarantined (too large to send) and four dead-lettered at `projections`,
    then drained: each kind's failure ids, by kind."""
    world.outbox.wiring()  # made with the records kept
    for n in range(2):
        [event] = world.publish(f"q{n}", "StockAdded")
        world.poison(event)
    world.relay()
    ids: list[str] = []
    for n in range(2):
        ids += world.publish(f"w{n}", "StockAdded", "StockAdded")
    world.relay()
    world.deliver_new(skip=set(ids))
    assert drained(world) == 4
    kinds: dict[str, list[str]] = {"deadLetter": [], "quarantine": []}
    for record in records(world).values():
        kinds["quarantine" if record.entity_kind == "quarantine" else "deadLetter"].append(
            record.id
        )
    assert {k: len(v) for k, v in kinds.items()} == {"deadLetter": 4, "quarantine": 2}
    return {k: sorted(v) for k, v in kinds.items()}


def records(world: RecoveryWorld) -> dict[str, Any]:
    """The failure records as stored, by id."""
    return {
        d["id"]: failure_record(d)
        for d in world.memory.store.query("SELECT * FROM c")
        if d.get("type") == FAILED_MESSAGE_TYPE
    }


def listed(world: RecoveryWorld, **query: Any) -> list[dict[str, Any]]:
    """Every failure `GET failures` gives for `query`, page after page."""
    found: list[dict[str, Any]] = []
    token: str | None = None
    while True:
        params = {k: str(v) for k, v in query.items()}
        headers = {"X-Continuation-Token": token} if token else {}
        reply = world.call("GET", "outbox/failures", params=params, headers=headers)
        found += body(reply)["items"]
        token = reply.headers.get("X-Continuation-Token")
        if not token:
            return found


def ids(items: list[dict[str, Any]]) -> list[str]:
    return sorted(i["id"] for i in items)


def act(world: RecoveryWorld, failure_id: str, action: str, **params: str) -> Any:
    return world.call("POST", f"outbox/failures/{failure_id}/{action}", params=params)


def test_get_failures_lists_both_kinds_exactly_by_kind_status_and_group(
    world: RecoveryWorld,
) -> None:
    kinds = mixed(world)
    every = listed(world, pageSize=4)  # two pages: a token between them
    assert ids(every) == sorted(kinds["deadLetter"] + kinds["quarantine"])
    assert {i["kind"] for i in every} == {"deadLetter", "quarantine"}
    assert {i["entity"] for i in every if i["kind"] == "deadLetter"} == {SUBSCRIPTION}
    assert ids(listed(world, kind="quarantine")) == kinds["quarantine"]
    assert ids(listed(world, kind="deadLetter", pageSize=3)) == kinds["deadLetter"]
    assert ids(listed(world, status="open")) == ids(every)
    assert listed(world, status="archived") == listed(world, status="resolved") == []

    # one of each kind given up, one dead letter retried
    quarantined, letters = kinds["quarantine"], kinds["deadLetter"]
    assert act(world, quarantined[0], "archive", reason=REASON).status_code == 200
    assert act(world, letters[0], "archive", reason=REASON).status_code == 200
    assert act(world, letters[1], "retry").status_code == 200
    assert ids(listed(world, status="archived")) == sorted([quarantined[0], letters[0]])
    assert ids(listed(world, status="resolved")) == [letters[1]]
    assert ids(listed(world, status="open", kind="deadLetter")) == letters[2:]
    assert ids(listed(world, status="archived", kind="quarantine")) == [quarantined[0]]

    # by group: the quarantine's group holds both of its records, open or archived
    group = {i["group"] for i in every if i["kind"] == "quarantine"}
    [quarantine_group] = group
    assert ids(listed(world, group=quarantine_group)) == quarantined
    assert ids(listed(world, group=quarantine_group, status="open")) == quarantined[1:]
    assert listed(world, group="0" * 12) == []
    problem(world.call("GET", "outbox/failures", params={"kind": "letters"}), 400)
    problem(world.call("GET", "outbox/failures", params={"status": "gone"}), 400)
    problem(world.call("GET", "outbox/failures", params={"continuationToken": "x"}), 400)


def test_a_dead_letter_is_retried_archived_and_unarchived_by_its_failure_id(
    world: RecoveryWorld, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="cosmos_outbox.operators")
    letters = mixed(world)["deadLetter"]
    retried = body(act(world, letters[0], "retry"))
    assert (retried["kind"], retried["action"], retried["done"]) == ("deadLetter", "retry", True)
    assert retried["failure"]["state"] == "resolved"
    [(_, resent)] = world.memory.dead_letters.sent
    assert resent.application_properties["cloudEvents_id"] == records(world)[letters[0]].event_id
    assert "resolved" in problem(act(world, letters[0], "retry"), 409)["detail"]

    archived = body(act(world, letters[1], "archive", reason=REASON))
    assert (archived["done"], archived["failure"]["state"]) == (True, "archived")
    assert len(world.memory.dead_letters.sent) == 2  # its discard notice
    [note] = records(world)[letters[1]].history
    assert (note.what, note.note, note.by) == (
        "archived",
        REASON,
        "nobody: keys not enforced locally",
    )
    problem(act(world, letters[1], "archive", reason=REASON), 409)  # not open

    unarchived = body(act(world, letters[1], "unarchive"))
    assert (unarchived["done"], unarchived["failure"]["state"]) == (True, "open")
    assert [n.what for n in records(world)[letters[1]].history] == ["archived", "unarchived"]
    problem(act(world, letters[1], "unarchive"), 409)  # open: nothing to bring back
    audited = [getattr(r, "outbox.audit", None) for r in caplog.records]
    assert {"deadletters.resubmit", "deadletters.discard", "failures.unarchive"} <= set(audited)

    missing = problem(act(world, letters[2], "archive"), 400)  # no reason
    assert "reason is required" in missing["detail"]
    problem(act(world, "failure-" + "0" * 32, "retry"), 404)


def test_a_quarantined_event_is_replayed_and_archived_by_its_failure_id_never_unarchived(
    world: RecoveryWorld,
) -> None:
    quarantined = mixed(world)["quarantine"]
    still = body(act(world, quarantined[0], "retry"))  # the cause not fixed: set aside again
    assert (still["kind"], still["done"], still["failure"]["state"]) == (
        "quarantine",
        False,
        "open",
    )
    assert still["outcome"].startswith("still quarantined")
    world.memory.publisher.max_batch_bytes = 1024 * 1024  # the cause fixed
    replayed = body(act(world, quarantined[0], "retry"))
    assert (replayed["done"], replayed["outcome"], replayed["failure"]["state"]) == (
        True,
        "resolved",
        "resolved",
    )
    event_id = records(world)[quarantined[0]].event_id
    entry = body(world.call("GET", f"outbox/quarantine/{event_id}"))
    assert entry["status"] == "resolved"
    sent = len(world.sent)
    again = body(act(world, quarantined[0], "retry"))  # replaying twice: nothing sent
    assert (again["outcome"], again["subscribersWillSee"]) == ("resolved already", "nothing new")
    assert len(world.sent) == sent

    sent = len(world.sent)
    archived = body(act(world, quarantined[1], "archive", reason=REASON))
    assert (archived["kind"], archived["done"], archived["failure"]["state"]) == (
        "quarantine",
        True,
        "archived",
    )
    assert len(world.sent) == sent + 1  # its discard notice
    assert (records(world)[quarantined[1]].history[-1].note) == REASON
    refusal = problem(act(world, quarantined[1], "unarchive"), 409)
    assert "given up" in refusal["detail"]


def test_an_action_on_a_failure_a_bulk_operation_holds_is_refused_naming_it(
    world: RecoveryWorld,
) -> None:
    letters = mixed(world)["deadLetter"]
    group = records(world)[letters[0]].group
    started = body(
        world.call("POST", f"outbox/groups/{group}/act", body={"action": "retry", "canary": 0})
    )
    for action, params in (("retry", {}), ("archive", {"reason": REASON}), ("unarchive", {})):
        held = problem(act(world, letters[0], action, **params), 409)
        assert started["id"] in held["detail"], action
    assert world.memory.dead_letters.sent == []


def test_the_consoles_door_refuses_an_action_without_the_operator_role(
    world: RecoveryWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in AZURE.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("FUNCTIONS_CORETOOLS_ENVIRONMENT", raising=False)
    letter = mixed(world)["deadLetter"][0]
    route = f"outbox/console/failures/{letter}/retry"
    problem(world.call("POST", route, headers={"host": "localhost"}), 401)
    roleless = problem(world.call("POST", route, headers={"host": "localhost", **agent()}), 403)
    assert "without the app role" in roleless["detail"]
    problem(world.call("GET", "outbox/console/failures", headers={"host": "localhost"}), 401)
    foreign = {"host": "localhost", "origin": "https://evil.example", **OPERATOR}
    problem(world.call("POST", route, headers=foreign), 403)
    assert records(world)[letter].state == "open" and world.memory.dead_letters.sent == []


def test_the_console_shows_failures_of_both_kinds_and_retries_one_by_its_id(
    world: RecoveryWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in AZURE.items():
        monkeypatch.setenv(name, value)
    kinds = mixed(world)
    html = page(world, "failures")
    rows = elements(html, data_failure_id=kinds["deadLetter"][0])
    [(row, _)] = [(a, t) for a, t in rows if "data-kind" in a]
    assert row["data-kind"] == "deadLetter"
    assert len(elements(html, data_kind="quarantine")) == 2
    [(button, _)] = [
        (a, t)
        for a, t in elements(html, hx_post=f"{CONSOLE}/failures/{kinds['deadLetter'][0]}/retry")
    ]
    done = pressed(world, button)
    assert f'data-failure-id="{kinds["deadLetter"][0]}"' in done and 'data-outcome="retry"' in done
    assert records(world)[kinds["deadLetter"][0]].state == "resolved"


def test_the_consoles_failures_panel_filters_pages_and_archives_with_the_reason_in_the_query(
    world: RecoveryWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page's Failures panel (its filter sent with each refresh, never with a row's action),
    a filtered list's next page keeping the filter, and a row's archive: its form's reason sent
    in the route's query (console.js's `data-query`), its body the extension's empty object."""
    for name, value in AZURE.items():
        monkeypatch.setenv(name, value)
    kinds = mixed(world)
    whole = world.call("GET", "outbox/console", headers=PAGE).get_body().decode()
    [(panel, _)] = elements(whole, id="failures-panel")
    assert panel["hx-get"] == f"{CONSOLE}/failures"
    assert panel["hx-include"] == "#failures-filter" and panel["hx-disinherit"] == "hx-include"
    assert elements(whole, href="#failures") and elements(whole, id="failures-result")
    [(form, _)] = elements(whole, id="failures-filter")
    assert form["hx-get"] == f"{CONSOLE}/failures" and form["hx-target"] == "#failures-panel"
    assert elements(whole, id="failures-group", name="group")
    # each failure group's row links its failures (console.js sets the filter's group to it)
    groups = page(world, "groups")
    linked = {a["data-failures-group"] for a, _ in elements(groups, data_failures_group="*")}
    quarantine = {records(world)[f].group for f in kinds["quarantine"]}
    assert quarantine <= linked, groups
    [group] = quarantine
    of_group = page(world, "failures", params={"group": group})
    listed = {a["data-failure-id"] for a, _ in elements(of_group, data_failure_id="*")}
    assert listed == set(kinds["quarantine"]) and f"of group {group}" in of_group

    first = page(world, "failures", params={"kind": "deadLetter", "pageSize": "3"})
    rows = elements(first, data_failure_id="*", data_kind="*")
    assert {a["data-kind"] for a, _ in rows} == {"deadLetter"} and len(rows) == 3
    [(more, _)] = elements(first, hx_target="#failures-panel")
    query = parse_qs(urlsplit(more["hx-get"]).query)
    assert (query["kind"], query["pageSize"]) == (["deadLetter"], ["3"]), more
    rest = page(world, "failures", params={k: v[0] for k, v in query.items()})
    shown = [
        a["data-failure-id"] for a, _ in rows + elements(rest, data_failure_id="*", data_kind="*")
    ]
    assert sorted(shown) == kinds["deadLetter"], rest  # the 4th, of the same kind

    letter = rows[0][0]["data-failure-id"]
    [(archive, _)] = elements(first, hx_post=f"{CONSOLE}/failures/{letter}/archive")
    assert archive["data-query"] == "reason"
    route = archive["hx-post"].removeprefix("/api/")
    missing = world.call("POST", route, headers=PAGE, body={})
    assert missing.status_code == 400 and "reason is required" in missing.get_body().decode()
    done = world.call("POST", route, headers=PAGE, body={}, params={"reason": REASON})
    assert done.status_code == 200, done.get_body()
    html = done.get_body().decode()
    assert 'data-outcome="archive"' in html and REASON in html
    assert records(world)[letter].state == "archived"
    archived = page(world, "failures", params={"status": "archived"})
    [(row, _)] = elements(archived, data_failure_id=letter, data_kind="*")
    assert row["data-state"] == "archived"
    assert elements(archived, hx_post=f"{CONSOLE}/failures/{letter}/unarchive")


def test_the_command_line_lists_and_acts_on_failures_by_their_ids(
    world: RecoveryWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    kinds = mixed(world)
    assert main(["failures", "list", "--kind", "quarantine"], outbox=world.outbox) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "2 failure(s)"
    assert sorted(line.split()[0] for line in lines[1:]) == kinds["quarantine"]
    letter = kinds["deadLetter"][0]
    code = main(["failures", "archive", letter, "--reason", REASON], outbox=world.outbox)
    out = capsys.readouterr().out
    assert code == 0 and out.startswith(f"failure {letter} (deadLetter) archive: archived")
    assert main(["failures", "unarchive", letter], outbox=world.outbox) == 0
    assert capsys.readouterr().out.startswith(f"failure {letter} (deadLetter) unarchive: open")
    assert main(["failures", "unarchive", kinds["quarantine"][0]], outbox=world.outbox) == 1
    assert "409 Conflict" in capsys.readouterr().err
    assert main(["failures", "show", letter], outbox=world.outbox) == 0
    assert "unarchived at" in capsys.readouterr().out
    # the installed command (its entry points made from cli/_names.py) knows it too
    for verb in ("list", "retry", "archive", "unarchive"):
        ran = installed("failures", verb, "--help")
        assert ran.returncode == 0 and f"cosmos-outbox failures {verb}" in ran.stdout, ran.stderr


def test_an_agent_lists_and_acts_on_failures_through_the_mcp_tools(
    world: RecoveryWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in AZURE.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("FUNCTIONS_CORETOOLS_ENVIRONMENT", raising=False)
    kinds = mixed(world)

    async def on_call() -> None:
        async with http_session(world, OPERATOR) as session:
            first = await call(session, "list_failures", pageSize=4)
            rest = await call(
                session, "list_failures", pageSize=4, continuationToken=first["continuationToken"]
            )
            every = sorted(i["id"] for i in first["items"] + rest["items"])
            assert every == sorted(kinds["deadLetter"] + kinds["quarantine"])
            quarantine = await call(session, "list_failures", kind="quarantine", status="open")
            assert sorted(i["id"] for i in quarantine["items"]) == kinds["quarantine"]
            letter = kinds["deadLetter"][0]
            retried = await call(session, "retry_failure", failureId=letter)
            assert (retried["done"], retried["failure"]["state"]) == (True, "resolved")
            archived = await call(
                session, "archive_failure", failureId=kinds["deadLetter"][1], reason=REASON
            )
            note = archived["failure"]["history"][-1]
            assert (note["what"], note["note"]) == ("archived", REASON)
            assert note["by"].startswith("agent-7@example.com"), note
            text = await refused(session, "archive_failure", failureId=kinds["deadLetter"][2])
            assert text.startswith("400 Bad Request") and "reason" in text
            text = await refused(session, "unarchive_failure", failureId=kinds["quarantine"][0])
            assert text.startswith("409 Conflict")

    run(on_call)
    assert records(world)[kinds["deadLetter"][1]].state == "archived"


def test_a_reader_lists_failures_over_mcp_and_is_refused_their_actions(
    world: RecoveryWorld, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="cosmos_outbox.operators")
    kinds = mixed(world)
    reader = Caller(Actor("command line", name="reader@host"))  # no operator role

    async def on_call() -> None:
        async with Client(mcp_server(world.outbox, caller=reader)) as client:
            listed = await client.call_tool("list_failures", {"kind": "deadLetter"})
            assert not listed.is_error, listed.content
            found = sorted(i["id"] for i in (listed.structured_content or {})["items"])
            assert found == kinds["deadLetter"]
            for tool, arguments in (
                ("retry_failure", {}),
                ("archive_failure", {"reason": REASON}),
                ("unarchive_failure", {}),
            ):
                answer = await client.call_tool(
                    tool, {"failureId": kinds["deadLetter"][0], **arguments}
                )
                text = "".join(getattr(c, "text", "") for c in answer.content)
                assert answer.is_error and text.startswith("403 Forbidden"), (tool, text)

    run(on_call)
    refusals = [r for r in caplog.records if getattr(r, "outbox.audit", None) == "mcp.refused"]
    assert [getattr(r, "outbox.tool") for r in refusals] == [
        "retry_failure",
        "archive_failure",
        "unarchive_failure",
    ]
    assert {r.state for r in records(world).values()} == {"open"}
    assert world.memory.dead_letters.sent == []
