"""Queries on the local Cosmos DB endpoint with unrelated documents kept (issue 56): a query
costs what it returns, not what the container holds, and the endpoint never stalls its other
clients.

For each size (none, 100,000 and 1,000,000 unrelated documents: event documents of about
1 KB, `type: domainEvent`, written in the endpoint's own state format as bench.cosmos_scale
does, then the endpoint started on them), the same 1,000 contacts (`type: contact`, one in ten
deleted) are created through the SDK in a container with the app's indexing policy
(deploy/indexing-policy.json: /type and /data/deleted only), and through the SDK (sync client,
across partitions, as the Contacts app lists them):

- the first page (100) of `SELECT c.id, c.data.email, c.data.name FROM c WHERE
  c.type = 'contact' AND c.data.deleted = false` and the filtered `SELECT VALUE COUNT(1)`
  (the SDK's plan: the gateway refuses it, the SDK queries the range and adds up): every
  size's endpoint up at once, the calls made on each in turn, ROUNDS rounds: the median, and
  the endpoint's own CPU per call; before them one call that builds the indexes (timed too:
  the endpoint builds an index when a query first needs it);
- a point read's latency (p50, p99 of READS reads) idle, while another client (a process of
  its own) asks for that first page about 20 times a second, and while another runs a query no
  index serves (a COUNT over LOWER(c.type): it reads every document, a slice at a time, in
  pages its budget cuts; with a million, seconds per query); beside the reads, a create's and a
  change feed poll's latency in the same situations;
- the restart of each endpoint with documents kept (the same state folder): from start to the
  ready line, and the first page after it (its indexes built again).

Ratios within one run: each size's query time ÷ the empty container's ("speed" = empty ÷
size: ≥ 0.5x is the aim), the point read's p99 while querying ÷ idle (≤ 2x). `python -m
bench.cosmos_queries` runs it alone (SIZES=0,100000 in the environment for a shorter run).
No assertions.
"""

from __future__ import annotations

import contextlib
import json
import logging
import multiprocessing
import os
import statistics
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from azure.cosmos import ContainerProxy, CosmosClient

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

SIZES = [int(s) for s in os.environ.get("SIZES", "0,100000,1000000").split(",")]
CONTACTS = 1000
ROUNDS = int(os.environ.get("ROUNDS", "15"))
READS = int(os.environ.get("READS", "400"))
#: The other client's pause between two first pages (about 20 a second, an app's list in use).
PAGES_PAUSE_S = 0.05
POLICY = json.loads(
    (Path(__file__).resolve().parents[1] / "deploy" / "indexing-policy.json").read_text()
)
LIST = (
    "SELECT c.id, c.data.email, c.data.name FROM c "
    "WHERE c.type = 'contact' AND c.data.deleted = false"
)
COUNT = "SELECT VALUE COUNT(1) FROM c WHERE c.type = 'contact' AND c.data.deleted = false"
SCAN = "SELECT VALUE COUNT(1) FROM c WHERE LOWER(c.type) = 'contact'"
PAYLOAD = "The contact's address changed; the event carries the whole new address. " * 9


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


def count(container: ContainerProxy) -> int:
    found: Any = next(iter(container.query_items(COUNT, enable_cross_partition_query=True)))
    return int(found)


