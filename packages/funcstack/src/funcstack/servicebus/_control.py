"""A local-only control channel: create and delete entities while the endpoint runs.

The official emulator reads its entities from Config.json at start; Azure creates them through
the management API. Tests that provision entities per test (the SDK's own suites) use this
instead: one JSON request per line over TCP, one JSON reply per line::

    {"op": "create-queue", "name": "q1", "properties": {"RequiresSession": true}}
    {"op": "create-topic", "name": "t1", "properties": {...}}
    {"op": "create-subscription", "topic": "t1", "name": "s1", "properties": {...},
     "rules": [...]}
    {"op": "delete", "name": "q1"}
    {"op": "declare-queue", "name": "q1", "properties": {...}}
    {"op": "declare-topic", "name": "t1", "properties": {...},
     "subscriptions": [{"name": "s1", "properties": {...}, "rules": [...]}]}
    -> {"ok": true, "warnings": [...]} | {"ok": false, "error": "..."}

``create-*`` replaces an entity of the name (its messages gone). ``declare-*`` makes an entity
that is not there and leaves one that is, when it has the declared settings: several test runs
on one endpoint declare theirs (``LocalStack(shared_servicebus=...)``). A topic's declared
subscriptions not there are added (another run's are left). An entity or subscription of the
name with other settings is an error naming it and the settings that differ (``created``: what
the request made).

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
from dataclasses import fields
from pathlib import Path
from typing import Any

from funcstack.servicebus._broker import Broker
from funcstack.servicebus._config import (
    ReceiverEntityConfig,
    SenderEntityConfig,
    queue_config,
    subscription_config,
    topic_config,
)
from funcstack.servicebus._entity_settings import warnings_for
from funcstack.servicebus._filters import Rule, RuleError, SqlFilter
from funcstack.servicebus._limits import PREMIUM

logger = logging.getLogger(__name__)


def apply(broker: Broker, request: dict[str, Any]) -> dict[str, Any]:
    op = str(request.get("op", ""))
    props = dict(request.get("properties") or {})
    name = str(request.get("name", ""))
    if not name:
        return {"ok": False, "error": "name is required"}
    if op in ("declare-queue", "declare-topic"):
        try:
            return _declare(broker, op.removeprefix("declare-"), name, props, request)
        except (RuleError, ValueError) as error:
            return {"ok": False, "error": str(error)}
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


def _rule_key(rule: Rule) -> tuple[str, object]:
    """A rule as compared: its name and its filter (a SQL filter by its expression)."""
    found = rule.filter
    return rule.name.lower(), found.expression if isinstance(found, SqlFilter) else found


def _differences(
    have: SenderEntityConfig | ReceiverEntityConfig,
    want: SenderEntityConfig | ReceiverEntityConfig,
) -> list[str]:
    """The settings (by field) in which an entity there differs from the one declared."""
    differ = []
    for item in fields(want):
        if item.name in ("name", "subscriptions"):
            continue
        mine, theirs = getattr(have, item.name), getattr(want, item.name)
        if item.name == "rules":
            mine, theirs = sorted(map(_rule_key, mine)), sorted(map(_rule_key, theirs))
        if mine != theirs:
            differ.append(item.name)
    return differ


def _declare(
    broker: Broker, kind: str, name: str, props: dict[str, Any], request: dict[str, Any]
) -> dict[str, Any]:
    """``declare-queue`` / ``declare-topic`` (the module's docstring)."""
    subs = [dict(s) for s in request.get("subscriptions") or []]
    if kind == "queue":
        want = queue_config(name, props, broker.tier)
    else:
        want = topic_config(name, props, tier=broker.tier)
        want.subscriptions = [
            subscription_config(
                str(s.get("name", "")), dict(s.get("properties") or {}), s.get("rules")
            )
            for s in subs
        ]
    declared = [(kind, name, props)] + [
        ("subscription", f"{name}/{s.get('name')}", dict(s.get("properties") or {})) for s in subs
    ]
    warnings = warnings_for(declared, premium=broker.tier is PREMIUM)
    there = broker.sender(name)
    if there is None:
        broker.add_entity(want)
        created = [name]
    else:
        if there.config.is_queue != want.is_queue:
            other = "queue" if there.config.is_queue else "topic"
            raise ValueError(f"{kind} {name!r} is declared, and a {other} of that name exists")
        differ = _differences(there.config, want)
        if kind == "queue":
            differ += _differences(there.config.subscriptions[0], want.subscriptions[0])
        if differ:
            raise ValueError(
                f"{kind} {name!r} exists with other settings: {', '.join(sorted(set(differ)))}"
            )
        created = []
        if kind == "topic":
            have = {s.name.lower(): s for s in there.config.subscriptions}
            for sub in want.subscriptions:
                old = have.get(sub.name.lower())
                if old is None:
                    broker.add_subscription(name, sub)
                    created.append(f"{name}/{sub.name}")
                elif differ := _differences(old, sub):
                    raise ValueError(
                        f"subscription {name}/{sub.name!r} exists with other settings: "
                        f"{', '.join(differ)}"
                    )
    logger.info("control: %s %s (made: %s)", f"declare-{kind}", name, ", ".join(created) or "none")
    for line in warnings:
        logger.warning("%s", line)
    return {"ok": True, "warnings": warnings, "created": created}


async def serve_control(
    broker: Broker, host: str, port: int, *, listening: int | None = None
) -> tuple[asyncio.Server, int]:
    """The control channel on ``host``:``port``, or on the inherited listening socket whose
    descriptor is ``listening`` (an endpoint started at its first connection)."""

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

    if listening is not None:
        server = await asyncio.start_server(on_client, sock=socket.socket(fileno=listening))
    else:
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


def declare_requests(
    config_file: Path, *, duplicate_window_seconds: float | None = None
) -> list[dict[str, Any]]:
    """The ``declare-*`` requests of the queues and topics (with their subscriptions) of an
    emulator-format config (its ``UserConfig``'s namespaces); ``duplicate_window_seconds`` as
    each one's window. A namespace of another tier than Standard is a ValueError: the tier
    is the endpoint's."""
    from funcstack.config import read_json

    data = read_json(config_file)
    requests: list[dict[str, Any]] = []
    window = duplicate_window_seconds
    for namespace in (data.get("UserConfig") or {}).get("Namespaces") or []:
        if str(namespace.get("Sku", "Standard")).lower() != "standard":
            raise ValueError(f"Sku {namespace['Sku']!r}: the tier is the endpoint's")
        for kind, entities in (("queue", "Queues"), ("topic", "Topics")):
            for entity in namespace.get(entities) or []:
                props = dict(entity.get("Properties") or {})
                if window is not None:
                    props["DuplicateDetectionHistoryTimeWindow"] = f"PT{window:g}S"
                request = {"op": f"declare-{kind}", "name": entity["Name"], "properties": props}
                if kind == "topic":
                    request["subscriptions"] = [
                        {
                            "name": sub["Name"],
                            "properties": sub.get("Properties") or {},
                            "rules": sub.get("Rules") or [],
                        }
                        for sub in entity.get("Subscriptions") or []
                    ]
                requests.append(request)
    return requests


def declare(
    host: str, port: int, config_file: Path, *, duplicate_window_seconds: float | None = None
) -> None:
    """Declare a config's queues and topics on a running endpoint (``declare_requests``,
    ``control_request``: RuntimeError naming an entity there with other settings)."""
    for request in declare_requests(config_file, duplicate_window_seconds=duplicate_window_seconds):
        control_request(host, port, request)
