"""Cosmos throttling and outages injected for real at the endpoint: the SDK's own retries
absorb short bursts; beyond them the API answers 429/503 with Retry-After and writes nothing.

A fault is the endpoint's, not a database's: these tests' stack is not on the run's shared
Cosmos DB endpoint (it serves the other workers' stacks at the same time) but on the test
process's faulted one (`faulted_cosmos` of tests/conftest.py), in a database of its own, which
the Idempotency-Key module freezes after or before this one, never at once (one xdist unit:
tools/schedule.py); each test clears its faults before it ends."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from funcstack.cosmos import CosmosEndpoint
from funcstack.servicebus import ServiceBusEndpoint
from tools.httpclient import Client
from tools.stack import Ports, Stack
from tools.target import LocalTarget

pytestmark = [
    pytest.mark.integration,
    pytest.mark.local_stack("it injects faults at a Cosmos DB endpoint of the test process's"),
]

ADA = {"firstName": "Thr", "lastName": "Ottle", "email": "t@example.com", "companyName": "C"}


@pytest.fixture(scope="module")
def own_stack(
    tmp_path_factory: pytest.TempPathFactory,
    faulted_cosmos: CosmosEndpoint,
    shared_servicebus: ServiceBusEndpoint,
) -> Iterator[Stack]:
    """The Contacts app on the faulted Cosmos DB endpoint, in a database of its own; as the
    session stack's, its feed polled every 5 s and its backlog timer idle (nothing here waits
    for the relay)."""
    with Stack(
        workdir=Path(tmp_path_factory.mktemp("faults")),
        ports=Ports.free(),
        shared_cosmos=faulted_cosmos,
        shared_servicebus=shared_servicebus,
        settings_overrides={
            "FEED_POLL_DELAY_MS": "5000",
            "BACKLOG_ESTIMATE_SCHEDULE": "0 0 0 1 1 *",
        },
    ) as s:
        yield s


@pytest.fixture
def client(own_stack: Stack) -> Iterator[Client]:
    c = LocalTarget(own_stack).client()
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def faults(own_stack: Stack) -> Iterator[Stack]:
    stack = own_stack
    assert stack.cosmos is not None
    try:
        yield stack
    finally:
        stack.cosmos.clear_faults()


def contact_count(client: Client) -> int:
    total, token = 0, ""
    for _ in range(1000):
        headers: dict[str, str] = {"x-continuation-token": token} if token else {}
        page = client.request("GET", "/contacts?pageSize=100", headers=headers).json()
        total += len(page["items"])
        token = page["continuationToken"] or ""
        if not token:
            return total
    raise AssertionError("too many pages")


def test_a_short_throttling_burst_is_absorbed_by_the_sdk_retries(
    faults: Stack, client: Client
) -> None:
    assert faults.cosmos is not None
    faults.cosmos.inject_fault(429, count=3, retry_after_ms=10, methods=["POST"])
    assert client.request("POST", "/contacts", json_body=ADA).status == 201


def test_sustained_throttling_is_429_with_retry_after_and_nothing_written(
    faults: Stack, client: Client
) -> None:
    assert faults.cosmos is not None
    before = contact_count(client)
    faults.cosmos.inject_fault(429, count=1000, retry_after_ms=1500, methods=["POST"])
    reply = client.request("POST", "/contacts", json_body=ADA)
    faults.cosmos.clear_faults()
    assert reply.status == 429, reply.body
    assert reply.header("retry-after") == "2"
    assert reply.json()["title"] == "Too Many Requests"
    assert contact_count(client) == before


def test_an_unavailable_store_is_503_with_retry_after(faults: Stack, client: Client) -> None:
    assert faults.cosmos is not None
    faults.cosmos.inject_fault(503, count=1000, methods=["GET"])
    reply = client.request("GET", "/contacts/00000000-0000-0000-0000-000000000001")
    health = client.request("GET", "/health")
    faults.cosmos.clear_faults()
    assert reply.status == 503, reply.body
    assert reply.header("retry-after")
    assert health.status == 503
