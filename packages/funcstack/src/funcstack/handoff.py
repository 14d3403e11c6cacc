"""Endpoints one process started, handed to others: a test run's pytest-xdist controller starts
the endpoints its workers share and hands each worker their description (JSON-able data);
the worker makes the endpoint again from it and uses it as its own, without its process
(its process None): it never stops it, and the process that started it stops it.

``describe(endpoint)`` is the data; ``cosmos_from``, ``servicebus_from`` and ``azurite_from``
the endpoint again. ``hand_over(workerinput, key, endpoints)`` puts several endpoints' data in
a pytest-xdist worker's ``workerinput`` (from the controller's ``pytest_configure_node``), and
``handed(workerinput, key, kind)`` reads one back in the worker (None: not a worker, or nothing
handed). A Cosmos DB endpoint's certificate and authority are files (``LocalTls``),
named in the data; a Service Bus endpoint's control channel is a port, and the warnings its
start logged (the entity settings it does not honour) are kept. A handed endpoint is
``stopped`` when its port no longer listens.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, MutableMapping
from dataclasses import fields
from pathlib import Path
from typing import Any

from funcstack.cosmos import CosmosEndpoint, LocalTls
from funcstack.servicebus import ServiceBusEndpoint
from funcstack.services import Azurite

__all__ = ["azurite_from", "cosmos_from", "describe", "hand_over", "handed", "servicebus_from"]

#: What the handoff describes.
Endpoint = CosmosEndpoint | ServiceBusEndpoint | Azurite


def describe(endpoint: Endpoint) -> dict[str, Any]:
    """What another process needs to use ``endpoint``: its address, its ports, its key, its
    certificate's files."""
    if isinstance(endpoint, CosmosEndpoint):
        tls = endpoint.tls
        return {
            "endpoint": endpoint.endpoint,
            "key": endpoint.key,
            "verify_tls": endpoint.verify_tls,
            "port": endpoint.port,
            "tls": None
            if tls is None
            else {f.name: str(getattr(tls, f.name)) for f in fields(LocalTls)},
        }
    if isinstance(endpoint, ServiceBusEndpoint):
        return {
            "host": endpoint.host,
            "port": endpoint.port,
            "tls_port": endpoint.tls_port,
            "control_port": endpoint.control_port,
            "warnings": list(endpoint.warnings),
        }
    return {"ports": list(endpoint.ports)}


def cosmos_from(data: dict[str, Any]) -> CosmosEndpoint:
    """The Cosmos DB endpoint ``describe`` described, without its process."""
    tls = data["tls"]
    return CosmosEndpoint(
        endpoint=data["endpoint"],
        key=data["key"],
        verify_tls=data["verify_tls"],
        own_process=None,
        port=data["port"],
        tls=None if tls is None else LocalTls(**{k: Path(v) for k, v in tls.items()}),
        handed=True,
    )


def servicebus_from(data: dict[str, Any]) -> ServiceBusEndpoint:
    """The Service Bus endpoint ``describe`` described, without its process."""
    return ServiceBusEndpoint(
        host=data["host"],
        port=data["port"],
        process=None,
        tls_port=data["tls_port"],
        control_port=data["control_port"],
        warnings=[str(line) for line in data.get("warnings") or []],
        handed=True,
    )


def azurite_from(data: dict[str, Any]) -> Azurite:
    """The Azurite ``describe`` described, without its process."""
    blob, queue, table = data["ports"]
    return Azurite(ports=(blob, queue, table), handed=True)


def hand_over(
    workerinput: MutableMapping[str, Any], key: str, endpoints: Mapping[str, Endpoint]
) -> None:
    """``endpoints`` (by a kind of the caller's naming) described under ``key`` of a
    pytest-xdist worker's ``workerinput``, as JSON (what xdist sends a worker)."""
    workerinput[key] = json.dumps({kind: describe(e) for kind, e in endpoints.items()})


def handed(workerinput: Mapping[str, Any] | None, key: str, kind: str) -> dict[str, Any] | None:
    """The data of the endpoint of ``kind`` that ``hand_over`` put under ``key`` of this
    worker's ``workerinput`` (``getattr(config, "workerinput", None)``); None when this is not
    a worker or nothing was handed under ``key``. A kind not handed is a KeyError naming it."""
    if workerinput is None or key not in workerinput:
        return None
    endpoints: dict[str, dict[str, Any]] = json.loads(workerinput[key])
    if kind not in endpoints:
        raise KeyError(f"no {kind!r} endpoint handed under {key!r}: {sorted(endpoints)}")
    return endpoints[kind]
