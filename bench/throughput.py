"""Concurrent clients: `POST /api/contacts` through the local Functions host, the Contacts app in
its async shape (the app's: `cosmos_outbox.aio.Outbox`, `async def` functions on the worker's
event loop, the SDKs' `aio` clients) and in its sync shape (`bootstrap(asynchronous=False)`:
plain functions on the worker's thread pool, the SDKs' sync clients), beside the floor: the bare
Cosmos DB SDK writing the same two documents (the contact and its event) in one transactional
batch, from threads (`azure.cosmos`) and from tasks (`azure.cosmos.aio`), on the same Cosmos DB
endpoint. The floor's clients have the options the app's have (`cosmos_outbox.cosmos`: the same
timeouts, and the environment's proxy settings read once, not on every request, when there
are none): the floor is the SDK as fast as the app gets it, nothing of ours in its way.

Each variant writes to a container of its own (created like the app's: the same partition key,
TTL and indexing policy); each app runs in a host of its own (one app per host, as in Azure),
both hosts up for the whole mode. N clients (1, 8, 32, 64) each send one request after another
for SECONDS; throughput is the requests answered inside that window (after a warm-up), with
the p50 and p99 of their latencies. The variants take turns at each concurrency (sync app, async
app, SDK threads, SDK aio, then the other way round), ROUNDS times; each cell's figure is the
round with the best throughput (other processes on the same cores only ever take from it).

Two modes, each on a stack of its own:

- `api`: the API alone: the relay's trigger disabled (`AzureWebJobs.relay_events.Disabled`, as
  the Functions host allows), no Service Bus;
- `pipeline`: the whole pipeline live, as `make run` has it: each app's relay on its container's
  change feed (FEED_POLL_DELAY_MS 1000, the sample's), the Service Bus endpoint, the subscriber
  app projecting every event into its container. The subscriber falls behind at these rates and
  keeps working through the later cells, the floor's too: that is the pipeline on two cores.

The load generator (this process) is one event loop of aiohttp clients for the apps and of the
SDK's aio client for its floor, the SDK's sync client on N threads for the threads floor; its
CPU per request is reported beside each cell (`client_cpu_us`), with the CPU per request of the
host, its worker and the Cosmos DB endpoint, so what bounds a cell can be read off it.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import shutil
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from azure.cosmos import ContainerProxy, CosmosClient

from bench.stats import percentile
from cosmos_outbox.cosmos import cosmos_client
from cosmos_outbox.cosmos.aio import cosmos_client as async_cosmos_client
from cosmos_outbox.documents import aggregate_document, event_documents
from domain.contact import Contact
from domain.values import Company, Name
from funcstack.functions_host import RunningRunner
from tools.provision import create_contacts_container
from tools.stack import ROOT, Ports, Stack

CLIENTS = (1, 8, 32, 64)
SECONDS = 2.5
WARMUP_SECONDS = 0.5
ROUNDS = 2
VARIANTS = ("app_sync", "app_async", "sdk_threads", "sdk_aio")
BODY = {
    "firstName": "Ada",
    "lastName": "Lovelace",
    "email": "ada@example.com",
    "companyName": "Engines",
}
#: The sync shape's app folder: this file as its function_app.py, the repository's host.json.
SYNC_APP = '''"""The Contacts app in its sync shape (bench/throughput.py)."""

from entrypoints.bootstrap import bootstrap

app = bootstrap(asynchronous=False)
'''
RELAY_OFF = {"AzureWebJobs.relay_events.Disabled": "true"}
_NEXT = itertools.count()


def new_body() -> dict[str, str]:
    """`BODY` with an address of its own: every request's address is checked anew, as a
    client's would be (the app keeps the addresses it last checked)."""
    return {**BODY, "email": f"ada.{next(_NEXT)}@example.com"}


@dataclass
class Cell:
    """One variant at one concurrency: requests answered in the window and their latencies."""

    clients: int
    seconds: float
    latencies_ms: list[float]
    errors: int
    cpu_us: dict[str, float]

    def row(self) -> dict[str, Any]:
        return {
            "clients": self.clients,
            "per_s": len(self.latencies_ms) / self.seconds,
            "p50_ms": percentile(self.latencies_ms, 50),
            "p99_ms": percentile(self.latencies_ms, 99),
            "errors": self.errors,
            "cpu_us_per_request": self.cpu_us,
        }


