"""Sample v2 app with a session-enabled Service Bus topic trigger (copied into a temp dir as
function_app.py).

Every invocation appends one JSON line to SAMPLE_OUT: {"id", "session", "delivery", "seq",
"body", "props", "content_type", "ok"}. A message whose body has "fail_deliveries": n fails
its first n deliveries (DeliveryCount 1..n); "sleep": s sleeps s seconds first. SAMPLE_RETRY="fixed"
declares a fixed-delay retry policy of one retry. SAMPLE_SESSIONS="false": a subscription without
sessions. Each line has "start" and "end" (epoch seconds) of its invocation and the "topic" of its
function: ``on_message`` on SAMPLE_TOPIC, and one more function (``on_topic_<i>``, sessions, the
same subscription name) on each topic SAMPLE_TOPICS names (comma-separated), and one without
sessions (``on_plain_<i>``) on each topic SAMPLE_PLAIN_TOPICS names: one host serving several
tests, each on a topic of its own. A body with "together": {"dir": d, "n": n} waits (up to 30 s)
until n invocations with that dir have started, and its line says whether they did
("together"): invocations that ran at the same time. SAMPLE_DEAD_LETTERS="true": one more
function (``on_dead_letter``) on the subscription's dead-letter queue
(``%SAMPLE_SUBSCRIPTION%/$DeadLetterQueue``, as Azure binds one), its lines'
"dead_letter" true, with the dead letter's "reason".
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import azure.functions as func
from azure.functions.decorators.function_app import FunctionBuilder

from funcstack.deadlines import SHORT

app = func.FunctionApp()


def _retry(builder: FunctionBuilder) -> FunctionBuilder:
    if os.environ.get("SAMPLE_RETRY") != "fixed":
        return builder
    decorate = app.retry(strategy="fixed_delay", max_retry_count="1", delay_interval="00:00:01")
    result: FunctionBuilder = decorate(builder)
    return result


@_retry
@app.service_bus_topic_trigger(
    arg_name="msg",
    connection="ServiceBusConnection",
    topic_name="%SAMPLE_TOPIC%",
    subscription_name="%SAMPLE_SUBSCRIPTION%",
    is_sessions_enabled=os.environ.get("SAMPLE_SESSIONS", "true") == "true",
)
def on_message(msg: func.ServiceBusMessage) -> None:
    _handle(msg, os.environ["SAMPLE_TOPIC"])


def _handle(msg: func.ServiceBusMessage, topic: str) -> None:
    start = time.time()
    body: dict[str, Any] = json.loads(msg.get_body())
    delivery = int(msg.delivery_count or 0)
    ok = delivery > int(body.get("fail_deliveries", 0))
    line = {
        "topic": topic,
        "id": msg.message_id,
        "session": msg.session_id,
        "delivery": delivery,
        "seq": msg.sequence_number,
        "body": body,
        "props": msg.application_properties,
        "content_type": msg.content_type,
        "ok": ok,
        "pid": os.getpid(),
        "start": start,
    }
    time.sleep(float(body.get("sleep", 0)))
    if "together" in body:
        line["together"] = _together(body["together"]["dir"], int(body["together"]["n"]), msg)
    line["end"] = time.time()
    with Path(os.environ["SAMPLE_OUT"]).open("a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")
    if not ok:
        raise RuntimeError(f"failing delivery {delivery} of {msg.message_id}")


def _together(folder: str, n: int, msg: func.ServiceBusMessage) -> bool:
    """Say this invocation started; wait until ``n`` have (True), or SHORT (False)."""
    here = Path(folder)
    here.mkdir(parents=True, exist_ok=True)
    (here / str(msg.message_id)).touch()
    deadline = time.monotonic() + SHORT
    while len(list(here.iterdir())) < n:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _on(topic: str) -> Any:
    def handle(msg: func.ServiceBusMessage) -> None:
        _handle(msg, topic)

    return handle


for _setting, _name, _sessions in (
    ("SAMPLE_TOPICS", "on_topic", True),
    ("SAMPLE_PLAIN_TOPICS", "on_plain", False),
):
    for _i, _topic in enumerate(t for t in os.environ.get(_setting, "").split(",") if t):
        app.function_name(name=f"{_name}_{_i}")(
            app.service_bus_topic_trigger(
                arg_name="msg",
                connection="ServiceBusConnection",
                topic_name=_topic,
                subscription_name="%SAMPLE_SUBSCRIPTION%",
                is_sessions_enabled=_sessions,
            )(_on(_topic))
        )


if os.environ.get("SAMPLE_DEAD_LETTERS") == "true":

    def on_dead_letter(msg: func.ServiceBusMessage) -> None:
        line = {
            "topic": os.environ["SAMPLE_TOPIC"],
            "dead_letter": True,
            "id": msg.message_id,
            "delivery": int(msg.delivery_count or 0),
            "reason": msg.dead_letter_reason,
            "body": json.loads(msg.get_body()),
        }
        with Path(os.environ["SAMPLE_OUT"]).open("a", encoding="utf-8") as out:
            out.write(json.dumps(line) + "\n")

    app.function_name(name="on_dead_letter")(
        app.service_bus_topic_trigger(
            arg_name="msg",
            connection="ServiceBusConnection",
            topic_name="%SAMPLE_TOPIC%",
            subscription_name="%SAMPLE_SUBSCRIPTION%/$DeadLetterQueue",
        )(on_dead_letter)
    )