def latencies(call: Callable[[int], Any], n: int) -> dict[str, float]:
    found = []
    for i in range(n):
        started = time.perf_counter()
        call(i)
        found.append((time.perf_counter() - started) * 1000)
    found.sort()
    return {"p50_ms": found[len(found) // 2], "p99_ms": found[int(len(found) * 0.99)]}


def others(container: ContainerProxy, tag: str) -> dict[str, dict[str, float]]:
    """A point read's, a create's and a change feed poll's latency, READS of each."""

    def poll_feed(_: int) -> None:
        list(container.query_items_change_feed(start_time="Now", max_item_count=1))

    return {
        "read": latencies(
            lambda i: container.read_item(f"contact-{i % CONTACTS}", f"contact-{i % CONTACTS}"),
            READS,
        ),
        "create": latencies(
            lambda i: container.create_item(
                {"id": f"{tag}-{i}", "partitionKey": f"{tag}-{i}", "type": "note", "n": i}
            ),
            READS // 2,
        ),
        "change_feed_poll": latencies(poll_feed, READS // 2),
    }


def _loop(
    endpoint: str, key: str, sql: str, pages: bool, pause_s: float, stop: Any, runs: Any
) -> None:
    """Run `sql` (its first page only when `pages`), then pause `pause_s`, until `stop` is set:
    another client, in a process of its own (the measuring client's GIL stays its own)."""
    warnings.filterwarnings("ignore", message="Unverified HTTPS request")
    client = CosmosClient(endpoint, key, connection_verify=False)
    container = client.get_database_client(DATABASE).get_container_client(CONTAINER)
    while not stop.is_set():
        found = container.query_items(sql, enable_cross_partition_query=True, max_item_count=100)
        if pages:
            next(iter(found.by_page()))
        else:
            list(found)
        with runs.get_lock():
            runs.value += 1
        stop.wait(pause_s)


def while_running(
    cosmos: CosmosEndpoint,
    container: ContainerProxy,
    sql: str,
    *,
    pages: bool,
    pause_s: float,
    tag: str,
) -> dict[str, Any]:
    """`others` while another client (a process of its own) runs `sql` in a loop."""
    context = multiprocessing.get_context("spawn")
    stop = context.Event()
    runs = context.Value("i", 0)
    process = context.Process(
        target=_loop, args=(cosmos.endpoint, cosmos.key, sql, pages, pause_s, stop, runs)
    )
    process.start()
    time.sleep(1.0)  # the process started, its first query under way
    try:
        found: dict[str, Any] = others(container, tag)
    finally:
        stop.set()
        process.join(timeout=600)
    found["runs_meanwhile"] = runs.value
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


def measure(base: Path | None = None, sizes: list[int] = SIZES) -> dict[str, Any]:
    """Every size's endpoint up at once, the queries timed on each in turn (other processes on
    the two cores change over minutes: a ratio of two figures taken in turns is steadier)."""
    warnings.filterwarnings("ignore", message="Unverified HTTPS request")
    logging.getLogger("azure").setLevel(logging.WARNING)
    results: dict[str, Any] = {"load_average_at_start": os.getloadavg()[0]}
    sized: dict[int, dict[str, Any]] = {n: {"unrelated": n} for n in sizes}
    with tempfile.TemporaryDirectory(dir=base) as tmp, contextlib.ExitStack() as stack:
        root = Path(tmp)
        endpoints: dict[int, tuple[CosmosEndpoint, ContainerProxy]] = {}
        for n in sizes:
            state, log = root / f"kept-{n}", root / f"kept-{n}.log"
            sized[n]["written_s"] = write_kept_state(
                state, log, n, document_of=event, indexing_policy=POLICY
            )["write_s"]
            started = time.perf_counter()
            cosmos = stack.enter_context(running(state, log, timeout=600))
            sized[n]["ready_s"] = time.perf_counter() - started
            container = container_of(cosmos)
            for i in range(CONTACTS):
                container.create_item(contact(i))
            started = time.perf_counter()
            # the first page may be partial (its budget ran out while the indexes were built)
            sized[n]["first_query_rows"] = first_page(container)
            sized[n]["first_query_ms"] = (time.perf_counter() - started) * 1000
            assert first_page(container) == 100
            assert count(container) == CONTACTS - CONTACTS // 10
            endpoints[n] = (cosmos, container)
        for n, row in in_turns(endpoints, first_page, ROUNDS).items():
            sized[n]["first_page"] = row
        for n, row in in_turns(endpoints, count, ROUNDS).items():
            sized[n]["count"] = row
        for n, (cosmos, container) in endpoints.items():
            r = sized[n]
            r["idle"] = others(container, "idle")
            r["during_first_pages"] = while_running(
                cosmos, container, LIST, pages=True, pause_s=PAGES_PAUSE_S, tag="pages"
            )
            started = time.perf_counter()
            scanned: list[Any] = list(
                container.query_items(SCAN, enable_cross_partition_query=True)
            )
            r["scan_ms"] = (time.perf_counter() - started) * 1000
            assert scanned == [CONTACTS], scanned
            r["during_scan"] = while_running(
                cosmos, container, SCAN, pages=False, pause_s=0.0, tag="scan"
            )
            r["memory_mb"] = memory_mb(cosmos)
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
    empty = sized.get(0)
    for r in sized.values():
        if empty is not None:
            r["first_page_speed"] = empty["first_page"]["median_ms"] / r["first_page"]["median_ms"]
            r["count_speed"] = empty["count"]["median_ms"] / r["count"]["median_ms"]
        idle = r["idle"]["read"]["p99_ms"]
        r["read_p99_during_pages_to_idle"] = r["during_first_pages"]["read"]["p99_ms"] / idle
        r["read_p99_during_scan_to_idle"] = r["during_scan"]["read"]["p99_ms"] / idle
    results["sizes"] = sized
    return results


def markdown(results: dict[str, Any]) -> str:
    lines = [
        "| unrelated documents | first page (100; the endpoint's CPU) | speed ÷ none | "
        "filtered COUNT (CPU) | speed ÷ none | "
        "read p50 / p99 idle | p99 during pages | p99 during a scan |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for n, r in results["sizes"].items():
        during, scan = r["during_first_pages"], r["during_scan"]
        lines.append(
            f"| {int(n):,} | {r['first_page']['median_ms']:.1f} ms "
            f"(CPU {r['first_page']['endpoint_cpu_ms']:.1f}) | "
            f"{r.get('first_page_speed', 1):.2f}x | "
            f"{r['count']['median_ms']:.1f} ms (CPU {r['count']['endpoint_cpu_ms']:.1f}) | "
            f"{r.get('count_speed', 1):.2f}x | "
            f"{r['idle']['read']['p50_ms']:.1f} / {r['idle']['read']['p99_ms']:.1f} ms | "
            f"{during['read']['p99_ms']:.1f} ms ({r['read_p99_during_pages_to_idle']:.2f}x) | "
            f"{scan['read']['p99_ms']:.1f} ms ({r['read_p99_during_scan_to_idle']:.2f}x) |"
        )
    for n, r in results["sizes"].items():
        idle, during, scan = r["idle"], r["during_first_pages"], r["during_scan"]
        parts = [
            f"{int(n):,}: first query (builds the indexes) {r['first_query_ms']:.0f} ms "
            f"({r['first_query_rows']} rows)",
            f"the scan (COUNT over LOWER(c.type), every document) {r['scan_ms']:.0f} ms",
            "create p99 idle / during pages / during the scan "
            f"{idle['create']['p99_ms']:.1f} / {during['create']['p99_ms']:.1f} / "
            f"{scan['create']['p99_ms']:.1f} ms",
            "change feed poll p99 "
            f"{idle['change_feed_poll']['p99_ms']:.1f} / "
            f"{during['change_feed_poll']['p99_ms']:.1f} / "
            f"{scan['change_feed_poll']['p99_ms']:.1f} ms",
            f"ready after {r['ready_s']:.1f} s",
            f"RSS {r['memory_mb']['VmRSS']:.0f} MB",
        ]
        if "restart_ready_s" in r:
            parts.append(
                f"restarted: ready after {r['restart_ready_s']:.1f} s, first page "
                f"{r['restart_first_page_ms']:.0f} ms ({r['restart_first_rows']} rows)"
            )
        lines.append("- " + "; ".join(parts))
    lines.append(
        f"(the machine's load average: {results['load_average_at_start']:.1f} at the start, "
        f"{results['load_average_at_end']:.1f} at the end, on {os.cpu_count()} cores)"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    figures = measure()
    print(json.dumps(figures, indent=2, default=str))
    print(markdown(figures))