def _contact_documents() -> tuple[dict[str, Any], dict[str, Any]]:
    """The two documents a create writes (made once: each batch copies them with new ids, so
    the floor's client spends nothing but the SDK's own work on them)."""
    contact = Contact.create(
        name=Name(first_name="Ada", last_name="Lovelace"),
        email="ada@example.com",
        company=Company(company_name="Engines"),
    )
    [event] = event_documents(contact, ttl_seconds=864000)
    return aggregate_document(contact), event


def _batch(template: tuple[dict[str, Any], dict[str, Any]]) -> tuple[str, list[Any]]:
    contact_id = str(uuid.uuid4())
    contact = {**template[0], "id": contact_id, "partitionKey": contact_id}
    event = {
        **template[1],
        "id": str(uuid.uuid4()),
        "partitionKey": contact_id,
        "aggregateId": contact_id,
    }
    return contact_id, [("create", (contact,)), ("create", (event,))]


# -- CPU of the processes ------------------------------------------------------------------------


def _cpu_of(pid: int) -> float:
    """User + system CPU seconds of one process (all its threads; Linux /proc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            found += [int(c) for c in (task / "children").read_text().split()]
    except (FileNotFoundError, ProcessLookupError):
        pass
    return found


def _parts(stack: Stack, host: RunningRunner | None) -> dict[str, int]:
    """The processes whose CPU a cell reports: the host and its worker (when the cell goes
    through one), the Cosmos DB endpoint, and the load generator (this process)."""
    assert stack.cosmos is not None
    parts = {"client": os.getpid(), "cosmos": stack.cosmos.started().pid}
    if host is not None:
        parts["host"] = host.process.pid
        workers = _children(host.process.pid)
        if workers:
            parts["worker"] = workers[0]
    return parts


@contextmanager
def _cpu_per_request(
    parts: dict[str, int], out: dict[str, float], requests: Callable[[], int]
) -> Iterator[None]:
    before = {name: _cpu_of(pid) for name, pid in parts.items()}
    before["client"] = time.process_time()
    yield
    n = max(1, requests())
    for name, pid in parts.items():
        spent = (time.process_time() if name == "client" else _cpu_of(pid)) - before[name]
        out[name] = spent / n * 1e6


# -- the load ------------------------------------------------------------------------------------


async def _drive_async(
    send: Callable[[], Awaitable[bool]], clients: int, seconds: float, parts: dict[str, int]
) -> Cell:
    """`clients` tasks, each sending one request after another; the window opens after the
    warm-up and closes `seconds` later."""
    loop = asyncio.get_running_loop()
    start = loop.time() + WARMUP_SECONDS
    end = start + seconds
    latencies: list[float] = []
    errors = [0]

    async def client() -> None:
        while (began := loop.time()) < end:
            ok = await send()
            done = loop.time()
            if began >= start and done <= end:
                if ok:
                    latencies.append((done - began) * 1000)
                else:
                    errors[0] += 1

    cpu: dict[str, float] = {}
    tasks = [asyncio.ensure_future(client()) for _ in range(clients)]
    await asyncio.sleep(WARMUP_SECONDS)
    with _cpu_per_request(parts, cpu, lambda: len(latencies)):
        await asyncio.sleep(seconds)
    await asyncio.gather(*tasks)
    return Cell(clients, seconds, latencies, errors[0], cpu)


def _drive_threads(
    send: Callable[[], bool], clients: int, seconds: float, parts: dict[str, int]
) -> Cell:
    """`_drive_async` with `clients` threads."""
    start = time.perf_counter() + WARMUP_SECONDS
    end = start + seconds
    latencies: list[float] = []
    errors: list[int] = []

    def client() -> None:
        while (began := time.perf_counter()) < end:
            ok = send()
            done = time.perf_counter()
            if began >= start and done <= end:
                if ok:
                    latencies.append((done - began) * 1000)
                else:
                    errors.append(1)

    cpu: dict[str, float] = {}
    with ThreadPoolExecutor(clients) as pool:
        futures = [pool.submit(client) for _ in range(clients)]
        time.sleep(max(0.0, start - time.perf_counter()))
        with _cpu_per_request(parts, cpu, lambda: len(latencies)):
            time.sleep(max(0.0, end - time.perf_counter()))
        for future in futures:
            future.result()
    return Cell(clients, seconds, latencies, len(errors), cpu)


async def _http_cell(url: str, clients: int, seconds: float, parts: dict[str, int]) -> Cell:
    headers = {"content-type": "application/json"}
    connector = aiohttp.TCPConnector(limit=0, force_close=False)
    async with aiohttp.ClientSession(connector=connector) as session:
        target = f"{url}/contacts"

        async def send() -> bool:
            try:
                async with session.post(
                    target, data=json.dumps(new_body()).encode(), headers=headers
                ) as reply:
                    await reply.read()
                    return reply.status == 201
            except aiohttp.ClientError:
                return False

        return await _drive_async(send, clients, seconds, parts)


async def _sdk_aio_cell(
    connection: str,
    database: str,
    container: str,
    clients: int,
    seconds: float,
    parts: dict[str, int],
) -> Cell:
    template = _contact_documents()
    async with async_cosmos_client(connection_string=connection) as client:
        proxy = client.get_database_client(database).get_container_client(container)

        async def send() -> bool:
            key, operations = _batch(template)
            await proxy.execute_item_batch(batch_operations=operations, partition_key=key)
            return True

        await send()  # the account and the container read once, before the window
        return await _drive_async(send, clients, seconds, parts)


def _sdk_threads_cell(
    proxy: ContainerProxy, clients: int, seconds: float, parts: dict[str, int]
) -> Cell:
    # More threads than the SDK's connection pool (10): urllib3 says so for each request.
    logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)
    template = _contact_documents()

    def send() -> bool:
        key, operations = _batch(template)
        proxy.execute_item_batch(batch_operations=operations, partition_key=key)
        return True

    return _drive_threads(send, clients, seconds, parts)


# -- the stack -----------------------------------------------------------------------------------


@dataclass
class _Setup:
    stack: Stack
    hosts: dict[str, RunningRunner]
    database: str
    sdk_container: str


def _start(stack: Stack, workdir: Path, *, relay: bool) -> _Setup:
    """Both apps' hosts and the floor's container on a started stack (no runner of its own)."""
    values = stack.settings()
    assert stack.cosmos is not None
    cosmos = CosmosClient.from_connection_string(stack.cosmos.connection_string)
    database = cosmos.get_database_client(values["COSMOS_DATABASE"])
    for name in ("contacts-sync", "sdk-floor"):
        create_contacts_container(database, name)
    extra = {} if relay else RELAY_OFF
    sync_dir = workdir / "contacts-sync"
    sync_dir.mkdir(parents=True, exist_ok=True)
    (sync_dir / "function_app.py").write_text(SYNC_APP)
    shutil.copy(ROOT / "host.json", sync_dir / "host.json")
    hosts = {
        "app_async": stack.run_host("runner", ROOT, settings={**values, **extra}),
        "app_sync": stack.run_host(
            "runner-sync",
            sync_dir,
            extra_import_paths=[ROOT],
            settings={
                **values,
                **extra,
                "COSMOS_CONTAINER": "contacts-sync",
                "COSMOS_LEASE_CONTAINER": "leases-sync",
            },
        ),
    }
    for host in hosts.values():  # dependencies built, store reached
        _until_created(host.url)
    return _Setup(stack, hosts, values["COSMOS_DATABASE"], "sdk-floor")


def _until_created(url: str, timeout: float = 60.0) -> None:
    async def once() -> int:
        async with (
            aiohttp.ClientSession() as session,
            session.post(f"{url}/contacts", json=new_body()) as reply,
        ):
            return reply.status

    deadline = time.monotonic() + timeout
    while asyncio.run(once()) != 201:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{url}: no 201 on POST /contacts")
        time.sleep(0.1)


def _cell(setup: _Setup, variant: str, clients: int, seconds: float) -> Cell:
    stack = setup.stack
    assert stack.cosmos is not None
    if variant.startswith("app_"):
        host = setup.hosts[variant]
        return asyncio.run(_http_cell(host.url, clients, seconds, _parts(stack, host)))
    parts = _parts(stack, None)
    if variant == "sdk_aio":
        return asyncio.run(
            _sdk_aio_cell(
                stack.cosmos.connection_string,
                setup.database,
                setup.sdk_container,
                clients,
                seconds,
                parts,
            )
        )
    proxy = (
        cosmos_client(connection_string=stack.cosmos.connection_string)
        .get_database_client(setup.database)
        .get_container_client(setup.sdk_container)
    )
    proxy.read()  # the account and the container read once, before the window
    return _sdk_threads_cell(proxy, clients, seconds, parts)


def run_mode(
    workdir: Path,
    *,
    pipeline: bool,
    clients: tuple[int, ...] = CLIENTS,
    seconds: float = SECONDS,
    rounds: int = ROUNDS,
    variants: tuple[str, ...] = VARIANTS,
) -> dict[str, Any]:
    """Every variant at every concurrency on one stack; each cell's best round."""
    best: dict[str, dict[int, dict[str, Any]]] = {v: {} for v in variants}
    with Stack(
        workdir=workdir,
        ports=Ports.free(),
        with_runner=False,
        with_servicebus=pipeline,
        with_subscriber=pipeline,
    ) as stack:
        setup = _start(stack, workdir, relay=pipeline)
        for r in range(rounds):
            for n in clients:
                # Each round the other way round: no variant always runs right after the
                # apps' writes (with the pipeline live, their events are still being relayed
                # and projected during the next cells).
                for variant in variants if r % 2 == 0 else variants[::-1]:
                    row = _cell(setup, variant, n, seconds).row()
                    kept = best[variant].get(n)
                    if kept is None or row["per_s"] > kept["per_s"]:
                        best[variant][n] = row
                    print(
                        f"    {variant:12} {n:>3} clients: {row['per_s']:7.1f}/s, p50 "
                        f"{row['p50_ms']:6.1f} ms, p99 {row['p99_ms']:6.1f} ms"
                        + (f", {row['errors']} errors" if row["errors"] else ""),
                        flush=True,
                    )
    ratios = {}
    if "sdk_aio" in best:
        ratios = {
            v: {n: best[v][n]["per_s"] / best["sdk_aio"][n]["per_s"] for n in clients}
            for v in variants
            if v != "sdk_aio"
        }
    return {
        "cells": best,
        "ratio_to_sdk_aio": ratios,
        "seconds": seconds,
        "rounds": rounds,
        "clients": list(clients),
    }


