"""The bound of an operators' call names the dependency it was waiting on when it ran out
(issue 72 item 4): a call made of several waits on Service Bus, each within its own limit but
together past the bound, answers "Service Bus did not answer", never "the store or the message
broker" -- in the async API too, where the bound cancels the wait in flight."""

from __future__ import annotations

import asyncio
import time

import pytest

from cosmos_outbox.errors import DependencyUnavailableError
from cosmos_outbox.http import bounded
from cosmos_outbox.http._problems import HttpProblemError
from cosmos_outbox.operations._dependencies import SERVICE_BUS, answered


async def slow_peek() -> None:
    await asyncio.sleep(0.12)


async def three_peeks() -> None:
    """Three reads of a slow Service Bus, each answered within its limit."""
    for _ in range(3):
        await answered(SERVICE_BUS, slow_peek(), seconds=1.0)


def test_an_async_call_cut_by_the_bound_names_what_it_waited_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the bound's 503, or (since issue 92) the last wait's own, cut to what was left of the
    # call's time (`bounded.Budget`): both name Service Bus (a route answers either as a 503)
    with pytest.raises((HttpProblemError, DependencyUnavailableError)) as cut:
        asyncio.run(bounded.await_bounded(three_peeks(), what="count_dead_letters", seconds=0.3))
    assert str(cut.value).startswith("Service Bus did not answer within 0."), str(cut.value)


def test_a_sync_call_cut_by_the_bound_names_what_it_waited_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def waits() -> None:
        with bounded.waiting_on(SERVICE_BUS):
            time.sleep(1)

    with pytest.raises(HttpProblemError) as cut:
        bounded.run_bounded(waits, what="count_dead_letters", seconds=0.3)
    assert str(cut.value).startswith("Service Bus did not answer within 0.3 s"), str(cut.value)
