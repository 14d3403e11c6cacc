"""Bulk operations from the operators' console, in a real browser (headless Chromium) against the
Contacts app on the local stack (issue 92 items 1 and 2).

- A canary that fails again: a group of 30 dead letters retried with a canary of 5, the cause
  not fixed (the subscriber refuses the 5 again): the operation stops after its canary, paused,
  says why, and leaves the other 25 untouched; cancelled from the page, it writes its audit line.
- A group of 2,000 dead letters retried with a canary of 5, then the rest, while both cores are
  kept busy by a CPU hog (two busy-loop processes at nice 0, started and stopped here): the
  Operations panel shows its progress moving; the app's host is SIGKILLed once mid-operation and
  the host that restarts finishes it (once the dead host's lease ran out); every dead letter is
  resubmitted exactly once, counted at the subscription (all-events, whose subscriber is this
  test); the audit has the operation's line with its counts.

Every wait is for what the page (or the subscription) shows, under a named deadline
(`funcstack.deadlines`); nothing is timed. One stack, one browser, one module."""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from azure.servicebus import NEXT_AVAILABLE_SESSION, ServiceBusClient
from azure.servicebus.exceptions import OperationTimeoutError
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement

from funcstack import deadlines
from funcstack.cosmos import CosmosEndpoint
from funcstack.deadlines import wait_for
from tests.contacts.outbox.browser import chromium
from tests.contacts.outbox.resubmissions import Resubmissions, prop
from tests.contacts.outbox.test_console_in_a_browser import (
    OPERATOR,
    PREMIUM,
    Walk,
    sign_in_settings,
    signed_in,
)
from tests.contacts.outbox.test_operating_the_outbox import plant_history
from tools.httpclient import Client
from tools.stack import Ports, Stack

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.local_stack(
        "signed in through funcstack's stand-in for App Service Authentication; the app's "
        "host SIGKILLed and restarted; both cores busy"
    ),
]
TOPIC, SUBSCRIPTION = "contact-events", "all-events"
#: The dead letters of the big group: 40 contacts, 50 changes each.
CONTACTS, CHANGES = 40, 50


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, shared_cosmos: CosmosEndpoint
) -> Iterator[Stack]:
    with Stack(
        shared_cosmos=shared_cosmos,
        workdir=tmp_path_factory.mktemp("operations") / "stack",
        ports=Ports.free(),
        servicebus_max_message_size=PREMIUM,
        settings_overrides={
            # the operations' worker looks every 2 s (the app's default: 5 s)
            "OUTBOX_OPERATIONS_SCHEDULE": "*/2 * * * * *",
            "BACKLOG_ESTIMATE_SCHEDULE": "0 0 0 1 1 *",
            **sign_in_settings(),
        },
    ) as started:
        yield started


@pytest.fixture(scope="module")
def walk(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Walk]:
    shots = tmp_path_factory.mktemp("operations-screenshots")
    print(f"\noperations screenshots: {shots}")
    with chromium(tmp_path_factory.mktemp("chromium-profile")) as driver:
        yield signed_in(Walk(driver, stack, shots))


def bus(stack: Stack) -> ServiceBusClient:
    assert stack.servicebus is not None
    return ServiceBusClient.from_connection_string(stack.servicebus.connection_string)


def dead_lettered(stack: Stack, contacts: int, changes: int, why: str) -> set[str]:
    """`contacts` contacts of `changes` description changes each, relayed; at all-events,
    each creation completed and each change dead-lettered as a subscriber refusing it would
    (`why`, the azure-servicebus SDK): one failure group of contacts x changes. Their ids."""
    sessions = [
        plant_history(stack.contacts_container(), f"Bulk{time.monotonic_ns()}{i}", changes)[0]
        for i in range(contacts)
    ]
    refused: set[str] = set()
    with bus(stack) as client:
        for session in sessions:
            with client.get_subscription_receiver(
                TOPIC, SUBSCRIPTION, session_id=session, max_wait_time=5
            ) as receiver:
                seen = 0
                end = time.monotonic() + deadlines.SHORT
                while seen < changes + 1:
                    assert time.monotonic() < end, f"only {seen} messages in session {session}"
                    for message in receiver.receive_messages(
                        max_message_count=100, max_wait_time=5
                    ):
                        seen += 1
                        if prop(message, "action") == "ContactCreatedEvent":
                            receiver.complete_message(message)
                            continue
                        receiver.dead_letter_message(
                            message, reason="HandlerRefused", error_description=why
                        )
                        refused.add(prop(message, "cloudEvents_id") or "")
    return refused


