"""Queries and memory on the local Cosmos DB endpoint with unrelated documents kept (issues 56
and 67): a query costs what it returns, not what the container holds; a whole container's
COUNT costs the same at any size; a point read is not held up by another client's queries; a
stored document costs about its size in memory.

For each size (none, 10,000, 100,000 and 1,000,000 unrelated documents: event documents of
about 1 KB, `type: domainEvent`, written in the endpoint's own state format as
bench.cosmos_scale does, then the endpoint started on them), the same 1,000 contacts (`type:
contact`, one in ten deleted) are created through the SDK in a container with the app's
indexing policy (deploy/indexing-policy.json: /type, /data/deleted...), and through the
SDK (sync client, across partitions, as the Contacts app lists them):

- queries, every size's endpoint up at once, each query made on each in turn, ROUNDS rounds
  (the median, and the endpoint's own CPU per call): the first page (100) of `SELECT c.id,
  c.data.email, c.data.name FROM c WHERE c.type = 'contact' AND c.data.deleted = false`, its
  filtered `SELECT VALUE COUNT(1)`, and the unfiltered `SELECT VALUE COUNT(1) FROM c` (the
  SDK's plan: the gateway refuses a cross-partition aggregate, the SDK asks each range and adds
  up); before them one call that builds the indexes (timed too: the endpoint builds an index
  when a query first needs it), and a query no index serves (a COUNT over LOWER(c.type): it
  reads every document) timed once;
- a point read's latency (p50, p95, p99) idle and while another client (a process of its
  own) runs a query loop: the first page about 20 times a second (an app's list in use), the
  first page back to back, or the query no index serves back to back (with a million,
  seconds a query), its process at a lower priority (nice 10: its own CPU, a core back to
  back, is not the endpoint's to share). The windows alternate on the same endpoint (READS
  reads idle, READS while the loop runs, WINDOWS times for each loop; a window starts once the
  loop's query is under way, the next idle one once it has ended), so that what other
  processes do to the two cores falls on both sides; beside it, how late the endpoint's main
  thread ran in each window (its stats route: a 1 ms timer's lateness), what a request waited
  for it whatever the client's own process was given of the cores;
- memory: what the endpoint keeps a stored document in, per document beside the empty
  container's, ÷ the documents' JSON (as the endpoint keeps and answers them): its main
  thread's heap after a full collection (the endpoint's local stats route), and its
  process's resident set (VmRSS, the query threads' heaps and what
  V8 has not given back included), when ready and after the rounds (their indexes built);
  and once more for WRITTEN documents written through the endpoint (transactional batches)
  rather than loaded;
- the restart of each endpoint with documents kept (the same state folder): from start to the
  ready line, and the first page after it (its indexes built again).

Ratios within one run: each size's query time ÷ the empty container's ("speed" = empty ÷
size: ≥ 0.5x is the aim), the unfiltered COUNT's speed at a size ÷ at 10,000 (≥ 0.5x), a point
read's p95 during a loop ÷ idle (≤ 1.5x), memory ÷ JSON (≤ 2x). `python -m
bench.cosmos_queries` runs it alone (SIZES=0,10000,100000 in the environment for a shorter
run; FAIR_SIZES the sizes whose point reads are measured). No assertions.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import multiprocessing
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

from azure.cosmos import ContainerProxy, CosmosClient, PartitionKey
from azure.cosmos.aio import CosmosClient as AsyncCosmosClient

from bench.cosmos_scale import (
    CONTAINER,
    DATABASE,
    endpoint_cpu_s,
    memory_mb,
    running,
    sync_client,
    write_kept_state,
)
from funcstack.cosmos import CosmosEndpoint

SIZES = [int(s) for s in os.environ.get("SIZES", "0,10000,100000,1000000").split(",")]
FAIR_SIZES = [int(s) for s in os.environ.get("FAIR_SIZES", "0,100000,1000000").split(",")]
#: Unrelated documents written through the endpoint (batches) for the memory of written ones.
WRITTEN = int(os.environ.get("WRITTEN", "100000"))
CONTACTS = 1000
ROUNDS = int(os.environ.get("ROUNDS", "15"))
READS = int(os.environ.get("READS", "100"))
WINDOWS = int(os.environ.get("WINDOWS", "6"))
#: The paced loop's pause between two first pages (about 20 a second, an app's list in use).
PAGES_PAUSE_S = 0.05
POLICY = json.loads(
    (Path(__file__).resolve().parents[1] / "deploy" / "indexing-policy.json").read_text()
)
LIST = (
    "SELECT c.id, c.data.email, c.data.name FROM c "
    "WHERE c.type = 'contact' AND c.data.deleted = false"
)
COUNT = "SELECT VALUE COUNT(1) FROM c WHERE c.type = 'contact' AND c.data.deleted = false"
COUNT_ALL = "SELECT VALUE COUNT(1) FROM c"
SCAN = "SELECT VALUE COUNT(1) FROM c WHERE LOWER(c.type) = 'contact'"
PAYLOAD = "The contact's address changed; the event carries the whole new address. " * 9
#: The query loops' clients run at this niceness (their CPU is not the endpoint's to share).
LOOP_NICE = 10
#: The loops a point read is measured beside: (query, first page only, pause between queries).
LOOPS: dict[str, tuple[str, bool, float]] = {
    "pages": (LIST, True, PAGES_PAUSE_S),
    "query_loop": (LIST, True, 0.0),
    "scan_loop": (SCAN, False, 0.0),
}


def event(i: int) -> dict[str, Any]:
    """An unrelated document: an event of about 1 KB kept within its time to live."""
    return {
        "id": f"event-{i}",
        "partitionKey": f"aggregate-{i // 10}",
        "type": "domainEvent",
        "aggregateType": "Contact",
        "action": "AddressChanged",
        "version": i % 10 + 1,
        "data": {"text": PAYLOAD[:640], "sequence": i},
        "createdAt": "2026-01-01T00:00:00+00:00",
        "ttl": 864000,
    }


def contact(i: int) -> dict[str, Any]:
    return {
        "id": f"contact-{i}",
        "partitionKey": f"contact-{i}",
        "type": "contact",
        "data": {
            "deleted": i % 10 == 0,
            "email": f"ada.{i}@example.com",
            "name": {"firstName": "Ada", "lastName": f"Lovelace {i}"},
        },
        "ttl": -1,
    }


def first_page(container: ContainerProxy) -> int:
    pages = container.query_items(LIST, enable_cross_partition_query=True, max_item_count=100)
    return len(list(next(iter(pages.by_page()))))


def count(container: ContainerProxy, sql: str = COUNT) -> int:
    found: Any = next(iter(container.query_items(sql, enable_cross_partition_query=True)))
    return int(found)


def count_all(container: ContainerProxy) -> int:
    return count(container, COUNT_ALL)


def reads(container: ContainerProxy, n: int) -> list[float]:
    """`n` point reads of the contacts, one after another: each one's latency (ms)."""
    found = []
    for i in range(n):
        started = time.perf_counter()
        container.read_item(f"contact-{i % CONTACTS}", f"contact-{i % CONTACTS}")
        found.append((time.perf_counter() - started) * 1000)
    return found


