"""The console's Failures panel, in a real browser (headless Chromium) against the Contacts app on
the local stack, signed in through funcstack's stand-in for App Service Authentication: a mixed
store (two dead letters at all-events, refused by this test as a subscriber would, kept as
failure records by the app's ingest; one event the relay quarantined, too large for the
256 KB the app is told it may send) is listed in the panel, both kinds, and filtered by kind and
state, and by group from a failure group's row (its "Its failures"); a dead letter is
archived from its row with a reason (asked for in the row, repeated by the dialog, sent as the
route takes it: the query parameter `reason`) and moves to archived, its history naming the
reason; it is unarchived and is open again; the quarantined event is
archived, and its unarchive is refused with the app's message (its version was given up).
Every action goes through the page's own buttons and dialog.

Every wait is for what the page shows, under a named deadline (`funcstack.deadlines`); nothing
is timed. One stack, one browser, one module."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import Select

from funcstack import deadlines
from funcstack.cosmos import CosmosEndpoint
from tests.contacts.outbox.browser import chromium
from tests.contacts.outbox.test_console_in_a_browser import (
    OPERATOR,
    PREMIUM,
    STANDARD,
    Walk,
    sign_in_settings,
    signed_in,
)
from tests.contacts.outbox.test_operating_the_outbox import plant_history
from tests.contacts.outbox.test_operations_in_a_browser import audit_lines, dead_lettered
from tools.stack import Ports, Stack

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.local_stack(
        "signed in through funcstack's stand-in for App Service Authentication"
    ),
]
CAUSE = "the failures walk's subscriber refused it"
REASON = "the change was entered twice by hand"


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, shared_cosmos: CosmosEndpoint
) -> Iterator[Stack]:
    with Stack(
        shared_cosmos=shared_cosmos,
        workdir=tmp_path_factory.mktemp("failures") / "stack",
        ports=Ports.free(),
        servicebus_max_message_size=PREMIUM,
        settings_overrides={
            # an event larger than a Standard message is quarantined (the endpoint takes 1 MB)
            "SERVICEBUS_MAX_MESSAGE_BYTES": str(STANDARD),
            "BACKLOG_ESTIMATE_SCHEDULE": "0 0 0 1 1 *",
            **sign_in_settings(),
        },
    ) as started:
        yield started


@pytest.fixture(scope="module")
def walk(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Walk]:
    shots = tmp_path_factory.mktemp("failures-screenshots")
    print(f"\nfailures screenshots: {shots}")
    with chromium(tmp_path_factory.mktemp("chromium-profile")) as driver:
        yield signed_in(Walk(driver, stack, shots))


def listed(walk: Walk) -> dict[str, dict[str, str]]:
    """The Failures panel's rows as the page shows them now, by failure id: kind, state,
    event id."""
    return {
        row.get_attribute("data-failure-id") or "": {
            k: row.get_attribute(f"data-{k}") or "" for k in ("kind", "state", "event-id")
        }
        for row in walk.driver.find_elements(By.CSS_SELECTOR, "#failures-panel tr[data-failure-id]")
    }


def refreshed(walk: Walk) -> None:
    """The panel's Refresh clicked, and its answer waited for (not a verdict)."""
    walk.driver.find_element(By.CSS_SELECTOR, "#failures .section-head button").click()
    time.sleep(1)


def row(walk: Walk, failure: str) -> WebElement | None:
    return walk.find(f'#failures-panel tr[data-failure-id="{failure}"]')


def in_state(walk: Walk, failure: str, state: str) -> WebElement | None:
    found = row(walk, failure)
    return found if found is not None and found.get_attribute("data-state") == state else None


def filtered(walk: Walk, kind: str, status: str) -> None:
    """The panel's filter set (`""`: any) and submitted."""
    Select(walk.driver.find_element(By.ID, "failures-kind")).select_by_value(kind)
    Select(walk.driver.find_element(By.ID, "failures-status")).select_by_value(status)
    walk.driver.find_element(By.CSS_SELECTOR, "#failures-filter button[type=submit]").click()


def archived_from_its_row(walk: Walk, failure: str, reason: str) -> WebElement:
    """The row's Archive, with `reason`, through the dialog (which repeats it): the answer."""
    walk.quiet()  # a row found before a refresh's swap is gone after it
    found = walk.wait("the failure's row", lambda: in_state(walk, failure, "open"))
    found.find_element(By.CSS_SELECTOR, "details.archive summary").click()
    found.find_element(By.CSS_SELECTOR, "details.archive input[name=reason]").send_keys(reason)
    found.find_element(By.CSS_SELECTOR, "details.archive button[type=submit]").click()
    assert f"Reason: {reason}" in walk.confirm()
    return walk.wait(
        "the archive's outcome",
        lambda: walk.find(
            f'#failures-result [data-outcome="archive"][data-failure-id="{failure}"]'
        ),
    )


def unarchive_pressed(walk: Walk, failure: str) -> None:
    walk.quiet()
    found = walk.wait("the archived row", lambda: in_state(walk, failure, "archived"))
    found.find_element(By.XPATH, ".//button[normalize-space()='Unarchive']").click()
    assert failure in walk.confirm()


