"""`make status` takes the quarantined records from the running app's API (`/outbox/status`):
against the local stack's Contacts app, the count it shows is the API's, which is what the
quarantine lists as quarantined now (its rendering of a given answer: test_local_otel_files.py)."""

from __future__ import annotations

import pytest

from cosmos_outbox import telemetry
from cosmos_outbox.cosmos import CosmosDocumentStore
from cosmos_outbox.documents import EVENT_TYPE, read_feed
from cosmos_outbox.relay import Quarantine
from cosmos_outbox_testing import run_sync
from entrypoints.bootstrap import LEGACY_EVENTS
from tools.httpclient import Client
from tools.stack import Stack
from tools.status import Context, Summary, api_status, render

pytestmark = pytest.mark.integration

ADA = {
    "firstName": "Ada",
    "lastName": "Status",
    "email": "status@example.com",
    "companyName": "Engines",
}


def quarantined(stack: Stack, client: Client) -> str:
    """A contact's first event, put in the quarantine as the relay would: its event id."""
    created = client.request("POST", "/contacts", json_body=ADA)
    assert created.status == 201, created.body
    container = stack.contacts_container()
    [document] = container.query_items(
        "SELECT * FROM c WHERE c.type = @t",
        parameters=[{"name": "@t", "value": EVENT_TYPE}],
        partition_key=created.json()["id"],
    )
    [event] = read_feed([document], legacy=LEGACY_EVENTS)
    quarantine = Quarantine(CosmosDocumentStore(container), legacy=LEGACY_EVENTS)
    run_sync(quarantine.put(event, reason="set aside by the test"))  # type: ignore[arg-type]
    return str(document["id"])


def test_make_status_shows_the_records_quarantined_now_from_the_api(
    stack: Stack, client: Client
) -> None:
    quarantined(stack, client)
    listed = client.request("GET", "/outbox/quarantine?pageSize=100").json()["items"]
    now = sum(1 for item in listed if item["status"] == "quarantined")
    body, error = api_status(stack.api_url)
    assert error is None and body is not None
    assert body["quarantined"] == now >= 1
    screen = render(Summary(sums={telemetry.QUARANTINED: 99.0}), context=Context(api=body))
    assert f"quarantined events now     {now}  (records not resolved, now, from the API)" in screen
    assert "quarantine actions         99  " in screen