def percentiles(latencies: list[float]) -> dict[str, float]:
    ordered = sorted(latencies)
    return {
        f"p{p}_ms": ordered[min(len(ordered) - 1, int(len(ordered) * p / 100))]
        for p in (50, 95, 99)
    }


def _loop(
    endpoint: str,
    key: str,
    sql: str,
    pages: bool,
    pause_s: float,
    go: Any,
    stop: Any,
    busy: Any,
    runs: Any,
) -> None:
    """Run `sql` (its first page only when `pages`), then pause `pause_s`, while `go` is set,
    until `stop` is: another client, in a process of its own (the measuring client's GIL
    stays its own), at a lower priority (nice LOOP_NICE): on two cores the SDK's own CPU for
    a query loop (a core of its own, back to back) would otherwise be taken from the measuring
    client and the endpoint, which another client, on another machine, does not take. `busy`
    is 1 while a query is under way."""
    with contextlib.suppress(OSError):
        os.nice(LOOP_NICE)
    client = CosmosClient(endpoint, key)
    container = client.get_database_client(DATABASE).get_container_client(CONTAINER)
    while not stop.is_set():
        if not go.wait(0.05):
            continue
        busy.value = 1
        found = container.query_items(sql, enable_cross_partition_query=True, max_item_count=100)
        if pages:
            next(iter(found.by_page()))
        else:
            list(found)
        busy.value = 0
        with runs.get_lock():
            runs.value += 1
        if pause_s:
            stop.wait(pause_s)