@contextlib.contextmanager
def cores_busy(n: int = 2) -> Iterator[list[subprocess.Popen[bytes]]]:
    """`n` busy-loop processes at nice 0 (this machine's cores kept busy), stopped at the end."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield hogs
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait(timeout=deadlines.LOOPBACK)


def group_of(walk: Walk, cause: str, count: int, *, at_least: bool = False) -> str | None:
    """The id of the failure groups' row of `cause` once it counts `count` failures
    (`at_least`: or more; the panel refreshed until it does). An id, not the row: a refresh
    answered later swaps the row for a new one."""
    for row in walk.driver.find_elements(By.CSS_SELECTOR, "#groups-panel tr[data-group-id]"):
        shown = int(row.get_attribute("data-count") or 0)
        if cause in row.text and (shown == count or (at_least and shown > count)):
            return row.get_attribute("data-group-id")
    walk.driver.find_element(By.CSS_SELECTOR, "#groups .section-head button").click()
    time.sleep(1)  # the refresh's answer, before looking again (not a verdict)
    return None


def retry(walk: Walk, group: str, *, canary: int, waiting: float) -> str:
    """The group's Retry, with its canary, through its preview and the dialog; the operation's
    id, as the answer shows it. The row is found again if a refresh swaps it meanwhile."""
    before = walk.find('#groups-result [data-outcome="group-retry"][data-operation-id]')
    earlier = before.get_attribute("data-operation-id") if before is not None else None
    walk.ask_group_retry(group, canary=canary, waiting=waiting)
    walk.confirm()

    def started() -> str | None:
        card = walk.find('#groups-result [data-outcome="group-retry"][data-operation-id]')
        shown = card.get_attribute("data-operation-id") if card is not None else None
        return shown if shown != earlier else None

    try:
        return walk.wait("the operation started", started, deadlines.SHORT)
    except AssertionError as exc:  # what the page showed instead: the next failure says why
        shown = walk.find("#groups-result")
        raise AssertionError(
            f"{exc}; #groups-result shows: {shown.text if shown is not None else '(nothing)'}"
        ) from None


def operation_row(walk: Walk, operation: str) -> dict[str, str] | None:
    """The Operations panel's row of `operation` as the page shows it now."""
    row = walk.find(f'#operations-panel tr[data-operation-id="{operation}"]')
    if row is None:
        return None
    return {k: row.get_attribute(f"data-{k}") or "" for k in ("state", "items", "done", "failed")}


def audit_lines(stack: Stack, action: str) -> list[str]:
    log = (stack.workdir / "runner.log").read_text(errors="replace")
    return [line for line in log.splitlines() if f"outbox audit: {action} by" in line]


def test_a_canary_that_fails_again_stops_the_operation_and_leaves_the_rest_untouched(
    walk: Walk, stack: Stack
) -> None:
    cause = "the canary walk's subscriber refused it"
    dead_lettered(stack, 3, 10, cause)
    row = walk.wait("the group of 30", lambda: group_of(walk, cause, 30), deadlines.SHORT)
    operation = retry(walk, row, canary=5, waiting=deadlines.LONG)
    # the cause is not fixed: the subscriber refuses the canary's 5 resubmissions again
    refused: set[str] = set()
    with bus(stack) as client:
        end = time.monotonic() + deadlines.SHORT
        while len(refused) < 5:
            assert time.monotonic() < end, f"only {len(refused)} of the canary received"
            with (
                contextlib.suppress(OperationTimeoutError),
                client.get_subscription_receiver(
                    TOPIC, SUBSCRIPTION, session_id=NEXT_AVAILABLE_SESSION, max_wait_time=2
                ) as receiver,
            ):
                for message in receiver.receive_messages(100, max_wait_time=2):
                    assert prop(message, "outboxResubmission"), "only the canary is sent"
                    receiver.dead_letter_message(
                        message, reason="HandlerRefused", error_description=cause
                    )
                    refused.add(prop(message, "cloudEvents_id") or "")

    def paused() -> WebElement | None:
        card = walk.find(f'#groups-result [data-operation-id="{operation}"]')
        return card if card is not None and card.get_attribute("data-state") == "paused" else None

    card = walk.wait("the operation paused after its canary", paused, deadlines.SHORT)
    assert card.get_attribute("data-done") == "5", card.text
    # paused at the first it saw back: as many as were back then (the test refuses the 5 a
    # session at a time, and a loaded machine may show the operation the first alone)
    assert re.search(r"the canary failed again: [1-5] of 5 came back as dead letters", card.text), (
        card.text
    )
    assert "the other 25 are untouched: continue (act on them anyway) or cancel" in card.text
    walk.shot("operation-canary-failed", "#groups")
    # the rest untouched: 25 of the 30 are where they were, and the canary's 5 back
    walk.wait(
        "the group of 30 again (25 untouched, the canary's 5 back)",
        lambda: group_of(walk, cause, 30),
        deadlines.SHORT,
    )
    shown = walk.find(f'#groups-result [data-operation-id="{operation}"]')
    assert shown is not None
    shown.find_element(By.XPATH, ".//button[normalize-space()='Cancel']").click()
    walk.confirm()
    walk.wait(
        "the operation cancelled",
        lambda: (
            (c := walk.find(f'#groups-result [data-operation-id="{operation}"]')) is not None
            and c.get_attribute("data-state") == "cancelled"
        ),
        deadlines.SHORT,
    )
    [line] = [line for line in audit_lines(stack, "operations.groups.retry") if operation in line]
    assert f"by {OPERATOR}" in line and "cancelled: 5 of 30 done, 0 failed" in line, line


