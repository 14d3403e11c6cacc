"""The quarantine's listing when the store's answers make no progress for a while: Cosmos DB
may answer a query's page empty with a continuation, and funcstack's endpoint answers one with
the token it was asked with while an index it reads is still building past the page's time
budget (a loaded machine). The listing asks again; it never ends early with fewer records
(which an operator would read as "nothing quarantined"), and a store that never moves on is an
error, not an empty listing."""

from __future__ import annotations

from typing import Any

import pytest

from cosmos_outbox._mapper import read_feed
from cosmos_outbox._quarantine import STALLED_ANSWERS, Quarantine
from cosmos_outbox._records import OutboxRecord
from cosmos_outbox._sync_over_async import run_sync
from cosmos_outbox.errors import StoreUnavailableError
from cosmos_outbox.ports import Page
from cosmos_outbox_testing import InMemoryStore
from relay.test_relay import history

START = "stalled:start"


class Stalling(InMemoryStore):
    """An in-memory store whose every page is first answered `times` times empty, with the
    token it was asked with (at the start, a token of its own)."""

    def __init__(self, times: int) -> None:
        super().__init__()
        self.times = times
        self.answers: dict[str | None, int] = {}

    def page_of_type(
        self, type_: str, *, page_size: int, continuation: str | None
    ) -> Page[dict[str, Any]]:
        self.answers[continuation] = self.answers.get(continuation, 0) + 1
        if self.answers[continuation] <= self.times:
            return Page([], continuation or START)
        inner = None if continuation == START else continuation
        return super().page_of_type(type_, page_size=page_size, continuation=inner)


def quarantined(store: InMemoryStore, n: int) -> tuple[Quarantine, set[str]]:
    quarantine = Quarantine(store)
    records = [r for r in read_feed(history(n - 1)) if isinstance(r, OutboxRecord)]
    for record in records:
        run_sync(quarantine.put(record, reason="too large"))
    return quarantine, {r.event_id for r in records}


def listed(quarantine: Quarantine, page_size: int) -> list[str]:
    ids: list[str] = []
    token: str | None = None
    while True:
        page = run_sync(quarantine.list_page(page_size=page_size, continuation=token))
        ids += [e.event_id for e in page.items]
        if (token := page.continuation_token) is None:
            return ids


@pytest.mark.parametrize("page_size", [1, 2, 10])
def test_answers_without_progress_are_asked_again_and_every_record_is_listed(
    page_size: int,
) -> None:
    quarantine, ids = quarantined(Stalling(times=3), 3)
    found = listed(quarantine, page_size)
    assert sorted(found) == sorted(ids)


def test_a_store_that_never_moves_on_is_an_error_not_an_empty_listing() -> None:
    quarantine, _ = quarantined(Stalling(times=STALLED_ANSWERS + 1), 2)
    with pytest.raises(StoreUnavailableError, match="same continuation token"):
        run_sync(quarantine.list_page(page_size=1, continuation=None))
