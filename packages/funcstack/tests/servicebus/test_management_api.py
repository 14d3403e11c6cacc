"""The management API (funcstack/servicebus/_atom.py) through the SDK's own
``ServiceBusAdministrationClient``: a topic's subscriptions, a subscription's rules (Azure's
implicit ``$Default`` included), creating and deleting a rule, which the next message obeys.

The admin client speaks HTTPS to the connection string's host and port; the transport below (the
public azure-core transport, as a client of the development emulator uses it) sends it in plain
HTTP, which funcstack serves on its AMQP port."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from azure.core.exceptions import HttpResponseError, ResourceExistsError, ResourceNotFoundError
from azure.core.pipeline.transport import HttpRequest, RequestsTransport
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.management import (
    CorrelationRuleFilter,
    ServiceBusAdministrationClient,
    SqlRuleFilter,
    TrueRuleFilter,
)

from funcstack.servicebus._launcher import ServiceBusEndpoint

from .conftest import Target, entities, receive_all

pytestmark = [pytest.mark.integration]

#: Names of this module's own on the shared endpoint, which other modules use at the same time.
TOPIC = f"orders-{uuid.uuid4().hex[:8]}"
QUEUE = f"q-{uuid.uuid4().hex[:8]}"
TARGETED = "NOT EXISTS(outboxTarget) OR outboxTarget = 'targeted'"


class PlainHttp(RequestsTransport):  # type: ignore[misc]  # azure-core exports it lazily
    """The emulator's management API is plain HTTP (as the .NET SDK speaks it to the emulator)."""

    def send(self, request: HttpRequest, **kwargs: Any) -> Any:
        request.url = request.url.replace("https://", "http://", 1)
        return super().send(request, **kwargs)


@pytest.fixture(scope="module")
def endpoint(servicebus: Target) -> Iterator[ServiceBusEndpoint]:
    """Its queue and topic (subscriptions and rules as a config file declares them) on the
    shared endpoint, created on its control channel."""
    if servicebus.endpoint is None:
        pytest.skip("creates its topic on the local endpoint's control channel")
    subscriptions = [
        {"Name": "plain", "Properties": {}},
        {"Name": "targeted", "Properties": {}},  # the one whose rules a test changes
        {
            "Name": "urgent",
            "Rules": [
                {
                    "Name": "by-subject",
                    "Properties": {
                        "FilterType": "Correlation",
                        "CorrelationFilter": {"Label": "urgent", "Properties": {"kind": "a"}},
                    },
                }
            ],
        },
        {
            "Name": "high",
            "Rules": [
                {
                    "Name": "high",
                    "Properties": {"FilterType": "Sql", "SqlFilter": {"SqlExpression": "p > 5"}},
                }
            ],
        },
    ]
    namespace = {
        "Queues": [{"Name": QUEUE, "Properties": {}}],
        "Topics": [{"Name": TOPIC, "Properties": {}, "Subscriptions": subscriptions}],
    }
    with entities(servicebus.endpoint, namespace):
        yield servicebus.endpoint


@pytest.fixture(scope="module")
def admin(endpoint: ServiceBusEndpoint) -> Iterator[ServiceBusAdministrationClient]:
    client = ServiceBusAdministrationClient.from_connection_string(
        endpoint.connection_string, transport=PlainHttp(), retry_total=0
    )
    with client:
        yield client


def test_a_topics_subscriptions_and_their_rules(admin: ServiceBusAdministrationClient) -> None:
    names = ["plain", "targeted", "urgent", "high"]
    assert [s.name for s in admin.list_subscriptions(TOPIC)] == names
    [default] = admin.list_rules(TOPIC, "plain")
    assert (default.name, type(default.filter)) == ("$Default", TrueRuleFilter)
    [high] = admin.list_rules(TOPIC, "high")
    assert isinstance(high.filter, SqlRuleFilter)
    assert (high.name, high.filter.sql_expression) == ("high", "p > 5")
    [urgent] = admin.list_rules(TOPIC, "urgent")
    assert isinstance(urgent.filter, CorrelationRuleFilter)
    assert (urgent.filter.label, urgent.filter.properties) == ("urgent", {"kind": "a"})
    # paging as the SDK pages: $skip/$top and the feed's next link
    assert [s.name for s in admin.list_subscriptions(TOPIC, max_page_size=1)] == names


def test_what_it_does_not_have_is_an_error(admin: ServiceBusAdministrationClient) -> None:
    with pytest.raises(ResourceNotFoundError):
        list(admin.list_subscriptions("no-such-topic"))
    with pytest.raises(ResourceNotFoundError):
        list(admin.list_rules(TOPIC, "no-such-subscription"))
    with pytest.raises(HttpResponseError) as refused:
        admin.get_queue(QUEUE)  # not served: 501, never a silent success
    assert refused.value.status_code == 501


def received(endpoint: ServiceBusEndpoint, subscription: str, count: int) -> set[str]:
    """The ids of the `count` messages the subscription is expected to hold and of any more
    that come (`receive_all`; none expected: a non-event's window)."""
    with (
        ServiceBusClient.from_connection_string(endpoint.connection_string) as client,
        client.get_subscription_receiver(TOPIC, subscription) as receiver,
    ):
        return {
            str(m.message_id)
            for m in receive_all(receiver, count, f"{count} message(s) on {subscription}")
        }


def test_a_created_rule_and_a_deleted_default_decide_the_next_message(
    endpoint: ServiceBusEndpoint, admin: ServiceBusAdministrationClient
) -> None:
    created = admin.create_rule(TOPIC, "targeted", "outbox-target", filter=SqlRuleFilter(TARGETED))
    assert isinstance(created.filter, SqlRuleFilter)
    assert created.filter.sql_expression == TARGETED
    with pytest.raises(ResourceExistsError):
        admin.create_rule(TOPIC, "targeted", "outbox-target", filter=SqlRuleFilter(TARGETED))
    admin.delete_rule(TOPIC, "targeted", "$Default")
    assert [r.name for r in admin.list_rules(TOPIC, "targeted")] == ["outbox-target"]

    with (
        ServiceBusClient.from_connection_string(endpoint.connection_string) as client,
        client.get_topic_sender(TOPIC) as sender,
    ):
        sender.send_messages(
            [
                ServiceBusMessage("1", message_id="everyone"),
                ServiceBusMessage(
                    "2", message_id="mine", application_properties={"outboxTarget": "targeted"}
                ),
                ServiceBusMessage(
                    "3", message_id="theirs", application_properties={"outboxTarget": "high"}
                ),
            ]
        )
    assert received(endpoint, "targeted", 2) == {"everyone", "mine"}

    admin.delete_rule(TOPIC, "targeted", "outbox-target")  # no rule left: it receives nothing
    assert list(admin.list_rules(TOPIC, "targeted")) == []
    with (
        ServiceBusClient.from_connection_string(endpoint.connection_string) as client,
        client.get_topic_sender(TOPIC) as sender,
    ):
        sender.send_messages(ServiceBusMessage("4", message_id="after"))
    assert received(endpoint, "targeted", 0) == set()
    with pytest.raises(ResourceNotFoundError):
        admin.delete_rule(TOPIC, "targeted", "outbox-target")