@contextlib.contextmanager
def loops(cosmos: CosmosEndpoint) -> Iterator[dict[str, dict[str, Any]]]:
    """A process for each of LOOPS, waiting to be let go (their `go` event)."""
    context = multiprocessing.get_context("spawn")
    stop = context.Event()
    started: dict[str, dict[str, Any]] = {}
    try:
        for name, (sql, pages, pause_s) in LOOPS.items():
            go, busy, runs = context.Event(), context.Value("i", 0), context.Value("i", 0)
            process = context.Process(
                target=_loop,
                args=(cosmos.endpoint, cosmos.key, sql, pages, pause_s, go, stop, busy, runs),
            )
            process.start()
            started[name] = {"process": process, "go": go, "busy": busy, "runs": runs}
        yield started
    finally:
        stop.set()
        for loop in started.values():
            loop["go"].set()
            loop["process"].join(timeout=600)


def wait_until(predicate: Callable[[], bool], timeout: float = 600.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("a query loop did not start or end in time")
        time.sleep(0.01)


def under_way(loop: dict[str, Any], runs_before: int) -> bool:
    """A loop's query is under way (or one has ended since it was let go)."""
    return bool(loop["busy"].value) or loop["runs"].value > runs_before


def ended(loop: dict[str, Any]) -> bool:
    return not loop["busy"].value


def lateness(windows: list[dict[str, float]]) -> dict[str, float]:
    """The endpoint's main thread's lateness over windows (each its own p50 / p99 / max):
    the median window's p50 and p99, the largest max."""
    return {
        "p50_ms": statistics.median(w["p50Ms"] for w in windows),
        "p99_ms": statistics.median(w["p99Ms"] for w in windows),
        "max_ms": max(w["maxMs"] for w in windows),
    }


def fairness(cosmos: CosmosEndpoint, container: ContainerProxy) -> dict[str, Any]:
    """A point read's latency idle and during each loop, in alternating windows; beside it,
    how late the endpoint's main thread ran in each window (its stats route), what a request
    waited for it whatever the client's own process was given of the cores."""
    idle: list[float] = []
    during: dict[str, list[float]] = {name: [] for name in LOOPS}
    late: dict[str, list[dict[str, float]]] = {name: [] for name in ("idle", *LOOPS)}

    def window(name: str) -> list[float]:
        cosmos.stats()  # the main thread's lateness from now on
        found = reads(container, READS)
        late[name].append(cosmos.stats()["eventLoop"])
        return found

    reads(container, 50)  # warm
    cosmos.stats()
    with loops(cosmos) as running_loops:
        for _ in range(WINDOWS):
            for name, loop in running_loops.items():
                idle.extend(window("idle"))
                before = loop["runs"].value
                loop["go"].set()
                wait_until(partial(under_way, loop, before))
                during[name].extend(window(name))
                loop["go"].clear()
                wait_until(partial(ended, loop))
        runs = {name: loop["runs"].value for name, loop in running_loops.items()}
    found: dict[str, Any] = {"idle": percentiles(idle), "runs": runs}
    found["idle_event_loop"] = lateness(late["idle"])
    for name, latencies in during.items():
        found[name] = percentiles(latencies)
        found[f"{name}_p95_to_idle"] = found[name]["p95_ms"] / found["idle"]["p95_ms"]
        found[f"{name}_p99_to_idle"] = found[name]["p99_ms"] / found["idle"]["p99_ms"]
        found[f"{name}_event_loop"] = lateness(late[name])
    return found


def container_of(cosmos: CosmosEndpoint) -> ContainerProxy:
    return sync_client(cosmos).get_database_client(DATABASE).get_container_client(CONTAINER)


def in_turns(
    endpoints: dict[int, tuple[CosmosEndpoint, ContainerProxy]],
    call: Callable[[ContainerProxy], Any],
    rounds: int,
) -> dict[int, dict[str, float]]:
    """`call` on each endpoint in turn, `rounds` times: each one's median and best time, and
    its endpoint's CPU per call (its process's user + system time over the rounds)."""
    times: dict[int, list[float]] = {n: [] for n in endpoints}
    cpu = dict.fromkeys(endpoints, 0.0)
    for _ in range(rounds):
        for n, (cosmos, container) in endpoints.items():
            before = endpoint_cpu_s(cosmos)
            started = time.perf_counter()
            call(container)
            times[n].append((time.perf_counter() - started) * 1000)
            cpu[n] += endpoint_cpu_s(cosmos) - before
    return {
        n: {
            "median_ms": statistics.median(times[n]),
            "best_ms": min(times[n]),
            "endpoint_cpu_ms": cpu[n] / rounds * 1000,
        }
        for n in endpoints
    }


async def _write_through_batches(cosmos: CosmosEndpoint, n: int) -> dict[str, float]:
    """`n` unrelated documents in transactional batches of 100 over 8 connections: their
    JSON's size (as answered) and the time."""
    clients = [AsyncCosmosClient(cosmos.endpoint, cosmos.key) for _ in range(8)]
    counter = itertools.count()
    json_bytes = 0
    try:

        async def worker(client: AsyncCosmosClient) -> None:
            nonlocal json_bytes
            container = client.get_database_client(DATABASE).get_container_client(CONTAINER)
            while (b := next(counter)) * 100 < n:
                pk = f"batch-{b}"
                ops = [
                    ("create", ({**event(b * 100 + j), "partitionKey": pk},))
                    for j in range(min(100, n - b * 100))
                ]
                answers = await container.execute_item_batch(ops, partition_key=pk)
                for answer in answers:
                    body = json.dumps(answer["resourceBody"], separators=(",", ":"))
                    json_bytes += len(body.encode("utf-8"))

        started = time.perf_counter()
        await asyncio.gather(*(worker(c) for c in clients))
        seconds = time.perf_counter() - started
    finally:
        for c in clients:
            await c.close()
    return {"documents": n, "json_bytes": json_bytes, "seconds": seconds}


def written_memory(
    state: Path, log: Path, empty: dict[str, int], empty_rss_mb: float
) -> dict[str, Any]:
    """The memory of WRITTEN documents written through the endpoint (not loaded)."""
    with running(state, log) as cosmos:
        sync_client(cosmos).create_database(DATABASE).create_container(
            CONTAINER, PartitionKey("/partitionKey"), default_ttl=-1, indexing_policy=POLICY
        )
        found: dict[str, Any] = dict(asyncio.run(_write_through_batches(cosmos, WRITTEN)))
        found["heap"] = cosmos.stats(collect=True)["memory"]
        found["memory_mb"] = memory_mb(cosmos)
    json_per_doc = found["json_bytes"] / WRITTEN
    found["heap_per_document"] = (kept(found["heap"]) - kept(empty)) / WRITTEN
    found["heap_to_json"] = found["heap_per_document"] / json_per_doc
    found["rss_per_document"] = (found["memory_mb"]["VmRSS"] - empty_rss_mb) * 1048576 / WRITTEN
    found["rss_to_json"] = found["rss_per_document"] / json_per_doc
    return found


def kept(memory: dict[str, int]) -> int:
    """What the endpoint's main thread holds in its heap (the documents here are ASCII: all of
    their JSON is in it; the endpoint keeps JSON beyond Latin-1 as UTF-8 bytes outside it)."""
    return memory["heapUsed"]


def measure(base: Path | None = None, sizes: list[int] = SIZES) -> dict[str, Any]:
    """Every size's endpoint up at once, the queries timed on each in turn (other processes on
    the two cores change over minutes: a ratio of two figures taken in turns is steadier)."""
    logging.getLogger("azure").setLevel(logging.WARNING)
    results: dict[str, Any] = {"load_average_at_start": os.getloadavg()[0]}
    sized: dict[int, dict[str, Any]] = {n: {"unrelated": n} for n in sizes}
    with tempfile.TemporaryDirectory(dir=base) as tmp, contextlib.ExitStack() as stack:
        root = Path(tmp)
        endpoints: dict[int, tuple[CosmosEndpoint, ContainerProxy]] = {}
        for n in sizes:
            state, log = root / f"kept-{n}", root / f"kept-{n}.log"
            written = write_kept_state(state, log, n, document_of=event, indexing_policy=POLICY)
            sized[n]["written_s"] = written["write_s"]
            sized[n]["json_bytes"] = written["json_bytes"]
            started = time.perf_counter()
            cosmos = stack.enter_context(running(state, log, timeout=600))
            sized[n]["ready_s"] = time.perf_counter() - started
            sized[n]["heap_ready"] = cosmos.stats(collect=True)["memory"]
            sized[n]["memory_ready_mb"] = memory_mb(cosmos)
            container = container_of(cosmos)
            for i in range(CONTACTS):
                container.create_item(contact(i))
            started = time.perf_counter()
            # the first page may be partial (its budget ran out while the indexes were built)
            sized[n]["first_query_rows"] = first_page(container)
            sized[n]["first_query_ms"] = (time.perf_counter() - started) * 1000
            assert first_page(container) == 100
            assert count(container) == CONTACTS - CONTACTS // 10
            assert count_all(container) == n + CONTACTS
            endpoints[n] = (cosmos, container)
        if WRITTEN:
            smallest = endpoints[min(sizes)][0]
            results["written"] = written_memory(
                root / "written",
                root / "written.log",
                smallest.stats(collect=True)["memory"],
                memory_mb(smallest)["VmRSS"],
            )
        for key, call in (("first_page", first_page), ("count", count), ("count_all", count_all)):
            for n, row in in_turns(endpoints, call, ROUNDS).items():
                sized[n][key] = row
        for n, (_, container) in endpoints.items():
            started = time.perf_counter()
            assert count(container, SCAN) == CONTACTS
            sized[n]["scan_ms"] = (time.perf_counter() - started) * 1000
        for n, (cosmos, container) in endpoints.items():
            if n in FAIR_SIZES:
                sized[n]["fairness"] = fairness(cosmos, container)
        for n, (cosmos, _) in endpoints.items():
            sized[n]["heap"] = cosmos.stats(collect=True)["memory"]
            sized[n]["memory_mb"] = memory_mb(cosmos)
        # the restart: the same state folder (the kept documents and the contacts' journal)
        for n, (cosmos, _) in endpoints.items():
            if not n:
                continue
            cosmos.stop(timeout=60)
            state, log = root / f"kept-{n}", root / f"kept-{n}.log"
            started = time.perf_counter()
            with running(state, log, timeout=600) as again:
                sized[n]["restart_ready_s"] = time.perf_counter() - started
                started = time.perf_counter()
                sized[n]["restart_first_rows"] = first_page(container_of(again))
                sized[n]["restart_first_page_ms"] = (time.perf_counter() - started) * 1000
    results["load_average_at_end"] = os.getloadavg()[0]
    ratios(sized)
    results["sizes"] = sized
    return results


def ratios(sized: dict[int, dict[str, Any]]) -> None:
    """Each size's figures beside their floor (the empty container's, 10,000's, idle, JSON)."""
    empty = sized.get(0)
    small = sized.get(10000)
    for n, r in sized.items():
        if empty is not None:
            r["first_page_speed"] = empty["first_page"]["median_ms"] / r["first_page"]["median_ms"]
            r["count_speed"] = empty["count"]["median_ms"] / r["count"]["median_ms"]
        if small is not None:
            r["count_all_speed_to_10k"] = (
                small["count_all"]["median_ms"] / r["count_all"]["median_ms"]
            )
        if n and empty is not None:
            for stage, key in (("memory_ready_mb", "ready"), ("memory_mb", "after")):
                extra = (r[stage]["VmRSS"] - empty[stage]["VmRSS"]) * 1048576
                r[f"rss_per_document_{key}"] = extra / n
                r[f"rss_to_json_{key}"] = extra / r["json_bytes"]
            for stage, key in (("heap_ready", "ready"), ("heap", "after")):
                extra = kept(r[stage]) - kept(empty[stage])
                r[f"heap_per_document_{key}"] = extra / n
                r[f"heap_to_json_{key}"] = extra / r["json_bytes"]


def markdown(results: dict[str, Any]) -> str:
    sizes = results["sizes"]
    lines = [
        "| unrelated documents | first page (100; the endpoint's CPU) | speed ÷ none | "
        "filtered COUNT (CPU) | speed ÷ none | COUNT(1) of the container (CPU) | "
        "speed ÷ 10,000 | heap ÷ JSON, ready / after the rounds | RSS ready / after | "
        "RSS ÷ JSON |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n, r in sizes.items():
        heap = (
            f"{r['heap_to_json_ready']:.2f}x / **{r['heap_to_json_after']:.2f}x** "
            f"({r['heap_per_document_after']:.0f} B a document of {r['json_bytes'] / n:.0f})"
            if "heap_to_json_after" in r
            else ""
        )
        rss = (
            f"{r['rss_to_json_ready']:.2f}x / {r['rss_to_json_after']:.2f}x"
            if "rss_to_json_after" in r
            else ""
        )
        lines.append(
            f"| {int(n):,} | {r['first_page']['median_ms']:.1f} ms "
            f"(CPU {r['first_page']['endpoint_cpu_ms']:.1f}) | "
            f"{r.get('first_page_speed', 1):.2f}x | "
            f"{r['count']['median_ms']:.1f} ms (CPU {r['count']['endpoint_cpu_ms']:.1f}) | "
            f"{r.get('count_speed', 1):.2f}x | "
            f"{r['count_all']['median_ms']:.1f} ms (CPU {r['count_all']['endpoint_cpu_ms']:.1f}) | "
            f"{r.get('count_all_speed_to_10k', 1):.2f}x | "
            f"{heap} | {r['memory_ready_mb']['VmRSS']:.0f} / {r['memory_mb']['VmRSS']:.0f} MB | "
            f"{rss} |"
        )
    lines += [
        "",
        "| unrelated documents | point read p50 / p95 / p99 idle | p95 during first pages "
        "(20/s) | p95 during first pages back to back | p95 during a scan loop | "
        "queries run (pages / loop / scans) | the main thread late, p99 (max): idle / pages / "
        "loop / scan |",
        "|---|---|---|---|---|---|---|",
    ]
    for n, r in sizes.items():
        if "fairness" not in r:
            continue
        f = r["fairness"]
        idle = f["idle"]
        cells = [
            f"{f[name]['p95_ms']:.1f} ms (**{f[f'{name}_p95_to_idle']:.2f}x**; p99 "
            f"{f[f'{name}_p99_to_idle']:.2f}x)"
            for name in LOOPS
        ]
        lines.append(
            f"| {int(n):,} | {idle['p50_ms']:.1f} / {idle['p95_ms']:.1f} / {idle['p99_ms']:.1f} ms"
            f" | {' | '.join(cells)} | "
            + " / ".join(str(f["runs"][name]) for name in LOOPS)
            + " | "
            + " / ".join(
                f"{f[key]['p99_ms']:.1f} ({f[key]['max_ms']:.0f})"
                for key in ("idle_event_loop", *(f"{name}_event_loop" for name in LOOPS))
            )
            + " ms |"
        )
    lines.append("")
    for n, r in sizes.items():
        parts = [
            f"{int(n):,}: first query (builds the indexes) {r['first_query_ms']:.0f} ms "
            f"({r['first_query_rows']} rows)",
            f"the scan (COUNT over LOWER(c.type), every document) {r['scan_ms']:.0f} ms",
            f"ready after {r['ready_s']:.1f} s",
        ]
        if "restart_ready_s" in r:
            parts.append(
                f"restarted: ready after {r['restart_ready_s']:.1f} s, first page "
                f"{r['restart_first_page_ms']:.0f} ms ({r['restart_first_rows']} rows)"
            )
        lines.append("- " + "; ".join(parts))
    if "written" in results:
        w = results["written"]
        lines.append(
            f"- {w['documents']:,} written through the endpoint (batches of 100, 8 connections, "
            f"{w['documents'] / w['seconds']:.0f} documents/s): heap "
            f"{w['heap_per_document']:.0f} B a document of {w['json_bytes'] / w['documents']:.0f}:"
            f" **{w['heap_to_json']:.2f}x** its JSON; RSS {w['memory_mb']['VmRSS']:.0f} MB, "
            f"{w['rss_to_json']:.2f}x"
        )
    lines.append(
        f"(the machine's load average: {results['load_average_at_start']:.1f} at the start, "
        f"{results['load_average_at_end']:.1f} at the end, on {os.cpu_count()} cores)"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    figures = measure()
    print(json.dumps(figures, indent=2, default=str))
    print(markdown(figures))