def say(started: float, what: str) -> None:
    """A phase of the long walk, with the time since it began (printed: read with -s)."""
    print(f"{time.monotonic() - started:7.1f} s  {what}", flush=True)


# its waits are each under a named deadline: the whole walk gets their sum (the suite's 300 s
# bound is one of them)
@pytest.mark.timeout(5 * deadlines.LONG)
def test_a_group_of_2000_retried_with_a_canary_on_busy_cores_survives_its_host_killed(
    walk: Walk, stack: Stack
) -> None:
    began = time.monotonic()
    cause = "the bulk walk's subscriber refused it"
    refused = dead_lettered(stack, CONTACTS, CHANGES, cause)
    say(began, f"{len(refused)} dead letters at all-events")
    assert len(refused) == CONTACTS * CHANGES
    # the failures' ingest (on by default) keeps each dead letter as a record: the group counts
    # all of them exactly once they are kept (an operation started before acts on those kept)
    row = walk.wait(
        "the big group, every dead letter kept",
        lambda: group_of(walk, cause, CONTACTS * CHANGES),
        deadlines.LONG,
    )
    assert stack.servicebus is not None
    subscriber = Resubmissions(stack.servicebus.connection_string, TOPIC, SUBSCRIPTION)
    subscriber.start()
    try:
        with cores_busy(2):
            operation = retry(walk, row, canary=5, waiting=30)
            walk.driver.find_element(By.CSS_SELECTOR, "#operations .section-head button").click()
            # the canary's 5 first: while it waits (30 s, none back as a dead letter), only they
            # are sent, and the subscriber has only them
            api = Client(stack.api_url)
            try:
                canary = wait_for(
                    lambda: (
                        (o := api.request("GET", f"/outbox/operations/{operation}").json())
                        and (o["done"] + o["failed"] or o["state"] not in ("created", "canary"))
                        and not o["inFlight"]
                        and o
                    ),
                    "the canary sent",
                    deadlines.LONG,
                )
            finally:
                api.close()
            assert (canary["state"], canary["done"], canary["items"]) == (
                "canary",
                5,
                CONTACTS * CHANGES,
            ), canary
            wait_for(lambda: len(subscriber.seen()) == 5, "the canary's 5 received")
            say(began, "the canary sent and received")
            # its progress, moving on the page (seen at least three times, growing)
            progress: list[int] = []

            def moved() -> bool | None:
                shown = operation_row(walk, operation)
                if shown is not None and (not progress or int(shown["done"]) > progress[-1]):
                    progress.append(int(shown["done"]))
                return (len(progress) >= 3 and progress[-1] >= 300) or None

            walk.wait("the progress moving past 300", moved, deadlines.LONG)
            walk.shot("operation-progress", "#operations")
            assert progress == sorted(progress) and len(set(progress)) >= 3, progress
            # the app's host SIGKILLed mid-operation; the host that restarts finishes it
            say(began, f"progress seen on the page: {progress}; the host killed")
            stack.kill_runner()
            stack.start_runner()
            say(began, "the host started again")

            def finished() -> dict[str, str] | None:
                shown = operation_row(walk, operation)
                return shown if shown is not None and shown["state"] == "done" else None

            done = walk.wait("the operation done by the restarted host", finished, deadlines.LONG)
        say(began, "the operation done")
        walk.shot("operation-done", "#operations")
        assert (done["done"], done["failed"]) == (str(CONTACTS * CHANGES), "0"), done
        # every item acted on exactly once, counted at the subscription (drained: nothing left)
        # the subscriber (one thread, session by session) may still be behind a fast operation
        wait_for(
            lambda: set(subscriber.seen()) >= refused,
            "every resubmission received",
            deadlines.LONG,
        )
    finally:
        subscriber.stop(timeout=deadlines.SHORT)
    assert not subscriber.is_alive(), "the subscription was never drained"
    seen = subscriber.seen()
    assert set(seen) == refused
    # each once: a message the broker gave again (a lock lost) is the same message, not a send
    assert subscriber.twice() == {}, f"received more than once: {subscriber.twice()}"
    assert len(subscriber.message_ids) == len(refused)
    say(began, f"{len(seen)} received once each; {subscriber.redelivered} given again (lock lost)")
    [line] = [line for line in audit_lines(stack, "operations.groups.retry") if operation in line]
    assert f"by {OPERATOR}" in line, line
    assert "done: 2000 of 2000 done, 0 failed, 0 skipped, 2000 message(s) sent" in line, line
    assert "the canary succeeded" in line