def test_failures_of_both_kinds_are_listed_filtered_archived_and_unarchived(
    walk: Walk, stack: Stack
) -> None:
    letters = dead_lettered(stack, 1, 2, CAUSE)
    _, ids = plant_history(stack.contacts_container(), "Quarantina", 1, big_version=2)
    poison = ids[1]

    # The mixed store, both kinds in one list (the ingest keeps the dead letters as records).
    def mixed() -> dict[str, dict[str, str]] | None:
        rows = listed(walk)
        events = {r["event-id"]: r["kind"] for r in rows.values() if r["state"] == "open"}
        if {e: events.get(e) for e in (*letters, poison)} == {
            **dict.fromkeys(letters, "deadLetter"),
            poison: "quarantine",
        }:
            return rows
        refreshed(walk)
        return None

    rows = walk.wait("the dead letters and the quarantined event listed", mixed, deadlines.LONG)
    walk.shot("failures", "#failures")
    by_event = {r["event-id"]: failure for failure, r in rows.items()}
    letter, quarantined = by_event[sorted(letters)[0]], by_event[poison]

    # Filtered by kind: the dead letters only; then any kind again.
    filtered(walk, "deadLetter", "")
    walk.wait(
        "the dead letters only",
        lambda: (shown := listed(walk)) and {r["kind"] for r in shown.values()} == {"deadLetter"},
    )
    filtered(walk, "", "")
    walk.wait("both kinds again", lambda: quarantined in listed(walk) and letter in listed(walk))

    # A group's failures, from its row in the failure groups: the dead letters' only (the
    # Failures panel's filter set to the group, kept by its refresh); then every group again.
    def its_failures() -> bool | None:
        """The group's "Its failures" followed (found and clicked at once: a refresh swaps the
        row, and a stale one counts as not yet)."""
        for group in walk.driver.find_elements(By.CSS_SELECTOR, "#groups-panel tr[data-group-id]"):
            if CAUSE in group.text:
                group.find_element(By.CSS_SELECTOR, "a[data-failures-group]").click()
                return True
        walk.driver.find_element(By.CSS_SELECTOR, "#groups .section-head button").click()
        time.sleep(1)  # the refresh's answer, before looking again (not a verdict)
        return None

    def of_the_group() -> bool:
        shown = listed(walk)
        return bool(shown) and {r["event-id"] for r in shown.values()} == set(letters)

    walk.quiet()
    walk.wait("the dead letters' group followed to its failures", its_failures, deadlines.LONG)
    walk.wait("the group's failures only", of_the_group)
    group = walk.driver.find_element(By.ID, "failures-group").get_attribute("value")
    assert group, "the filter names the group"
    refreshed(walk)
    walk.quiet()
    walk.wait("the group's failures only, kept by the refresh", of_the_group)
    walk.shot("failures-of-a-group", "#failures")
    walk.driver.find_element(By.ID, "failures-group").clear()
    filtered(walk, "", "")
    walk.wait("every group again", lambda: quarantined in listed(walk) and letter in listed(walk))

    # A dead letter archived with the reason: its record archived, its history naming it.
    outcome = archived_from_its_row(walk, letter, REASON)
    assert outcome.get_attribute("data-kind") == "deadLetter", outcome.text
    assert REASON in outcome.text and OPERATOR in outcome.text, outcome.text
    walk.wait("the dead letter archived in the list", lambda: in_state(walk, letter, "archived"))
    # in the archived ones, with the filter kept by the panel's refresh
    filtered(walk, "", "archived")
    walk.wait(
        "the archived ones only",
        lambda: (shown := listed(walk)) and set(shown) == {letter},
    )
    # its history, one click away (with the filter set: the panel's alone, not its rows')
    walk.quiet()
    archived = walk.wait("the archived row", lambda: in_state(walk, letter, "archived"))
    archived.find_element(By.CSS_SELECTOR, "details.body summary").click()
    history = walk.wait(
        "its history",
        lambda: walk.find(
            f'#failures-panel .body-content .failure-history[data-failure-id="{letter}"]'
        ),
    )
    assert history.get_attribute("data-failure-state") == "archived", history.text
    assert REASON in history.text and OPERATOR in history.text, history.text
    walk.shot("failure-archived", "#failures")
    # discarded at its subscription, audited with who and why
    [line] = [line for line in audit_lines(stack, "deadletters.discard") if REASON in line]
    assert f"by {OPERATOR}" in line and "all-events" in line, line

    # Unarchived: open again, noted with who.
    filtered(walk, "", "")
    unarchive_pressed(walk, letter)
    back = walk.wait(
        "the unarchive's outcome",
        lambda: walk.find(
            f'#failures-result [data-outcome="unarchive"][data-failure-id="{letter}"]'
        ),
    )
    assert "open" in back.text, back.text
    walk.wait("the dead letter open again", lambda: in_state(walk, letter, "open"))

    # The quarantined event archived (discarded), and its unarchive refused, saying why; the
    # quarantine's failures filtered meanwhile (the filter kept by the actions' refreshes, and
    # never sent with a row's action)
    filtered(walk, "quarantine", "")
    walk.wait("the quarantine's only", lambda: set(listed(walk)) == {quarantined})
    gone = archived_from_its_row(walk, quarantined, REASON)
    assert gone.get_attribute("data-kind") == "quarantine", gone.text
    unarchive_pressed(walk, quarantined)
    refusal = walk.wait(
        "the unarchive refused", lambda: walk.find("#failures-result .problem[data-status='409']")
    )
    assert "given up" in refusal.text, refusal.text
    walk.shot("failure-unarchive-refused", "#failures")
    walk.quiet()
    assert in_state(walk, quarantined, "archived") is not None
    assert set(listed(walk)) == {quarantined}
