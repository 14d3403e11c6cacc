"""Where one sequential request's time goes under `make run`: `POST /api/contacts` and
`GET /api/contacts/{id}` through the local Functions host, cut into the host, the worker, the
app and our library, the SDK, and the endpoint.

The stack is `make run`'s (Cosmos DB with its state kept in a file, Service Bus, Azurite, the
subscriber app projecting every event, telemetry exported to files, the relay polling every
second), on free ports; the Contacts app runs in both its shapes, each in a host of its own on
a container of its own (bench/throughput.py). One client (this process) sends one request
after another, each kind of request through each part in turn (so that the pipeline's work
behind the writes falls on every part alike), each part timed on its own:

- `sdk`: the bare SDK (`azure.cosmos.aio`) doing what the request does, on a container of its
  own: the 2-document transactional batch, or the point read; its wall time and its CPU time
  (this process's, one request at a time: the SDK's own work; the rest of its wall time is the
  wire and the endpoint);
- `function`: the app's function called in this process (the request object made here, no host,
  no worker), on the same SDK client as `sdk`, on the app's container -- its wall time beyond
  `sdk` is the app and our library;
- `host`: the request through the host, as the host logs it (`ms=`: from its head received to
  its answer written, the worker's invocation inside) -- beyond `function` is the worker: the
  Functions RPC messages both ways and the worker's runtime around the function;
- `http`: the client's wall time -- beyond `host` is the HTTP server of the host and the wire.

Medians of each (the parts are differences of medians: the figures of a typical request).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import azure.functions as func

from bench import throughput
from bench.stats import percentile
from cosmos_outbox import Services
from cosmos_outbox.cosmos import CosmosDocumentStore, cosmos_client
from cosmos_outbox.cosmos.aio import CosmosDocumentStore as AsyncCosmosDocumentStore
from cosmos_outbox.cosmos.aio import cosmos_client as async_cosmos_client
from cosmos_outbox.ports import MessagePublisher
from cosmos_outbox_testing import InvocationContext
from cosmos_outbox_testing.contracts import EventLoop
from funcstack.otel import ENV_VAR as OTEL_ENV_VAR
from tools.httpclient import Client
from tools.stack import Ports, Stack

_HOST_LINE = re.compile(
    r"http request method=(\S+) path=\S+ function=(\S+) status=\d+ "
    r"ms=([0-9.]+)"
)
KINDS = ("POST", "GET")


def _host_ms(log: Path, offset: int, function: str) -> list[float]:
    """The host's own times (ms) of `function`'s requests logged after `offset` bytes."""
    with log.open("rb") as f:
        f.seek(offset)
        text = f.read().decode(errors="replace")
    return [float(m.group(3)) for m in _HOST_LINE.finditer(text) if m.group(2) == function]


def _timed(samples: dict[str, list[float]], key: str, call: Callable[[], object]) -> None:
    wall, cpu = time.perf_counter(), time.process_time()
    call()
    samples.setdefault(f"{key}_cpu", []).append((time.process_time() - cpu) * 1000)
    samples.setdefault(f"{key}_wall", []).append((time.perf_counter() - wall) * 1000)


def measure(workdir: Path, *, n: int = 300) -> dict[str, Any]:
    """Each part of a POST and a GET, for the async app and its sync shape, on `make run`'s
    stack: `n` requests of each kind through each part, taking turns one request at a time (so
    that the pipeline's work behind the writes falls on every part alike)."""
    samples: dict[str, dict[str, list[float]]] = {
        f"{shape} {kind}": {} for shape in ("async", "sync") for kind in KINDS
    }
    with Stack(
        workdir=workdir,
        ports=Ports.free(),
        with_runner=False,
        with_azurite=True,
        with_subscriber=True,
        state_dir=workdir / "state",
        settings_overrides={OTEL_ENV_VAR: str(workdir / "otel")},
    ) as stack:
        setup = throughput._start(stack, workdir, relay=True)
        assert stack.cosmos is not None
        values = stack.settings()
        saved = dict(os.environ)
        loop = EventLoop()
        try:
            # The app's trigger settings are read when it is indexed (here, for each shape).
            os.environ.update(values)
            shapes = ("async", "sync")
            clients = {shape: Client(setup.hosts[f"app_{shape}"].url) for shape in shapes}
            logs = {"async": stack.log_path("runner"), "sync": stack.log_path("runner-sync")}
            targets = {
                shape: clients[shape]
                .request("POST", "/contacts", json_body=throughput.new_body())
                .json()["id"]
                for shape in clients
            }
            closing: list[Callable[[], object]] = []
            calls = {
                shape: _calls(
                    shape,
                    stack.cosmos.connection_string,
                    values,
                    setup,
                    clients[shape],
                    targets[shape],
                    loop,
                    closing,
                )
                for shape in shapes
            }
            for shape_calls in calls.values():  # everything built, connected and warm
                for call in shape_calls.values():
                    for _ in range(10):
                        call()
            offsets = {shape: logs[shape].stat().st_size for shape in logs}
            for _ in range(n):
                for shape, shape_calls in calls.items():
                    for (kind, part), call in shape_calls.items():
                        _timed(samples[f"{shape} {kind}"], part, call)
            time.sleep(0.5)  # the host's last lines written
            for shape in logs:
                for kind, function in (("POST", "create_contact"), ("GET", "get_contact")):
                    samples[f"{shape} {kind}"]["host_wall"] = _host_ms(
                        logs[shape], offsets[shape], function
                    )
            for client in clients.values():
                client.close()
            for close in closing:
                close()
        finally:
            loop.close()
            os.environ.clear()
            os.environ.update(saved)
    return {name: parts(s) for name, s in samples.items()} | {"n": n}


def _calls(
    shape: str,
    connection: str,
    values: dict[str, str],
    setup: Any,
    client: Client,
    target: str,
    loop: EventLoop,
    closing: list[Callable[[], object]],
) -> dict[tuple[str, str], Callable[[], object]]:
    """One request of each kind through each part, for one shape of the app. The floor is the
    SDK the shape runs on: its `aio` client on an event loop of its own, or its sync client in
    this thread; its batches on a container of its own (nothing relays them), its point reads
    of the app's contact. Its clients are built as the app builds its own (the same options:
    `cosmos_outbox.cosmos`), and the app called in this process runs on the same client, on the
    same loop (the hand-over to the loop is in both), so the SDK's part is the SDK as the app
    runs it and the app's part is the app alone."""
    from entrypoints.bootstrap import bootstrap

    template = throughput._contact_documents()
    database, contacts = (
        values["COSMOS_DATABASE"],
        (values["COSMOS_CONTAINER"] if shape == "async" else "contacts-sync"),
    )

    def batch() -> tuple[str, list[Any]]:
        return throughput._batch(template)

    def services(store: Any) -> Services:
        return Services(store=store, publisher=_no_publisher, token_secret=secrets.token_hex(16))

    if shape == "async":

        async def connect() -> Any:
            return async_cosmos_client(connection_string=connection)

        aio = loop.run(connect())
        closing.append(lambda: loop.run(aio.close()))
        floor = aio.get_database_client(database).get_container_client(setup.sdk_container)
        own = aio.get_database_client(database).get_container_client(contacts)
        on_aio = services(AsyncCosmosDocumentStore(own))
        app = _functions(bootstrap(lambda: on_aio))

        async def write() -> None:
            key, operations = batch()
            await floor.execute_item_batch(batch_operations=operations, partition_key=key)

        def sdk_post() -> None:
            loop.run(write())

        def sdk_get() -> None:
            loop.run(own.read_item(target, partition_key=target))

        def call(name: str, request: func.HttpRequest) -> func.HttpResponse:
            return cast(func.HttpResponse, loop.run(app[name](request, InvocationContext(name))))
    else:
        sync = cosmos_client(connection_string=connection)
        sync_floor = sync.get_database_client(database).get_container_client(setup.sdk_container)
        sync_own = sync.get_database_client(database).get_container_client(contacts)
        on_sync = services(CosmosDocumentStore(sync_own))
        sync_app = _functions(bootstrap(lambda: on_sync, asynchronous=False))

        def sdk_post() -> None:
            key, operations = batch()
            sync_floor.execute_item_batch(batch_operations=operations, partition_key=key)

        def sdk_get() -> None:
            sync_own.read_item(target, partition_key=target)

        def call(name: str, request: func.HttpRequest) -> func.HttpResponse:
            return cast(func.HttpResponse, sync_app[name](request, InvocationContext(name)))

    def function_post() -> None:
        request = func.HttpRequest(
            "POST",
            "http://localhost/api/contacts",
            headers={"content-type": "application/json"},
            body=json.dumps(throughput.new_body()).encode(),
        )
        assert call("create_contact", request).status_code == 201

    def function_get() -> None:
        request = func.HttpRequest(
            "GET", f"http://localhost/api/contacts/{target}", body=b"", route_params={"id": target}
        )
        assert call("get_contact", request).status_code == 200

    def http_post() -> None:
        assert client.request("POST", "/contacts", json_body=throughput.new_body()).status == 201

    def http_get() -> None:
        assert client.request("GET", f"/contacts/{target}").status == 200

    return {
        ("POST", "sdk"): sdk_post,
        ("POST", "function"): function_post,
        ("POST", "http"): http_post,
        ("GET", "sdk"): sdk_get,
        ("GET", "function"): function_get,
        ("GET", "http"): http_get,
    }


def _functions(app: func.FunctionApp) -> dict[str, Callable[..., Any]]:
    return {str(f.get_function_name()): f.get_user_function() for f in app.get_functions()}


def _no_publisher() -> MessagePublisher:
    raise AssertionError("nothing is relayed from this process: the hosts relay")


def parts(samples: dict[str, list[float]]) -> dict[str, float]:
    """The medians, and each part as the difference of two medians."""
    m = {key: statistics.median(values) for key, values in samples.items() if values}
    return {
        "total_ms": m["http_wall"],
        "p99_ms": percentile(samples["http_wall"], 99),
        "http_server_and_wire_ms": m["http_wall"] - m["host_wall"],
        "worker_ms": m["host_wall"] - m["function_wall"],
        "app_and_library_ms": m["function_wall"] - m["sdk_wall"],
        "app_and_library_cpu_ms": m["function_cpu"] - m["sdk_cpu"],
        "sdk_cpu_ms": m["sdk_cpu"],
        "endpoint_and_wire_ms": m["sdk_wall"] - m["sdk_cpu"],
        "function_ms": m["function_wall"],
        "sdk_ms": m["sdk_wall"],
    }


ROWS = (
    ("http_server_and_wire_ms", "the host's HTTP server and the wire (client to host)"),
    ("worker_ms", "the worker: RPC messages both ways, its runtime around the function"),
    ("app_and_library_ms", "the app and cosmos-outbox (in the function, beyond the SDK)"),
    ("sdk_cpu_ms", "the SDK (its CPU time)"),
    ("endpoint_and_wire_ms", "the endpoint and the wire (the SDK's wall time beyond its CPU)"),
    ("total_ms", "total, as the client sees it (median)"),
)


def markdown(result: dict[str, Any]) -> str:
    names = ("async POST", "sync POST", "async GET", "sync GET")
    lines = [
        "| part | " + " | ".join(f"{n.split()[1]}, {n.split()[0]} app" for n in names) + " |",
        "|---|" + "---|" * len(names),
    ]
    for key, label in ROWS:
        lines.append(f"| {label} | " + " | ".join(f"{result[n][key]:.2f}" for n in names) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        found = measure(Path(tmp))
        print(markdown(found))
        print(json.dumps(found, indent=1))
