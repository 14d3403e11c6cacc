"""What a start finds that works but not as an operator expects (``_processing.start_warnings``),
in-process: a lease container without TTL (an initialisation lock that would never expire), an
account host without a dot (KEDA's scaler finds no lease), another container's leases under
KEDA's prefix (KEDA would add their lag). Each is a WARNING at the start, once."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from running import FAST, wait

from cosmos_changefeed import ChangeFeedProcessor, InMemoryDocuments, InMemoryLeaseStore
from cosmos_changefeed._names import keda_prefix
from cosmos_changefeed.testing import InMemoryFeed, InMemoryFeedSource


class WithoutTtl(InMemoryLeaseStore):
    """A store that keeps a ``ttl``'d document for ever, as a container with TTL off does."""

    def expires_documents(self) -> bool:
        return False


def start(feed: InMemoryFeed, store: InMemoryLeaseStore, **options: Any) -> None:
    given: dict[str, Any] = {"processor_name": "mailer", "instance_name": "i"} | FAST | options
    processor = ChangeFeedProcessor(
        InMemoryFeedSource(feed),
        store,
        handler=lambda context, changes: None,
        **given,
    )
    with processor:
        processor.wait_until_listening(10)
        wait(lambda: processor.owned_leases != [])


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "cosmos_changefeed" and r.levelno == logging.WARNING
    ]


def test_a_lease_container_without_ttl_is_warned_of(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "cosmos_changefeed")
    start(InMemoryFeed(), WithoutTtl())
    [warning] = warnings_of(caplog)
    assert "has TTL off" in warning and ".lock" in warning and "default_ttl=-1" in warning
    caplog.clear()
    start(InMemoryFeed(), InMemoryLeaseStore())
    assert warnings_of(caplog) == []


@pytest.mark.parametrize(
    ("endpoint", "said"),
    [
        # another machine's: a warning (an emulator in a compose network, an IPv6 address)
        ("https://cosmos:8081/", logging.WARNING),
        ("https://[2001:db8::7]:8081/", logging.WARNING),
        # this machine's emulator (no KEDA rule of a deployment reads it): said at INFO, so a
        # first local run warns of nothing (funcstack's endpoint is [::ffff:127.0.0.1])
        ("https://localhost:8081/", logging.INFO),
        ("https://[::ffff:127.0.0.1]:8081/", logging.INFO),
        ("https://[::1]:8081/", logging.INFO),
        # KEDA finds these: nothing said
        ("https://127.0.0.1:8081/", None),  # "mailer127." starts "mailer127.0.0.1_..."
        ("https://shop.documents.azure.com:443/", None),
    ],
)
def test_an_account_host_without_a_dot_is_said_for_keda(
    caplog: pytest.LogCaptureFixture, endpoint: str, said: int | None
) -> None:
    caplog.set_level(logging.INFO, "cosmos_changefeed")
    start(InMemoryFeed(account_endpoint=endpoint), InMemoryLeaseStore())
    found = [r for r in caplog.records if "KEDA" in r.getMessage()]
    assert [r.levelno for r in found] == ([said] if said is not None else []), found
    if found:
        text = found[0].getMessage()
        assert "has no dot" in text and "IPv6" in text and "never scale" in text


def test_keda_finds_the_leases_by_the_name_and_the_host_up_to_its_first_dot() -> None:
    """kedacore/keda pkg/scalers/azure_cosmosdb_scaler.go, ``cosmosDBAccountShortName``."""
    assert keda_prefix("mailer", "https://shop.documents.azure.com:443/") == "mailershop."
    assert keda_prefix("mailer", "https://127.0.0.1:8081/") == "mailer127."
    assert keda_prefix("mailer", "https://localhost:8081/") is None
    # Go's url.Hostname() drops an IPv6 literal's brackets, the lease ids keep them (.NET's):
    # KEDA's "mailer::ffff:127." never starts "mailer[::ffff:127.0.0.1]_..."
    assert keda_prefix("mailer", "https://[::ffff:127.0.0.1]:8081/") is None


def test_another_containers_leases_under_the_same_name_are_warned_of(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Two outboxes, one lease container, one processor name: .NET and this package keep their
    leases apart (the prefix holds the container's resource id); KEDA's prefix does not."""
    caplog.set_level(logging.WARNING, "cosmos_changefeed")
    documents = InMemoryDocuments()
    first, second = InMemoryFeed(partitions=2), InMemoryFeed(partitions=1)
    start(first, InMemoryLeaseStore(documents=documents))
    assert warnings_of(caplog) == []
    start(second, InMemoryLeaseStore(documents=documents))
    [warning] = warnings_of(caplog)
    assert "2 lease(s) under KEDA's prefix 'mailerin-memory.'" in warning
    assert "a processor_name of its own" in warning
