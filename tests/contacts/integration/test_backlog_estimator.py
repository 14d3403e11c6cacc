"""The backlog estimator on the local Cosmos endpoint: a relay that is not running shows its
backlog (pending N, a growing oldest age); once the relay runs, the backlog drains to 0."""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from azure.cosmos import ContainerProxy, CosmosClient, PartitionKey

from application.contacts.commands import CreateContact
from cosmos_outbox import AggregateService
from cosmos_outbox._aio import as_async, run_sync
from cosmos_outbox._idempotency import Answer, Claim
from cosmos_outbox._relay.backlog import Backlog, report_backlog
from cosmos_outbox._relay.telemetry import RelayTelemetry
from cosmos_outbox.cosmos import CosmosBacklogEstimator, CosmosDocumentStore
from cosmos_outbox.cosmos._client import client_options
from cosmos_outbox.cosmos._estimator import latest_lsn
from cosmos_outbox.errors import StoreUnavailableError
from domain.contact import Contact
from tests.contacts.faults import frozen
from tests.contacts.outboxes import outbox_on
from tools.provision import create_contacts_container
from tools.stack import Ports, Stack

pytestmark = pytest.mark.integration

N = 5


@pytest.fixture(scope="module")
def relay_off(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """Cosmos and Service Bus up, the Functions host (and so the relay) not started."""
    with Stack(workdir=Path(tmp_path_factory.mktemp("backlog")), ports=Ports.free(),
               with_runner=False, settings_overrides={"FEED_POLL_DELAY_MS": "100"}) as stack:
        yield stack


@pytest.fixture(scope="module")
def cosmos(relay_off: Stack) -> CosmosClient:
    warnings.filterwarnings("ignore", message="Unverified HTTPS request")
    assert relay_off.cosmos is not None
    return CosmosClient.from_connection_string(relay_off.cosmos.connection_string,
                                               connection_verify=relay_off.cosmos.verify_tls)


def containers(
    cosmos: CosmosClient, leases: str = "leases"
) -> tuple[ContainerProxy, ContainerProxy]:
    db = cosmos.get_database_client("outbox")
    lease_container = db.create_container_if_not_exists(leases, partition_key=PartitionKey("/id"))
    return db.get_container_client("contacts"), lease_container


def contacts_service(container: ContainerProxy) -> AggregateService[Contact]:
    return outbox_on(CosmosDocumentStore(container), event_ttl_seconds=864000).service(Contact)


def create_contacts(container: ContainerProxy, n: int) -> None:
    service = contacts_service(container)
    for i in range(n):
        service.create(Contact.create(**CreateContact.model_validate(
            {"firstName": f"C{i}", "lastName": "Backlog", "email": f"c{i}@example.com",
             "companyName": "Estimators"}).fields()))


def test_backlog_while_the_relay_is_off_then_zero_once_it_runs(
    relay_off: Stack, cosmos: CosmosClient
) -> None:
    contacts, leases = containers(cosmos)
    before = time.time()
    create_contacts(contacts, N)
    estimator = CosmosBacklogEstimator(contacts, leases)
    telemetry = RelayTelemetry(destination="contact-events")

    def tick(**options: Any) -> Backlog:
        """One tick of the backlog timer, as the sync API runs it (over the sync estimator)."""
        return run_sync(report_backlog(as_async(estimator), telemetry,
                                       event_ttl_seconds=864000, **options))

    # no lease yet (the relay never ran): estimated from the start of each feed range
    first = tick()
    assert first.pending == N  # one change (transaction) per created contact
    [lease] = first.leases
    assert lease.oldest_created_at is not None and lease.oldest_created_at >= before - 1
    t = lease.oldest_created_at
    later = tick(clock=lambda: t + 120)
    sooner = tick(clock=lambda: t + 60)
    assert later.pending == sooner.pending == N
    assert later.oldest_age_seconds == pytest.approx(sooner.oldest_age_seconds + 60)

    relay_off.start_runner()
    try:
        deadline = time.monotonic() + 60
        backlog = tick()
        while backlog.pending and time.monotonic() < deadline:
            time.sleep(0.2)
            backlog = tick()
        assert backlog.pending == 0
        assert backlog.oldest_age_seconds == 0
        assert [b.lease for b in backlog.leases] == [lease.lease]  # now from the runner's lease
    finally:
        relay_off.stop_runner()


def test_functions_host_leases_with_etag_continuations_are_read(
    relay_off: Stack, cosmos: CosmosClient
) -> None:
    """The leases the Functions host (.NET change feed processor) writes in Azure: an etag
    continuation, on an EPK feed range or on a partition key range id."""
    contacts, _ = containers(cosmos)
    create_contacts(contacts, 1)
    lsns = [int(d["_lsn"]) for d in contacts.query_items_change_feed(start_time="Beginning")]
    checkpoint = max(lsns)
    # (leases first: the local endpoint's LSN is global across containers, the service's is not)
    _, leases = containers(cosmos, "leases-functions-host")
    leases.upsert_item({"id": "outbox.info", "LeaseToken": "info"})  # not a lease: skipped
    leases.upsert_item({"id": "outbox.info.lock"})
    leases.upsert_item({
        "id": "account_outbox_contacts..0", "version": 1, "LeaseToken": "0",
        "ContinuationToken": f'"{checkpoint}"', "Owner": None,
        "timestamp": "2024-01-01T00:00:00Z",
        "FeedRange": {"Range": {"min": "", "max": "FF"}}})
    create_contacts(contacts, 3)
    [backlog] = CosmosBacklogEstimator(contacts, leases, lease_prefix="account_").estimate()
    assert backlog.pending == 3
    assert backlog.lease == "0"
    assert (backlog.owner, backlog.checkpoint_at) == (None, "2024-01-01T00:00:00Z")


def test_a_change_that_raised_no_event_is_not_pending(
    relay_off: Stack, cosmos: CosmosClient
) -> None:
    """A write with an Idempotency-Key whose change raised no event records its answer in a
    transaction of its own: it is no event to relay, and the backlog does not count it."""
    db = cosmos.get_database_client("outbox")
    container = create_contacts_container(db, "idempotency-backlog")
    leases = db.create_container_if_not_exists("leases-idempotency",
                                               partition_key=PartitionKey("/id"))
    service = contacts_service(container)
    claim = Claim[Contact](scope="PATCH contacts/{id}", key="no-op", fingerprint="f",
                           answer=lambda c: Answer(200, {"version": c.version}))
    created = service.create(Contact.create(**CreateContact.model_validate(
        {"firstName": "Idem", "lastName": "Potent", "email": "idem@example.com",
         "companyName": "Keys"}).fields()))
    service.change_idempotent(created.aggregate.id, lambda c: None, claim=claim)
    changes = list(container.query_items_change_feed(start_time="Beginning"))
    assert sorted(c["type"] for c in changes) == ["contact", "domainEvent", "idempotencyRecord"]
    assert len({c["_lsn"] for c in changes}) == 2  # two transactions, one with an event
    [backlog] = CosmosBacklogEstimator(container, leases).estimate()
    assert backlog.pending == 1


@pytest.mark.timeout(60)
def test_a_store_that_hangs_is_a_store_unavailable_error(relay_off: Stack) -> None:
    """Translated at the adapter like every other read of the store (the status route answers
    503, not 500), within the client's timeouts."""
    assert relay_off.cosmos is not None
    client = CosmosClient.from_connection_string(
        relay_off.cosmos.connection_string, connection_verify=relay_off.cosmos.verify_tls,
        **client_options())
    contacts, leases = containers(client)
    estimator = CosmosBacklogEstimator(contacts, leases)
    estimator.estimate()
    with frozen(relay_off.cosmos.process), pytest.raises(StoreUnavailableError):
        estimator.estimate()


def test_latest_lsn_is_read_from_the_session_token_like_the_sdk_estimators() -> None:
    assert latest_lsn({"x-ms-session-token": "0:-1#42"}) == 42
    assert latest_lsn({"x-ms-session-token": "0:1#12#3=10,1:1#20#3=11"}) == 20
    assert latest_lsn({"lsn": "7"}) == 7
    assert latest_lsn({}) is None
