"""HTTP request -> event -> Service Bus message: one trace. The host gives the invocation the
request's trace context (`context.trace_context`), the events keep it, the message carries it
(locally, and on a deployed app: `--deployed`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from cosmos_outbox import telemetry as names
from funcstack.cosmos import CosmosEndpoint
from funcstack.deadlines import SHORT
from funcstack.otel import ENV_VAR as OTEL_ENV_VAR
from funcstack.otel import METRICS_FILE, TRACES_FILE
from funcstack.servicebus import ServiceBusEndpoint
from tools.receive import Received, count_at_least
from tools.stack import SERVICE_NAMES, Ports, Stack
from tools.status import summarise
from tools.target import LocalTarget, Target, receive

pytestmark = pytest.mark.e2e

TRACE_ID = "5b8efff798038103d269b633813fc60c"


def post_and_receive_one(target: Target) -> Received:
    """POST one contact under TRACE_ID and receive its message from the topic."""
    client = target.client()
    try:
        response = client.request(
            "POST",
            "/contacts",
            json_body={
                "firstName": "T",
                "lastName": "Race",
                "email": "t@example.com",
                "companyName": "Spans",
            },
            headers={"traceparent": f"00-{TRACE_ID}-eee19b7ec3c1b174-01"},
        )
    finally:
        client.close()
    assert response.status == 201
    contact = response.json()["id"]
    [message] = receive(target, until=count_at_least(1), timeout=SHORT, sessions=[contact])
    return message


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory,
    shared_cosmos: CosmosEndpoint,
    shared_servicebus: ServiceBusEndpoint,
) -> Iterator[Stack]:
    """The module's stack, its worker exporting to files (`make run`'s telemetry path): the
    second test reads them once it has stopped it."""
    folder = tmp_path_factory.mktemp("traced")
    with Stack(
        shared_cosmos=shared_cosmos,
        shared_servicebus=shared_servicebus,
        workdir=folder / "stack",
        ports=Ports.free(),
        # the app's own feed poll delay (1 s): no test here times the relay
        settings_overrides={OTEL_ENV_VAR: str(folder / "otel")},
    ) as stack:
        yield stack


def test_a_posts_message_carries_the_trace_id_of_that_request(relay_target: Target) -> None:
    message = post_and_receive_one(relay_target)
    assert message.properties["traceparent"].split("-")[1] == TRACE_ID
    assert message.properties["Diagnostic-Id"] == message.properties["traceparent"]


@pytest.mark.local_stack("the local worker's telemetry files")
def test_the_local_worker_exports_the_relays_telemetry_to_files(stack: Stack) -> None:
    """`make run`'s telemetry path: FUNCTIONS_HOST_OTEL_DIR makes the worker process install the
    file exporters (funcstack/otel.py), so the relay's metrics and its PRODUCER span, linked
    to the request's trace, reach `.stack/otel` and `make status` can read them."""
    otel_dir = Path(stack.settings()[OTEL_ENV_VAR])
    post_and_receive_one(LocalTarget(stack))
    stack.stop()
    # The stack has stopped: the worker flushed on its way out.
    summary = summarise((otel_dir / METRICS_FILE).read_text("utf-8").splitlines())
    assert summary.sums[names.SENT_MESSAGES] >= 1
    assert summary.lag.count >= 1
    resources = [
        rs
        for line in (otel_dir / TRACES_FILE).read_text("utf-8").splitlines()
        for rs in json.loads(line)["resourceSpans"]
    ]
    spans = [span for rs in resources for ss in rs["scopeSpans"] for span in ss["spans"]]
    # The service name is OpenTelemetry's OTEL_SERVICE_NAME, set per app by the stack.
    assert {
        a["value"]["stringValue"]
        for rs in resources
        for a in rs["resource"]["attributes"]
        if a["key"] == "service.name"
    } == {SERVICE_NAMES["runner"]}
    producers = [s for s in spans if s.get("kind") == 4]  # SPAN_KIND_PRODUCER
    assert producers
    assert any(link["traceId"] == TRACE_ID for s in producers for link in s.get("links", []))
