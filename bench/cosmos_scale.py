"""The local Cosmos DB endpoint at scale (issue 45 item 3): a write with a million documents
kept ÷ the same on a fresh endpoint, the restart with them kept, the endpoint's memory.

Four endpoints: one with a state folder as `funcstack run` gives it (every acknowledged write
in the journal before the answer) started on DOCS documents of about 1 KB (contacts: names,
e-mail, company, a 700-character description) in one container (`/partitionKey`, defaultTtl
-1, as the app's); and three fresh ones: the same, the same with `--state-fsync` (an
fdatasync shared by the answers waiting at once), and one keeping nothing (in memory, as in
tests). Through the SDK (`azure.cosmos.aio`, one client, CONCURRENCY tasks creating one
document after another, the issue's measure), each round times WRITES creates on each
endpoint in turn, ROUNDS rounds; the figure of each is its best round (other processes on the
same two cores only ever take from it), with the median beside it. Each cell also has the
endpoint's own CPU per create (its process's user + system time over the round ÷ creates,
the least of the rounds): what a create costs the endpoint, whatever bounds the client.

The million documents are loaded the fast way: the state is written in the endpoint's own
format (a snapshot: "<head>\t<document>" lines, journal.js, persistence.js) from this process,
after the endpoint created the database and container (their metadata and resource ids are the
endpoint's own, read back from its journal) and one document, whose `_rid` checks the ids
written here. For scale, the way through the endpoint is measured too: transactional batches
of 100 over LOAD_CONNECTIONS connections for LOAD_SAMPLE documents, and what a million would
take at that rate.

Restart: from the endpoint's start to its ready line, with the documents kept (twice: the
second after the rounds' writes, which are in its journal); the endpoint keeps each document
as the text it read, nothing is left to do after it is ready. Memory: the endpoint's
resident set (VmRSS) when ready, after the rounds, and its peak (VmHWM).
`python -m bench.cosmos_scale` prints the figures (DOCS=100000 etc. in the environment for a
shorter run). No assertions.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import logging
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from azure.cosmos import CosmosClient, PartitionKey
from azure.cosmos.aio import CosmosClient as AsyncCosmosClient

from funcstack.cosmos import CosmosEndpoint, start_cosmos

DOCS = int(os.environ.get("DOCS", "1000000"))
CONCURRENCY = 16
WRITES = int(os.environ.get("WRITES", "3000"))
ROUNDS = int(os.environ.get("ROUNDS", "3"))
LOAD_SAMPLE = int(os.environ.get("LOAD_SAMPLE", "20000"))
LOAD_CONNECTIONS = 8
DATABASE, CONTAINER = "bench", "contacts"
DESCRIPTION = (
    "Met at the spring fair; interested in the annual plan and in moving the team's "
    "contacts over before the summer. "
) * 7  # ~700 characters
TICKS = os.sysconf("SC_CLK_TCK")


def document(i: int, tag: str = "kept") -> dict[str, Any]:
    """A contact of about 1 KB as JSON."""
    return {
        "id": f"{tag}-{i}",
        "partitionKey": f"{tag}-{i}",
        "type": "contact",
        "data": {
            "name": {"firstName": "Ada", "lastName": f"Lovelace {i}"},
            "email": f"ada.{i}@example.com",
            "description": DESCRIPTION[:700],
            "company": {
                "companyName": "Analytical Engines Ltd",
                "street": "St James's Square",
                "houseNumber": "12",
                "postalCode": "SW1Y 4JH",
                "city": "London",
                "country": "United Kingdom",
            },
            "createdAt": "2026-01-01T00:00:00+00:00",
            "modifiedAt": "2026-01-01T00:00:00+00:00",
            "version": 1,
        },
        "ttl": -1,
    }


def document_rid(container_rid: str, n: int) -> str:
    """The n-th document's resource id in a container, in the service's encoding."""
    raw = base64.b64decode(container_rid.replace("-", "/")) + n.to_bytes(4, "little") + bytes(4)
    return base64.b64encode(raw).decode("ascii").replace("/", "-")


def endpoint_cpu_s(cosmos: CosmosEndpoint) -> float:
    fields = Path(f"/proc/{cosmos.started().pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def memory_mb(cosmos: CosmosEndpoint) -> dict[str, float]:
    status = dict(
        line.split(":", 1)
        for line in Path(f"/proc/{cosmos.started().pid}/status").read_text().splitlines()
        if ":" in line
    )
    return {k: int(status[k].split()[0]) / 1024 for k in ("VmRSS", "VmHWM")}


@contextmanager
def running(
    state: Path | None, log: Path, timeout: float = 30.0, fsync: bool = False
) -> Iterator[CosmosEndpoint]:
    cosmos = start_cosmos(state_dir=state, state_fsync=fsync, log_path=log, timeout=timeout)
    try:
        yield cosmos
    finally:
        cosmos.stop(timeout=60)


def sync_client(cosmos: CosmosEndpoint) -> CosmosClient:
    return CosmosClient(cosmos.endpoint, cosmos.key)


def write_kept_state(
    state: Path,
    log: Path,
    n: int,
    document_of: Callable[[int], dict[str, Any]] = document,
    indexing_policy: dict[str, Any] | None = None,
) -> dict[str, float]:
    """Create the database and container through the endpoint, then write `n` documents
    (`document_of(i)`, each with its own `partitionKey`) into its state folder as a snapshot
    (the endpoint's format); returns timings and sizes."""
    started = time.perf_counter()
    with running(state, log) as cosmos:
        database = sync_client(cosmos).create_database(DATABASE)
        options: dict[str, Any] = (
            {} if indexing_policy is None else {"indexing_policy": indexing_policy}
        )
        container = database.create_container(
            CONTAINER, PartitionKey("/partitionKey"), default_ttl=-1, **options
        )
        probe = container.create_item(document(0, "probe"))
        container.delete_item(probe["id"], probe["partitionKey"])
    meta: dict[str, Any] | None = None
    lsn = 0
    for line in (state / "journal-1.jsonl").read_text().splitlines():
        record = json.loads(line)
        meta = record.get("m", meta)
        lsn = max(lsn, record["l"])
    assert meta is not None
    coll = next(c for d in meta["dbs"] for c in d["colls"] if c["body"]["id"] == CONTAINER)
    coll_rid, coll_self = coll["body"]["_rid"], coll["body"]["_self"]
    if document_rid(coll_rid, 1) != probe["_rid"]:
        raise RuntimeError(f"resource ids differ from the endpoint's: {probe['_rid']}")
    coll["ridCount"] = n + 1
    now = time.time()
    json_bytes = 0
    snapshot = state / "snapshot-2.jsonl"
    with snapshot.open("w", encoding="utf-8") as out:
        out.write(
            json.dumps(
                {"format": "funcstack-cosmos-state", "version": 3, "lsn": lsn + n, "meta": meta}
            )
            + "\n"
        )
        out.write(json.dumps({"container": coll_rid}) + "\n")
        lines = []
        for i in range(1, n + 1):
            rid = document_rid(coll_rid, i + 1)
            body = {
                **document_of(i),
                "_rid": rid,
                "_self": f"{coll_self}/docs/{rid}/",
                "_etag": f'"{uuid.UUID(int=i)}"',
                "_ts": int(now),
            }
            head = [lsn + i, int(now * 1000), rid, body["ttl"], body["id"], [body["partitionKey"]]]
            text = json.dumps(body, separators=(",", ":"))
            json_bytes += len(text.encode("utf-8"))
            lines.append(json.dumps(head, separators=(",", ":")) + "\t" + text)
            if len(lines) == 10000:
                out.write("\n".join(lines) + "\n")
                lines = []
        if lines:
            out.write("\n".join(lines) + "\n")
        out.write(json.dumps({"end": n}) + "\n")
    (state / "journal-1.jsonl").unlink()
    return {
        "write_s": time.perf_counter() - started,
        "bytes": snapshot.stat().st_size,
        "json_bytes": json_bytes,  # the documents' JSON, as the endpoint keeps and answers it
    }


def load_through_batches(state: Path, log: Path, n: int) -> dict[str, float]:
    """`n` documents through the endpoint: batches of 100 over LOAD_CONNECTIONS connections."""
    with running(state, log) as cosmos:
        sync_client(cosmos).create_database(DATABASE).create_container(
            CONTAINER, PartitionKey("/partitionKey"), default_ttl=-1
        )

        async def load() -> float:
            clients = [
                AsyncCosmosClient(cosmos.endpoint, cosmos.key) for _ in range(LOAD_CONNECTIONS)
            ]
            counter = itertools.count()
            try:

                async def worker(client: AsyncCosmosClient) -> None:
                    container = client.get_database_client(DATABASE).get_container_client(CONTAINER)
                    while (b := next(counter)) * 100 < n:
                        pk = f"batch-{b}"
                        ops = [
                            ("create", ({**document(b * 100 + j, "batch"), "partitionKey": pk},))
                            for j in range(100)
                        ]
                        await container.execute_item_batch(ops, partition_key=pk)

                started = time.perf_counter()
                await asyncio.gather(*(worker(c) for c in clients))
                return time.perf_counter() - started
            finally:
                for c in clients:
                    await c.close()

        seconds = asyncio.run(load())
    return {
        "documents": n,
        "seconds": seconds,
        "per_s": n / seconds,
        "million_s": 1_000_000 / (n / seconds),
    }


async def _creates(cosmos: CosmosEndpoint, tag: str, n: int) -> dict[str, float]:
    async with AsyncCosmosClient(cosmos.endpoint, cosmos.key) as client:
        container = client.get_database_client(DATABASE).get_container_client(CONTAINER)
        await container.read()
        counter = itertools.count()
        latencies: list[float] = []

        async def worker() -> None:
            while (i := next(counter)) < n:
                t = time.perf_counter()
                await container.create_item(document(i, tag))
                latencies.append(time.perf_counter() - t)

        cpu = endpoint_cpu_s(cosmos)
        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
        seconds = time.perf_counter() - started
        cpu = endpoint_cpu_s(cosmos) - cpu
    latencies.sort()
    return {
        "per_s": n / seconds,
        "endpoint_cpu_us": cpu / n * 1e6,
        "p50_ms": latencies[len(latencies) // 2] * 1000,
        "p99_ms": latencies[int(len(latencies) * 0.99)] * 1000,
    }


def creates(cosmos: CosmosEndpoint, tag: str, n: int) -> dict[str, float]:
    return asyncio.run(_creates(cosmos, tag, n))


def best(rounds: list[dict[str, float]]) -> dict[str, float]:
    top = max(rounds, key=lambda r: r["per_s"])
    return {
        **top,
        "median_per_s": statistics.median(r["per_s"] for r in rounds),
        "min_endpoint_cpu_us": min(r["endpoint_cpu_us"] for r in rounds),
    }


def measure(base: Path | None = None, docs: int = DOCS) -> dict[str, Any]:
    logging.getLogger("azure").setLevel(logging.WARNING)
    with tempfile.TemporaryDirectory(dir=base) as tmp:
        root = Path(tmp)
        results: dict[str, Any] = {
            "documents": docs,
            "concurrency": CONCURRENCY,
            "writes_per_round": WRITES,
            "rounds": ROUNDS,
            "load_average_at_start": os.getloadavg()[0],
        }
        results["load_batches"] = load_through_batches(
            root / "batches", root / "b.log", LOAD_SAMPLE
        )
        results["load_direct"] = write_kept_state(root / "kept", root / "kept.log", docs)
        restarts = []
        started = time.perf_counter()
        with running(root / "kept", root / "kept.log", timeout=300) as kept:
            restarts.append(time.perf_counter() - started)
            results["memory_after_restart_mb"] = memory_mb(kept)
            with (
                running(None, root / "memory.log") as memory,
                running(root / "fresh", root / "fresh.log") as fresh,
                running(root / "fsync", root / "fsync.log", fsync=True) as fsync,
            ):
                endpoints = {"memory": memory, "fresh": fresh, "fsync": fsync, "kept": kept}
                for name, cosmos in endpoints.items():
                    if name != "kept":
                        sync_client(cosmos).create_database(DATABASE).create_container(
                            CONTAINER, PartitionKey("/partitionKey"), default_ttl=-1
                        )
                    creates(cosmos, "warm", 600)
                rounds: dict[str, list[dict[str, float]]] = {name: [] for name in endpoints}
                for r in range(ROUNDS):
                    turn = list(endpoints.items())
                    for name, cosmos in turn if r % 2 == 0 else reversed(turn):
                        rounds[name].append(creates(cosmos, f"r{r}", WRITES))
            results["memory_after_writes_mb"] = memory_mb(kept)
        started = time.perf_counter()
        with running(root / "kept", root / "kept.log", timeout=300) as kept:
            restarts.append(time.perf_counter() - started)
            results["memory_second_restart_mb"] = memory_mb(kept)
        results["restart_s"] = restarts
        results["load_average_at_end"] = os.getloadavg()[0]
        results["log"] = [
            line
            for line in (root / "kept.log").read_text().splitlines()
            if "cosmos local state" in line
        ]
        for name in rounds:
            results[name] = best(rounds[name])
        results["rounds_detail"] = rounds
        results["kept_to_fresh"] = results["kept"]["per_s"] / results["fresh"]["per_s"]
        results["kept_to_fresh_median"] = (
            results["kept"]["median_per_s"] / results["fresh"]["median_per_s"]
        )
        results["cpu_kept_to_fresh"] = (
            results["kept"]["min_endpoint_cpu_us"] / results["fresh"]["min_endpoint_cpu_us"]
        )
        results["fresh_to_memory"] = results["fresh"]["per_s"] / results["memory"]["per_s"]
        results["fsync_to_fresh"] = results["fsync"]["per_s"] / results["fresh"]["per_s"]
    return results


ROWS = {
    "memory": "fresh, nothing kept (no state folder)",
    "fresh": "fresh, state folder (journal)",
    "fsync": "fresh, state folder, --state-fsync",
    "kept": "{documents:,} documents kept (journal)",
}


def markdown(r: dict[str, Any]) -> str:
    direct, batches = r["load_direct"], r["load_batches"]
    mem = r["memory_after_restart_mb"]
    lines = [
        f"| {r['concurrency']} concurrent creates (SDK aio) | creates/s (best; median) | "
        "endpoint CPU/create (least) | p50 | p99 |",
        "|---|---|---|---|---|",
    ]
    for name, label in ROWS.items():
        row = r[name]
        lines.append(
            f"| {label.format(documents=r['documents'])} | {row['per_s']:.0f}; "
            f"{row['median_per_s']:.0f} | {row['min_endpoint_cpu_us']:.0f} us | "
            f"{row['p50_ms']:.1f} ms | {row['p99_ms']:.1f} ms |"
        )
    lines += [
        "",
        f"kept ÷ fresh: {r['kept_to_fresh']:.2f}x (medians {r['kept_to_fresh_median']:.2f}x); "
        f"endpoint CPU per create {r['cpu_kept_to_fresh']:.2f}x; the journal ÷ nothing kept "
        f"{r['fresh_to_memory']:.2f}x; fsync ÷ the journal {r['fsync_to_fresh']:.2f}x",
        f"restart with them kept: ready after {r['restart_s'][0]:.1f} s, again after the rounds "
        f"{r['restart_s'][1]:.1f} s (" + "; ".join(r["log"][1:]) + ")",
        f"memory (RSS) with them kept: {mem['VmRSS']:.0f} MB when ready, "
        f"{r['memory_after_writes_mb']['VmRSS']:.0f} MB after the rounds, peak "
        f"{r['memory_after_writes_mb']['VmHWM']:.0f} MB",
        f"loading: written in the endpoint's format in {direct['write_s']:.0f} s "
        f"({direct['bytes'] / 1e6:.0f} MB); through the endpoint in batches of 100 over "
        f"{LOAD_CONNECTIONS} connections {batches['per_s']:.0f} documents/s "
        f"(a million: {batches['million_s']:.0f} s)",
        f"(the machine's load average: {r['load_average_at_start']:.1f} at the start, "
        f"{r['load_average_at_end']:.1f} at the end, on {os.cpu_count()} cores)",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    figures = measure()
    print(json.dumps(figures, indent=2, default=str))
    print(markdown(figures))
