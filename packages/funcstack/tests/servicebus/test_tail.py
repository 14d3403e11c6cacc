"""The tail tool prints each event of every session, in order per session, from its own
subscription: the messages of ``every-message`` stay for their consumers."""

from __future__ import annotations

import io
from datetime import UTC, datetime

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from funcstack.servicebus.tail import print_arrivals

from .conftest import SUBSCRIPTION, Entities, Target

pytestmark = [pytest.mark.integration, pytest.mark.conformance]


def test_tail_prints_one_line_per_event(local_only: Target, own: Entities) -> None:
    with (
        ServiceBusClient.from_connection_string(local_only.connection_string) as client,
        client.get_topic_sender(own.topic, keep_alive=0) as sender,
    ):
        sender.send_messages(
            [
                ServiceBusMessage(
                    f'{{"v": {v}}}',
                    subject="ContactUpdated",
                    message_id=f"{sid}:{v}",
                    session_id=sid,
                    application_properties={"contactId": sid, "version": v},
                )
                for v in (1, 2)
                for sid in ("c-1", "c-2")
            ]
        )
    out = io.StringIO()
    printed = print_arrivals(
        local_only.connection_string,
        topic=own.topic,
        subscription="tail",
        wait_seconds=2,
        out=out,
        max_messages=4,
    )
    lines = out.getvalue().splitlines()
    assert printed == 4
    with ServiceBusClient.from_connection_string(local_only.connection_string) as client:
        untouched = [
            client.get_subscription_receiver(own.topic, SUBSCRIPTION, session_id=sid).peek_messages(
                max_message_count=10
            )
            for sid in ("c-1", "c-2")
        ]
    assert [len(peeked) for peeked in untouched] == [2, 2]
    for sid in ("c-1", "c-2"):
        mine = [line for line in lines if line.startswith(f"session={sid} ")]
        assert [f"id={sid}:1" in mine[0], f"id={sid}:2" in mine[1]] == [True, True]
    assert (
        'subject=ContactUpdated id=c-1:1 props={"contactId": "c-1", "version": 1} body={"v": 1}'
        in (lines[0] + lines[1] + lines[2] + lines[3])
    )


def test_tail_from_now_drops_what_was_enqueued_before_it_started(
    local_only: Target, own: Entities
) -> None:
    def send(versions: range) -> None:
        with (
            ServiceBusClient.from_connection_string(local_only.connection_string) as c,
            c.get_topic_sender(own.topic, keep_alive=0) as sender,
        ):
            sender.send_messages(
                [
                    ServiceBusMessage(f'{{"v": {v}}}', message_id=f"m{v}", session_id="c-1")
                    for v in versions
                ]
            )

    send(range(1, 3))
    started = datetime.now(UTC)
    send(range(3, 5))
    out = io.StringIO()
    printed = print_arrivals(
        local_only.connection_string,
        topic=own.topic,
        subscription="tail",
        wait_seconds=2,
        out=out,
        max_messages=2,
        since=started,
    )
    assert printed == 2
    assert [line.split(" id=")[1].split(" ")[0] for line in out.getvalue().splitlines()] == [
        "m3",
        "m4",
    ]
    with ServiceBusClient.from_connection_string(local_only.connection_string) as client:
        left = client.get_subscription_receiver(own.topic, "tail").peek_messages(
            max_message_count=10
        )
    assert left == []  # the earlier ones were received and dropped
