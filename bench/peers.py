"""The outbox against what a team would write instead (issue 45): one app, one host, one worker
(`bench/peers_app.py`), its functions called in turns at 1, 8, 32 and 64 concurrent clients:

- **plain**: the document alone (`create_item`, `aio` SDK), the floor;
- **dual**: the dual write: the document, then the message sent in the request (`aio` sender,
  guarded by a lock);
- **outbox**: the transactional session: the document and its event in one batch;
- **tuned**, **batch1**, **batch3**: the plain write, the document as a batch of one, and the
  three documents the session writes as a batch written by hand, all on a client with the
  outbox's own transport options: plain → tuned is what those options are worth, tuned →
  batch1 what the endpoint's batch costs, batch1 → batch3 what the extra documents cost, batch3
  → outbox what the library costs.

The relay is not registered: the outbox's events wait in the container (it relays them outside
the request, on other instances in Azure; its CPU per event is `bench/relay_cpu.py`'s row). The
dual write's messages go to the topic (the Service Bus endpoint keeps them).

Each cell: N clients each sending one request after another for SECONDS after a warm-up; its
figure is the requests answered in the window. The functions take turns at each concurrency
(in one order, then the other), ROUNDS times; each cell's figure is its best round (other
processes on the same cores only ever take from it).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import aiohttp
from azure.cosmos import CosmosClient

from bench.throughput import Cell, _drive_async, _parts
from funcstack.functions_host import RunningRunner
from tools.provision import create_contacts_container
from tools.stack import ROOT, Ports, Stack

CLIENTS = (1, 8, 32, 64)
SECONDS = 2.5
ROUNDS = 2
VARIANTS = ("plain", "dual", "outbox", "tuned", "batch1", "batch3")
CONTAINER = "peers"
APP = Path(__file__).with_name("peers_app.py")


async def _cell(url: str, clients: int, seconds: float, parts: dict[str, int]) -> Cell:
    connector = aiohttp.TCPConnector(limit=0, force_close=False)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def send() -> bool:
            try:
                async with session.post(
                    url, data=b"{}", headers={"content-type": "application/json"}
                ) as reply:
                    await reply.read()
                    return reply.status == 201
            except aiohttp.ClientError:
                return False

        return await _drive_async(send, clients, seconds, parts)


def _until_created(url: str, timeout: float = 60.0) -> None:
    async def once() -> int:
        async with aiohttp.ClientSession() as session, session.post(url, data=b"{}") as reply:
            return reply.status

    deadline = time.monotonic() + timeout
    while asyncio.run(once()) != 201:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{url}: no 201")
        time.sleep(0.1)


@contextmanager
def _app(workdir: Path) -> Iterator[tuple[Stack, RunningRunner]]:
    """A stack (Cosmos DB, Service Bus) and the peers' app in a host of its own."""
    with Stack(
        workdir=workdir, ports=Ports.free(), with_runner=False, with_servicebus=True
    ) as stack:
        values = stack.settings()
        assert stack.cosmos is not None
        cosmos = CosmosClient.from_connection_string(stack.cosmos.connection_string)
        create_contacts_container(cosmos.get_database_client(values["COSMOS_DATABASE"]), CONTAINER)
        app_dir = workdir / "peers-app"
        app_dir.mkdir(parents=True, exist_ok=True)
        shutil.copy(APP, app_dir / "function_app.py")
        shutil.copy(ROOT / "host.json", app_dir / "host.json")
        host = stack.run_host("peers", app_dir, settings={**values, "COSMOS_CONTAINER": CONTAINER})
        for variant in VARIANTS:  # clients made, the container and the topic reached
            _until_created(f"{host.url}/{variant}")
        yield stack, host


def measure(
    workdir: Path,
    *,
    clients: tuple[int, ...] = CLIENTS,
    seconds: float = SECONDS,
    rounds: int = ROUNDS,
) -> dict[str, Any]:
    """Every function at every concurrency, in turns; each cell's best round, and the ratios."""
    best: dict[str, dict[int, dict[str, Any]]] = {v: {} for v in VARIANTS}
    with _app(workdir) as (stack, host):
        parts = _parts(stack, host)
        for r in range(rounds):
            for n in clients:
                for variant in VARIANTS if r % 2 == 0 else VARIANTS[::-1]:
                    row = asyncio.run(_cell(f"{host.url}/{variant}", n, seconds, parts)).row()
                    kept = best[variant].get(n)
                    if kept is None or row["per_s"] > kept["per_s"]:
                        best[variant][n] = row
                    print(
                        f"    {variant:7} {n:>3} clients: {row['per_s']:7.1f}/s, p50 "
                        f"{row['p50_ms']:6.1f} ms, p99 {row['p99_ms']:6.1f} ms"
                        + (f", {row['errors']} errors" if row["errors"] else ""),
                        flush=True,
                    )

    def ratio(a: str, b: str) -> dict[int, float]:
        return {n: best[a][n]["per_s"] / best[b][n]["per_s"] for n in clients}

    return {
        "cells": best,
        "clients": list(clients),
        "seconds": seconds,
        "rounds": rounds,
        "outbox_to_plain": ratio("outbox", "plain"),
        "outbox_to_dual": ratio("outbox", "dual"),
        "dual_to_plain": ratio("dual", "plain"),
        "where": {
            "client": ratio("tuned", "plain"),
            "batch": ratio("batch1", "tuned"),
            "documents": ratio("batch3", "batch1"),
            "library": ratio("outbox", "batch3"),
        },
    }


def markdown(result: dict[str, Any]) -> str:
    """Requests/s (p50 / p99 ms) per function and concurrency, the ratios, and where the
    outbox's time goes (each step's ratio)."""
    lines = [
        "| clients | plain | dual write | outbox | outbox ÷ plain | outbox ÷ dual "
        "| client options | batch ÷ create | 3 docs ÷ 1 | library ÷ its batch |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    cells, where = result["cells"], result["where"]
    for n in result["clients"]:

        def fmt(variant: str, n: int = n) -> str:
            c = cells[variant][n]
            return f"{c['per_s']:.0f}/s ({c['p50_ms']:.1f} / {c['p99_ms']:.1f})"

        lines.append(
            f"| {n} | {fmt('plain')} | {fmt('dual')} | {fmt('outbox')} "
            f"| {result['outbox_to_plain'][n]:.2f}x | {result['outbox_to_dual'][n]:.2f}x "
            f"| {where['client'][n]:.2f}x | {where['batch'][n]:.2f}x "
            f"| {where['documents'][n]:.2f}x | {where['library'][n]:.2f}x |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        outcome = measure(Path(tmp))
        print(markdown(outcome))
        print(json.dumps({k: v for k, v in outcome.items() if k != "cells"}, indent=1))