def measure(workdir: Path, *, seconds: float = SECONDS, rounds: int = ROUNDS) -> dict[str, Any]:
    """Both modes: the API alone, then the whole pipeline live."""
    out: dict[str, Any] = {}
    for mode, pipeline in (("api", False), ("pipeline", True)):
        print(f"  {mode}:", flush=True)
        started = time.monotonic()
        out[mode] = run_mode(workdir / mode, pipeline=pipeline, seconds=seconds, rounds=rounds)
        out[mode]["wall_s"] = time.monotonic() - started
    return out


def markdown(result: dict[str, Any]) -> str:
    """The table of one mode: per concurrency, each variant's requests/s (p50/p99 ms) and the
    apps' ratios to the SDK's aio batch."""
    lines = [
        "| clients | the app, sync | the app, async | bare SDK, threads | bare SDK, aio "
        "| sync ÷ aio | async ÷ aio |",
        "|---|---|---|---|---|---|---|",
    ]
    cells, ratios = result["cells"], result["ratio_to_sdk_aio"]
    for n in result["clients"]:

        def fmt(variant: str, n: int = n) -> str:
            c = cells[variant][n]
            return f"{c['per_s']:.0f}/s ({c['p50_ms']:.1f} / {c['p99_ms']:.1f})"

        lines.append(
            f"| {n} | {fmt('app_sync')} | {fmt('app_async')} | {fmt('sdk_threads')} "
            f"| {fmt('sdk_aio')} | {ratios['app_sync'][n]:.2f} "
            f"| {ratios['app_async'][n]:.2f} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        modes = sys.argv[1:] or ["api", "pipeline"]
        for mode in modes:
            result = run_mode(Path(tmp) / mode, pipeline=mode == "pipeline")
            print(markdown(result))
            print(json.dumps({k: v for k, v in result.items() if k != "cells"}, indent=1))
