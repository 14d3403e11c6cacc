"""A local-only control channel: create and delete entities while the endpoint runs.

The official emulator reads its entities from Config.json at start; Azure creates them through
the management API. Tests that provision entities per test (the SDK's own suites) use this
instead: one JSON request per line over TCP, one JSON reply per line::

    {"op": "create-queue", "name": "q1", "properties": {"RequiresSession": true}}
    {"op": "create-topic", "name": "t1", "properties": {...}}
    {"op": "create-subscription", "topic": "t1", "name": "s1", "properties": {...},
     "rules": [...]}
    {"op": "delete", "name": "q1"}
    -> {"ok": true, "warnings": [...]} | {"ok": false, "error": "..."}

``warnings``: one line per property the endpoint does not honour (``_entity_settings``), logged
by the endpoint and by ``control_request``.

Properties and rules use the keys of the emulator's Config.json (LockDuration,
MaxDeliveryCount, ...; ``Rules`` as in funcstack/servicebus/_filters.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from typing import Any

from funcstack.servicebus._broker import Broker
from funcstack.servicebus._config import queue_config, subscription_config, topic_config
from funcstack.servicebus._entity_settings import warnings_for
from funcstack.servicebus._filters import RuleError
from funcstack.servicebus._limits import PREMIUM

logger = logging.getLogger(__name__)


def apply(broker: Broker, request: dict[str, Any]) -> dict[str, Any]:
    op = str(request.get("op", ""))
    props = dict(request.get("properties") or {})
    name = str(request.get("name", ""))
    if not name:
        return {"ok": False, "error": "name is required"}
    kind = {
        "create-queue": "queue",
        "create-topic": "topic",
        "create-subscription": "subscription",
    }.get(op)
    label = f"{request.get('topic')}/{name}" if kind == "subscription" else name
    warnings = warnings_for([(kind, label, props)], premium=broker.tier is PREMIUM) if kind else []
    if op == "create-queue":
        broker.add_entity(queue_config(name, props, broker.tier))
    elif op == "create-topic":
        broker.add_entity(topic_config(name, props, tier=broker.tier))
    elif op == "create-subscription":
        try:
            sub = subscription_config(name, props, request.get("rules"))
            broker.add_subscription(str(request.get("topic", "")), sub)
        except RuleError as error:
            return {"ok": False, "error": str(error)}
        except KeyError:
            return {"ok": False, "error": f"topic {request.get('topic')!r} not found"}
    elif op == "delete":
        if not broker.remove_entity(name):
            return {"ok": False, "error": f"entity {name!r} not found"}
    else:
        return {"ok": False, "error": f"unknown op {op!r}"}
    logger.info("control: %s %s", op, name)
    for line in warnings:
        logger.warning("%s", line)
    return {"ok": True, "warnings": warnings}


async def serve_control(broker: Broker, host: str, port: int) -> tuple[asyncio.Server, int]:
    async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while line := await reader.readline():
                try:
                    reply = apply(broker, json.loads(line))
                except (ValueError, TypeError) as exc:
                    reply = {"ok": False, "error": str(exc)}
                writer.write(json.dumps(reply).encode() + b"\n")
                await writer.drain()
        finally:
            writer.close()

    server = await asyncio.start_server(on_client, host, port)
    return server, int(server.sockets[0].getsockname()[1])


def control_request(host: str, port: int, payload: dict[str, Any], timeout: float = 10.0) -> None:
    """Client side (public: ``funcstack.servicebus.control_request``): send one request to an
    endpoint's control channel (``--control-port``; ``ServiceBusEndpoint.control_port``), raise
    RuntimeError on an error reply, log its warnings."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(json.dumps(payload).encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    reply = json.loads(data or b"{}")
    if not reply.get("ok"):
        raise RuntimeError(f"service bus control {payload.get('op')}: {reply.get('error')}")
    for line in reply.get("warnings") or []:
        logger.warning("%s", line)
