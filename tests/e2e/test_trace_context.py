"""HTTP request -> event -> Service Bus message: one trace. The host gives the invocation the
request's trace context (`context.trace_context`), the events keep it, the message carries it."""

from __future__ import annotations

import pytest

from emulators.stack import Stack
from tests.e2e.subscriber import count_at_least, drain
from tests.httpclient import Client

pytestmark = pytest.mark.e2e

TRACE_ID = "5b8efff798038103d269b633813fc60c"


def test_a_posts_message_carries_the_trace_id_of_that_request(fresh_stack: Stack) -> None:
    client = Client(fresh_stack.api_url)
    try:
        response = client.request(
            "POST", "/contacts",
            json_body={"firstName": "T", "lastName": "Race", "email": "t@example.com",
                       "companyName": "Spans"},
            headers={"traceparent": f"00-{TRACE_ID}-eee19b7ec3c1b174-01"})
    finally:
        client.close()
    assert response.status == 201
    assert fresh_stack.servicebus is not None
    [message] = drain(fresh_stack.servicebus.connection_string, until=count_at_least(1),
                      timeout=60)
    assert message.properties["traceparent"].split("-")[1] == TRACE_ID
    assert message.properties["Diagnostic-Id"] == message.properties["traceparent"]
