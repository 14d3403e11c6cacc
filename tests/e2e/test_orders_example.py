"""examples/orders, an app that depends on cosmos-outbox by installation only, in a local
Functions host on the local stack with its own database, containers and topic (its
servicebus-config.json): its three routes answer as its README says, and its events reach its
topic with `aggregateType=order`, in order, once, received with the unmodified SDK."""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from azure.cosmos import CosmosClient, PartitionKey

from emulators.functions_host.launcher import RunningRunner
from emulators.launch import LocalServices
from tools.httpclient import Client
from tools.receive import count_at_least, drain

pytestmark = pytest.mark.e2e
APP = Path(__file__).resolve().parents[2] / "examples" / "orders"


@pytest.fixture
def orders(tmp_path: Path) -> Iterator[tuple[LocalServices, RunningRunner]]:
    stack = LocalServices(workdir=tmp_path)
    try:
        cosmos = stack.run_cosmos()
        servicebus = stack.run_servicebus(config=APP / "servicebus-config.json")
        values = json.loads((APP / "local.settings.sample.json").read_text())["Values"]
        warnings.filterwarnings("ignore", message="Unverified HTTPS request")
        client = CosmosClient.from_connection_string(cosmos.connection_string,
                                                     connection_verify=cosmos.verify_tls)
        db = client.create_database_if_not_exists(values["COSMOS_DATABASE"])
        db.create_container_if_not_exists(values["COSMOS_CONTAINER"],
                                          partition_key=PartitionKey("/partitionKey"),
                                          default_ttl=-1)
        db.create_container_if_not_exists(values["COSMOS_LEASE_CONTAINER"],
                                          partition_key=PartitionKey("/id"))
        values.update({"CosmosDBConnection": cosmos.connection_string,
                       "COSMOS_VERIFY_TLS": "false" if not cosmos.verify_tls else "true",
                       "FUNCTIONS_HOST_COSMOS_VERIFY_TLS": "false",
                       "ServiceBusConnection": servicebus.connection_string,
                       "FEED_POLL_DELAY_MS": "100"})
        runner = stack.run_host("orders", APP, settings=values)
        yield stack, runner
    finally:
        stack.stop()


def test_the_example_answers_its_routes_and_its_events_reach_its_topic_once_in_order(
    orders: tuple[LocalServices, RunningRunner],
) -> None:
    stack, runner = orders
    assert stack.servicebus is not None
    client = Client(runner.url)
    placed = client.request("POST", "/orders", json_body={"customerName": "Ada",
                                                          "totalCents": 1250})
    assert placed.status == 201, placed.body
    order = placed.json()
    assert placed.headers["location"] == f"/api/orders/{order['id']}"
    etag = placed.headers["etag"]
    read = client.request("GET", f"/orders/{order['id']}")
    assert (read.status, read.headers["etag"], read.json()["status"]) == (200, etag, "placed")
    stale = client.request("POST", f"/orders/{order['id']}/cancel",
                           headers={"If-Match": '"stale"'})
    assert stale.status == 412
    cancelled = client.request("POST", f"/orders/{order['id']}/cancel",
                               headers={"If-Match": etag})
    assert (cancelled.status, cancelled.json()["status"]) == (200, "cancelled")
    again = client.request("POST", f"/orders/{order['id']}/cancel")
    assert again.status == 409 and again.headers["content-type"].startswith(
        "application/problem+json")

    received = drain(stack.servicebus.connection_string, until=count_at_least(2), timeout=60,
                     topic="order-events", subscription="order-audit")
    # nothing more arrives: each event once
    received += drain(stack.servicebus.connection_string, until=lambda got: False, timeout=3,
                      topic="order-events", subscription="order-audit")
    assert [(r.subject, r.version, r.session_id) for r in received] == [
        ("OrderPlaced", 1, order["id"]), ("OrderCancelled", 2, order["id"])]
    for r in received:
        assert r.properties["aggregateType"] == "order"
        assert r.properties["orderId"] == r.session_id == r.body["orderId"]
        assert r.properties["cloudEvents_source"] == "/orders"
