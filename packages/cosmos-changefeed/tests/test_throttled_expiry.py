"""The sync processor's leases expiring under throttling, in-process (the aio processor's, in a
simulated fleet: ``tests/test_fleets.py``): an instance whose lease container answers 429s for
longer than the expiration interval loses its leases to another instance, and says why as one
WARNING that names ``lease_expiration_interval`` and the request units -- not one per lease."""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any

import pytest
from azure.cosmos.exceptions import CosmosHttpResponseError
from running import FAST, wait

from cosmos_changefeed import ChangeFeedProcessor, InMemoryDocuments, InMemoryLeaseStore
from cosmos_changefeed.testing import InMemoryFeed, InMemoryFeedSource

#: The warning's words (``ProcessorBase._expired_throttled``).
EXPIRED_UNDER_THROTTLING = "expired under throttling"


class Throttling(InMemoryLeaseStore):
    """A lease store that answers every request 429 (past azure-cosmos's retries) while
    ``throttled`` is set."""

    def __init__(self, documents: InMemoryDocuments) -> None:
        super().__init__(documents=documents)
        self.throttled = threading.Event()

    def _check(self) -> None:
        if self.throttled.is_set():
            raise CosmosHttpResponseError(  # type: ignore[no-untyped-call]
                status_code=429, message="Request rate is large"
            )

    def list_documents(self, prefix: str) -> list[dict[str, Any]]:
        self._check()
        return super().list_documents(prefix)

    def read(self, item_id: str, partition_key: str) -> dict[str, Any] | None:
        self._check()
        return super().read(item_id, partition_key)

    def replace(
        self, document: Mapping[str, Any], partition_key: str, etag: str | None
    ) -> dict[str, Any]:
        self._check()
        return super().replace(document, partition_key, etag)


def processor(name: str, feed: InMemoryFeed, store: InMemoryLeaseStore) -> ChangeFeedProcessor:
    return ChangeFeedProcessor(
        InMemoryFeedSource(feed),
        store,
        processor_name="p",
        instance_name=name,
        handler=lambda context, changes: None,
        **FAST,
    )


def said(caplog: pytest.LogCaptureFixture, words: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if words in r.getMessage()]


@pytest.mark.parametrize("seconds", [0.2, 1.5])
def test_leases_that_expire_under_throttling_are_warned_of_once(
    caplog: pytest.LogCaptureFixture, seconds: float
) -> None:
    """Instance "a" holds 4 leases; its lease container throttles for ``seconds``, "b" starts
    meanwhile. Past the expiration interval (0.6 s) a's leases expire, b takes them, and a --
    its requests let through again -- finds them lost: one WARNING for the four. Under it
    (0.2 s) nothing expires and nothing is warned of."""
    caplog.set_level(logging.INFO, logger="cosmos_changefeed")
    feed, documents = InMemoryFeed(partitions=4), InMemoryDocuments()
    store = Throttling(documents)
    first = processor("a", feed, store)
    second = processor("b", feed, InMemoryLeaseStore(documents=documents))
    with first:
        first.wait_until_listening(10)
        wait(lambda: len(first.owned_leases) == 4)
        store.throttled.set()
        with second:
            second.wait_until_listening(10)
            threading.Event().wait(seconds)
            if seconds > FAST["lease_expiration_interval"]:
                wait(lambda: len(second.owned_leases) == 4)
            store.throttled.clear()
            if seconds > FAST["lease_expiration_interval"]:
                wait(lambda: said(caplog, EXPIRED_UNDER_THROTTLING) != [])
                wait(lambda: len(said(caplog, " lost (")) == 4)
            threading.Event().wait(0.2)
    warned = said(caplog, EXPIRED_UNDER_THROTTLING)
    if seconds < FAST["lease_expiration_interval"]:
        assert warned == [] and said(caplog, " lost (") == []
        return
    assert len(warned) == 1, [r.getMessage() for r in warned]
    [warning] = warned
    message = warning.getMessage()
    assert warning.levelno == logging.WARNING
    assert "instance a" in message and "lease_expiration_interval (0.6s)" in message
    assert "request units" in message
