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

Services started once for several test runs: ``write_services(path, cosmos, servicebus,
azurite)`` writes the three endpoints' data to a file (``funcstack exec`` does, for the command
it runs), and ``services_from(value)`` makes them again from the file that
``FUNCSTACK_SERVICES`` names: the pytest plugin's ``funcstack_services`` then uses them
(``LocalStack(shared_cosmos=..., shared_servicebus=..., shared_azurite=...)``) instead of
starting its own. A file missing or unreadable, data of another shape, an endpoint that no
longer listens: ``HandoffError`` naming the variable and its value.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, MutableMapping
from dataclasses import fields
from pathlib import Path
from typing import Any

from funcstack._activation import listened_on
from funcstack.cosmos import CosmosEndpoint, LocalTls
from funcstack.servicebus import ServiceBusEndpoint
from funcstack.services import Azurite

__all__ = [
    "SERVICES_VARIABLE",
    "HandoffError",
    "Services",
    "azurite_from",
    "cosmos_from",
    "describe",
    "hand_over",
    "handed",
    "servicebus_from",
    "services_from",
    "write_services",
]

#: The environment variable naming a file of running services (``write_services``), which the
#: pytest plugin's ``funcstack_services`` uses instead of starting its own.
SERVICES_VARIABLE = "FUNCSTACK_SERVICES"

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


class HandoffError(RuntimeError):
    """``FUNCSTACK_SERVICES`` names no usable services: which value, and why."""


#: Services started once for several runs: a Cosmos DB endpoint, a Service Bus endpoint with
#: its control channel, an Azurite.
Services = tuple[CosmosEndpoint, ServiceBusEndpoint, Azurite]


def write_services(
    path: Path, cosmos: CosmosEndpoint, servicebus: ServiceBusEndpoint, azurite: Azurite
) -> None:
    """The three endpoints' data (``describe``) in a JSON file, for ``services_from``."""
    if servicebus.control_port is None:
        raise ValueError("the Service Bus endpoint has no control channel (control=True)")
    data = {
        "cosmos": describe(cosmos),
        "servicebus": describe(servicebus),
        "azurite": describe(azurite),
    }
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def services_from(value: str | None = None, *, variable: str = SERVICES_VARIABLE) -> Services:
    """The endpoints of the file ``value`` names (None: ``$FUNCSTACK_SERVICES``), each
    listening; without their processes (``handed``): the process that started them stops
    them. ``HandoffError`` naming the variable and its value when the file is missing,
    unreadable or of another shape, or when an endpoint no longer listens."""
    if value is None:
        value = os.environ.get(variable, "")
    where = f"{variable}={value}"
    if not value:
        raise HandoffError(f"{where}: names no file of running services")
    try:
        data = json.loads(Path(value).read_text(encoding="utf-8"))
    except OSError as exc:
        raise HandoffError(f"{where}: cannot be read ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise HandoffError(f"{where}: not a services file (not JSON: {exc})") from None
    try:
        cosmos = cosmos_from(data["cosmos"])
        servicebus = servicebus_from(data["servicebus"])
        azurite = azurite_from(data["azurite"])
    except (KeyError, TypeError, ValueError) as exc:
        raise HandoffError(
            f"{where}: not a services file (funcstack.handoff.write_services'; "
            f"{type(exc).__name__}: {exc})"
        ) from None
    if servicebus.control_port is None:
        raise HandoffError(f"{where}: its Service Bus endpoint has no control channel")
    ports = [
        ("Cosmos DB", "127.0.0.1", cosmos.port),
        ("Service Bus", servicebus.host, servicebus.port),
        ("Service Bus control", servicebus.host, servicebus.control_port),
        ("Azurite", "127.0.0.1", azurite.ports[0]),
    ]
    gone = [f"{name} on port {port}" for name, host, port in ports if not listened_on(host, port)]
    if gone:
        raise HandoffError(
            f"{where}: not listening: {', '.join(gone)} (the services were stopped?)"
        )
    return cosmos, servicebus, azurite
