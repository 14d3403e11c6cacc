"""`make bench`: every benchmark in one run, printed as figures and ratios (no assertions), and
at the end one table of each figure beside its floor. Results also go to .stack/bench.json."""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import (
    api,
    breakdown,
    changefeed,
    changefeed_scale,
    claim_check,
    cold_start,
    cosmos_queries,
    cosmos_scale,
    cosmos_sdk,
    failure_ingest,
    first_request,
    partitions,
    peers,
    relay_anywhere,
    relay_cpu,
    relay_flow,
    servicebus_scale,
    session,
    subscriber_catchup,
    throughput,
)
from bench.stats import table
from tools.stack import ROOT, Ports, Stack


def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        print("Cosmos SDK against the local endpoint ...", flush=True)
        results["cosmos_sdk"] = cosmos_sdk.measure(n=500)
        print(json.dumps(results["cosmos_sdk"], indent=2, default=str))

        print("\nPhysical partitions: 1 against 4, and a live split ...", flush=True)
        results["partitions"] = partitions.measure()
        print(partitions.report(results["partitions"]))

        print(
            "\nThe change feed processor (cosmos-changefeed): throughput per lease beside a bare "
            "change feed loop, takeover, memory per lease ...",
            flush=True,
        )
        results["changefeed"] = changefeed.measure()
        print(changefeed.report(results["changefeed"]))

        print(
            "\nThe change feed processor at scale (cosmos-changefeed, issue 90): 100-2,000 leases, "
            "10-150 instances in virtual time, changes of membership, 429s at half the budget "
            "...",
            flush=True,
        )
        started = time.perf_counter()
        scale = changefeed_scale.measure_all()
        print(changefeed_scale.report(scale))
        print(f"  ({time.perf_counter() - started:.0f} s)")
        print(
            f"\nCosmos DB endpoint at scale: creates with {cosmos_scale.DOCS:,} documents kept "
            "beside a fresh endpoint, the restart, the memory ...",
            flush=True,
        )
        started = time.perf_counter()
        results["cosmos_scale"] = cosmos_scale.measure(base)
        print(cosmos_scale.markdown(results["cosmos_scale"]))
        print(
            f"  (aim: kept ÷ fresh >= 0.9x, restart <= 10 s; {time.perf_counter() - started:.0f} s)"
        )

        print(
            "\nCosmos DB queries and memory with 10,000, 100,000 and 1,000,000 unrelated "
            "documents kept beside none; point reads while querying ...",
            flush=True,
        )
        started = time.perf_counter()
        results["cosmos_queries"] = cosmos_queries.measure(base)
        print(cosmos_queries.markdown(results["cosmos_queries"]))
        print(
            "  (aim: speed ÷ none >= 0.5x with a million, COUNT(1) of the container at a "
            "million ÷ at 10,000 >= 0.5x, a point read's p95 during a query loop <= 1.5x idle, "
            f"memory ÷ JSON <= 2x; {time.perf_counter() - started:.0f} s)"
        )

        print("\nHTTP API through the local Functions host ...", flush=True)
        started = time.perf_counter()
        with Stack(workdir=base / "api", ports=Ports.free(), with_servicebus=False) as stack:
            # Stack start returns once the host listens (worker started, app indexed and
            # loaded); healthy = the first 200 from /health (dependencies built, store reached).
            results["start_to_listening_s"] = time.perf_counter() - started
            results["start_to_healthy_s"] = api.until_healthy(stack) - started
            results["api"] = api.run(stack, n=500)
        print(
            f"  local stack (Cosmos + host with the worker) start: listening after "
            f"{results['start_to_listening_s']:.2f} s, healthy after "
            f"{results['start_to_healthy_s']:.2f} s"
        )
        print(table("per call (n=500)", results["api"]["rows"]))
        print(
            f"  POST /api/contacts ÷ bare SDK batch of the same 2 documents: "
            f"{results['api']['post_to_sdk_batch_ratio']:.2f}x"
        )
        print(
            f"  host overhead per HTTP call: POST "
            f"{results['api']['host_overhead_ms_post']:.3f} ms, GET "
            f"{results['api']['host_overhead_ms_get']:.3f} ms"
        )
        keys = results["api"]["idempotency"]
        print(
            table(
                "with and without an Idempotency-Key, calls alternated (n=500 each)", keys["rows"]
            )
        )
        print(
            f"  with ÷ without: POST {keys['post_keyed_to_plain_ratio']:.2f}x, PATCH "
            f"{keys['patch_keyed_to_plain_ratio']:.2f}x (the key's record is one more "
            f"create in the same batch; no extra round trip)"
        )

        print(
            "\nTransactional session: a commit of one document and one event beside the "
            "bare SDK's batch of the same two documents ...",
            flush=True,
        )
        with Stack(
            workdir=base / "session", ports=Ports.free(), with_servicebus=False, with_runner=False
        ) as stack:
            results["session"] = commits = session.measure(stack)
        for flavour in ("sync", "aio"):
            row = commits[flavour]
            print(
                f"  {flavour}: session {row['session']['median_ms']:.2f} ms (p99 "
                f"{row['session']['p99_ms']:.1f}), SDK batch {row['floor']['median_ms']:.2f} "
                f"ms (p99 {row['floor']['p99_ms']:.1f}): {row['ratio']:.3f}x (aim 1.10; "
                f"the median of the rounds' ratios {row['paired_ratio']:.3f}x); the SDK "
                f"batch of the 3 documents the session writes "
                f"{row['floor3']['median_ms']:.2f} ms: {row['ratio_to_three']:.3f}x"
            )
        commits["cpu"] = own = session.cpu()
        print(
            f"  the session's own CPU per commit, no I/O (aio): {own['session_us']:.1f} us "
            f"against {own['by_hand_us']:.1f} us for the same 3 documents written by hand: "
            f"{own['added_us']:.1f} us added"
        )

        print(
            "\nThe outbox against what a team would write instead: a plain write, the dual "
            "write, the outbox session, in one app and one host, in turns ...",
            flush=True,
        )
        started = time.perf_counter()
        results["peers"] = peer = peers.measure(base / "peers")
        print(peers.markdown(peer))
        print(
            f"  (aim: outbox ÷ plain >= 0.9x and outbox ÷ dual > 1 at every concurrency; "
            f"{time.perf_counter() - started:.0f} s)"
        )

        print(
            "\nConcurrent clients: POST /api/contacts, the app sync and async, beside the "
            "bare SDK's batch (threads, aio) ...",
            flush=True,
        )
        started = time.perf_counter()
        results["throughput"] = concurrent = throughput.measure(base / "throughput")
        for mode in ("api", "pipeline"):
            print(f"  {mode}:\n" + throughput.markdown(concurrent[mode]))
        print(f"  ({time.perf_counter() - started:.0f} s)")

        print("\nWhere one request's time goes under make run's stack ...", flush=True)
        results["breakdown"] = parts = breakdown.measure(base / "breakdown")
        print(breakdown.markdown(parts))

        print(
            "\nRelay CPU per event (parse, map, pack; no I/O) beside the SDK's floor ...",
            flush=True,
        )
        results["relay_cpu"] = cpu = relay_cpu.measure()
        print(
            f"  telemetry on {cpu['cpu_us_per_event_on']:.1f} us/event, off "
            f"{cpu['cpu_us_per_event_off']:.1f}; floor (SDK constructs and packs the same "
            f"message, {cpu['floor_kind']}) {cpu['floor_us_per_event']:.1f}, add-only "
            f"{cpu['add_only_us']:.1f}"
        )
        print(
            f"  on ÷ floor {cpu['on_to_floor_ratio']:.2f}x (aim 1.2), off ÷ floor "
            f"{cpu['off_to_floor_ratio']:.2f}x, on ÷ off {cpu['on_to_off_ratio']:.2f}x"
        )
        print(
            f"  async (the app's relay): on {cpu['cpu_us_per_event_async_on']:.1f} us/event "
            f"({cpu['async_on_to_floor_ratio']:.2f}x), off "
            f"{cpu['cpu_us_per_event_async_off']:.1f} "
            f"({cpu['async_off_to_floor_ratio']:.2f}x)"
        )
        print(
            "\nThe relay as a process (cosmos-outbox relay) beside the Functions trigger: CPU "
            "per relayed event, alternated rounds ...",
            flush=True,
        )
        results["relay_anywhere"] = relay_anywhere.measure(base / "relay-anywhere")
        print(relay_anywhere.report(results["relay_anywhere"]))

        print(
            "\nClaim check: relaying events of 1 MB (bodies to Azurite, claim checks to a "
            "256 KB topic) beside the bare SDK uploading the same bodies ...",
            flush=True,
        )
        results["claim_check"] = offload = claim_check.measure(base / "claim-check")
        print(
            f"  relay {offload['relay_ms_per_mb']:.1f} ms/MB "
            f"({offload['relay_cpu_ms_per_mb']:.1f} ms CPU/MB); bare upload_blob "
            f"{offload['floor_ms_per_mb']:.1f} ms/MB "
            f"({offload['floor_cpu_ms_per_mb']:.1f} ms CPU/MB): {offload['wall_ratio']:.2f}x "
            f"wall, {offload['cpu_ratio']:.2f}x CPU"
        )

        print("\nCold start: import function_app beside the bare SDKs it runs on ...", flush=True)
        results["import"] = imp = cold_start.measure()
        print(
            f"  function_app {imp['import_function_app_cpu_s'] * 1000:.0f} ms CPU, "
            f"{imp['floor']} {imp['import_bare_sdks_cpu_s'] * 1000:.0f} ms: "
            f"{imp['app_to_floor_ratio']:.2f}x (budget 1.10; median of the rounds' ratios "
            f"{imp['median_round_ratio']:.2f}x)"
        )

        print("\nCold start through the local host: process start to the first 201 ...", flush=True)
        results["first_201"] = first = first_request.measure(base / "first")
        print(
            f"  app: ready {first['app_ready_s']:.2f} s, first 201 on POST /api/contacts "
            f"{first['app_first_201_s']:.2f} s; bare azure.functions app: ready "
            f"{first['bare_ready_s']:.2f} s, first 201 {first['bare_first_201_s']:.2f} s: "
            f"{first['app_to_bare_ratio']:.2f}x"
        )

        print(
            "\nRelay drain (backlog of 2000 events over 200 contacts) with 1, 2 and 4 leases ...",
            flush=True,
        )
        results["relay_leases"] = scaling = relay_flow.lease_scaling(base / "leases")
        for n, run in scaling["runs"].items():
            print(
                f"  {n} lease(s): {run['relay_events_per_s']:.0f} events/s "
                f"({scaling['ratio_to_one_lease'][n]:.2f}x one lease), "
                f"{run['invocations']} invocations, {run['sends_per_invocation']:.1f} "
                f"sends each; CPU us/event "
                + ", ".join(f"{k} {v:.0f}" for k, v in run["cpu_us_per_event"].items())
            )

        for poll in (1000, 100):
            print(
                f"\nCommit-to-receive latency, 20 writes/s, FEED_POLL_DELAY_MS={poll} ...",
                flush=True,
            )
            results[f"latency_poll_{poll}"] = relay_flow.latency(base / f"lat{poll}", poll_ms=poll)
            print(f"  {results[f'latency_poll_{poll}']}")
        results["subscriber_catchup"] = subscriber_catchup.report(base / "catchup")

        print(
            "\nThe local Service Bus endpoint with 100,000 messages kept, beside fresh ...",
            flush=True,
        )
        results["servicebus_scale"] = servicebus_scale.measure(base / "servicebus-scale")
        print(servicebus_scale.report(results["servicebus_scale"]))

        failures = int(os.environ.get("BENCH_FAILURES", "10000"))
        print(
            f"\nThe failures' ingest: {failures:,} dead letters kept by the relay's receiver, "
            "then retried by their group's operation, beside the broker's batch send of the "
            "same messages ...",
            flush=True,
        )
        results["failure_ingest"] = failure_ingest.measure(failures, base / "failure-ingest")
        print(failure_ingest.report(results["failure_ingest"]))
    print("\n" + summary(results))
    out = ROOT / ".stack" / "bench.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2, default=str))
    print(f"\nwritten to {out}")


def summary(results: dict[str, Any]) -> str:
    """Each figure beside its floor, as a ratio."""
    cpu, imp, first = results["relay_cpu"], results["import"], results["first_201"]
    scaling = results["relay_leases"]
    api_rows = results["api"]["rows"]
    keys = results["api"]["idempotency"]["rows"]
    rows = [
        (
            "POST /api/contacts (median ms)",
            api_rows["POST /api/contacts via local host (HTTP)"]["median_ms"],
            "SDK batch of the same 2 documents",
            api_rows["SDK execute_item_batch (contact + event)"]["median_ms"],
            results["api"]["post_to_sdk_batch_ratio"],
        ),
        (
            "POST with Idempotency-Key (median ms)",
            keys["POST /api/contacts, Idempotency-Key"]["median_ms"],
            "POST without",
            keys["POST /api/contacts, no key"]["median_ms"],
            results["api"]["idempotency"]["post_keyed_to_plain_ratio"],
        ),
        (
            "PATCH with Idempotency-Key (median ms)",
            keys["PATCH /api/contacts/{id}, Idempotency-Key"]["median_ms"],
            "PATCH without",
            keys["PATCH /api/contacts/{id}, no key"]["median_ms"],
            results["api"]["idempotency"]["patch_keyed_to_plain_ratio"],
        ),
        (
            "relay CPU/event, telemetry on (us)",
            cpu["cpu_us_per_event_on"],
            "SDK constructs + packs the message",
            cpu["floor_us_per_event"],
            cpu["on_to_floor_ratio"],
        ),
        (
            "relay CPU/event, telemetry off (us)",
            cpu["cpu_us_per_event_off"],
            "SDK constructs + packs the message",
            cpu["floor_us_per_event"],
            cpu["off_to_floor_ratio"],
        ),
        (
            "async relay CPU/event, telemetry on (us)",
            cpu["cpu_us_per_event_async_on"],
            "SDK constructs + packs the message",
            cpu["floor_us_per_event"],
            cpu["async_on_to_floor_ratio"],
        ),
        (
            "async relay CPU/event, telemetry off (us)",
            cpu["cpu_us_per_event_async_off"],
            "SDK constructs + packs the message",
            cpu["floor_us_per_event"],
            cpu["async_off_to_floor_ratio"],
        ),
        (
            "claim check, 1 MB events (ms per MB)",
            results["claim_check"]["relay_ms_per_mb"],
            "the SDK's upload_blob of the bodies",
            results["claim_check"]["floor_ms_per_mb"],
            results["claim_check"]["wall_ratio"],
        ),
        (
            "claim check, 1 MB events (CPU ms/MB)",
            results["claim_check"]["relay_cpu_ms_per_mb"],
            "the SDK's upload_blob of the bodies",
            results["claim_check"]["floor_cpu_ms_per_mb"],
            results["claim_check"]["cpu_ratio"],
        ),
        (
            "import function_app (CPU ms)",
            imp["import_function_app_cpu_s"] * 1000,
            "import of the bare SDKs",
            imp["import_bare_sdks_cpu_s"] * 1000,
            imp["app_to_floor_ratio"],
        ),
        (
            "host start to first 201 (s)",
            first["app_first_201_s"],
            "bare azure.functions app",
            first["bare_first_201_s"],
            first["app_to_bare_ratio"],
        ),
        (
            "relay CPU/event as a process (us)",
            results["relay_anywhere"]["best_us_per_event"]["process"],
            "on the Functions trigger (host + worker)",
            results["relay_anywhere"]["best_us_per_event"]["trigger"],
            results["relay_anywhere"]["process_over_trigger"],
        ),
    ]
    for flavour in ("sync", "aio"):
        row = results["session"][flavour]
        rows.append(
            (
                f"session commit, {flavour} (median ms)",
                row["session"]["median_ms"],
                "SDK batch of the same 2 documents",
                row["floor"]["median_ms"],
                row["ratio"],
            )
        )
        rows.append(
            (
                f"session commit, {flavour} (median ms)",
                row["session"]["median_ms"],
                "SDK batch of the 3 it writes",
                row["floor3"]["median_ms"],
                row["ratio_to_three"],
            )
        )
    feed = results["changefeed"]
    for label, row in feed["throughput"].items():
        rows.append(
            (
                f"change feed processor, per lease, {label} (docs/s)",
                row["processor_per_s"],
                "bare query_items_change_feed loop",
                row["loop_per_s"],
                row["ratio"],
            )
        )
    rows.append(
        (
            "change feed takeover after a SIGKILL (s)",
            feed["takeover_s"],
            "lease expiry + acquire interval",
            feed["takeover_bound_s"],
            feed["takeover_ratio"],
        )
    )
    rows.append(
        (
            "change feed processor memory per lease (KB)",
            feed["kb_per_lease"],
            "a bare poller's per range",
            feed["kb_per_bare_range"],
            feed["memory_ratio"],
        )
    )
    scale = results["cosmos_scale"]
    for name, label, floor, floor_label in (
        ("kept", "cosmos creates/s, 1M docs kept", "fresh", "fresh endpoint (state folder)"),
        ("fresh", "cosmos creates/s, state folder", "memory", "fresh endpoint, nothing kept"),
        ("fsync", "cosmos creates/s, --state-fsync", "fresh", "state folder, no fsync"),
    ):
        rows.append(
            (
                label,
                scale[name]["per_s"],
                floor_label,
                scale[floor]["per_s"],
                scale[name]["per_s"] / scale[floor]["per_s"],
            )
        )
    rows.append(
        (
            "cosmos CPU/create, 1M kept (us)",
            scale["kept"]["min_endpoint_cpu_us"],
            "fresh endpoint (state folder)",
            scale["fresh"]["min_endpoint_cpu_us"],
            scale["cpu_kept_to_fresh"],
        )
    )
    queries = results["cosmos_queries"]["sizes"]
    largest = max(queries)
    empty, big = queries[0], queries[largest]
    for key, label in (("first_page", "first page (100)"), ("count", "filtered COUNT")):
        rows.append(
            (
                f"cosmos {label}, {largest:,} unrelated kept (ms; ratio: speed)",
                big[key]["median_ms"],
                "the same, none kept",
                empty[key]["median_ms"],
                empty[key]["median_ms"] / big[key]["median_ms"],
            )
        )
    for n, r in queries.items():
        if n > 10000 and "count_all_speed_to_10k" in r:
            rows.append(
                (
                    f"cosmos COUNT(1) of a container, {n:,} (ms; speed)",
                    r["count_all"]["median_ms"],
                    "the same, 10,000",
                    queries[10000]["count_all"]["median_ms"],
                    r["count_all_speed_to_10k"],
                )
            )
        if n and "heap_to_json_after" in r:
            rows.append(
                (
                    f"cosmos memory a document, {n:,} kept (B)",
                    r["heap_per_document_after"],
                    "its JSON (B)",
                    r["json_bytes"] / n,
                    r["heap_to_json_after"],
                )
            )
            rows.append(
                (
                    f"cosmos RSS a document, {n:,} kept (B)",
                    r["rss_per_document_after"],
                    "its JSON (B)",
                    r["json_bytes"] / n,
                    r["rss_to_json_after"],
                )
            )
        for loop, label in (
            ("pages", "first pages 20/s"),
            ("query_loop", "a query loop"),
            ("scan_loop", "a scan loop"),
        ):
            if "fairness" not in r:
                continue
            f = r["fairness"]
            rows.append(
                (
                    f"cosmos point read p95, {label}, {n:,} (ms)",
                    f[loop]["p95_ms"],
                    "idle",
                    f["idle"]["p95_ms"],
                    f[f"{loop}_p95_to_idle"],
                )
            )
            rows.append(
                (
                    f"cosmos main thread late p99, {label}, {n:,} (ms)",
                    f[f"{loop}_event_loop"]["p99_ms"],
                    "idle",
                    f["idle_event_loop"]["p99_ms"],
                    f[f"{loop}_event_loop"]["p99_ms"] / f["idle_event_loop"]["p99_ms"],
                )
            )
    written = results["cosmos_queries"].get("written")
    if written:
        rows.append(
            (
                f"cosmos memory a document, {written['documents']:,} written (B)",
                written["heap_per_document"],
                "its JSON (B)",
                written["json_bytes"] / written["documents"],
                written["heap_to_json"],
            )
        )
    peer = results["peers"]
    for n in peer["clients"]:
        for variant, floor in (("outbox", "plain"), ("outbox", "dual"), ("dual", "plain")):
            rows.append(
                (
                    f"peers: {variant}, {n} clients (req/s)",
                    peer["cells"][variant][n]["per_s"],
                    f"{floor}, {n} clients",
                    peer["cells"][floor][n]["per_s"],
                    peer["cells"][variant][n]["per_s"] / peer["cells"][floor][n]["per_s"],
                )
            )
    for mode in ("api", "pipeline"):
        run = results["throughput"][mode]
        for n in run["clients"]:
            for variant in ("app_async", "app_sync"):
                rows.append(
                    (
                        f"{mode}: {variant}, {n} clients (req/s)",
                        run["cells"][variant][n]["per_s"],
                        f"SDK aio batch, {n} clients",
                        run["cells"]["sdk_aio"][n]["per_s"],
                        run["ratio_to_sdk_aio"][variant][n],
                    )
                )
    one = scaling["runs"][1]["relay_events_per_s"]
    for n, run in scaling["runs"].items():
        if n != 1:
            rows.append(
                (
                    f"relay drain, {n} leases (events/s)",
                    run["relay_events_per_s"],
                    "1 lease",
                    one,
                    scaling["ratio_to_one_lease"][n],
                )
            )
    sb = results["servicebus_scale"]
    kept = f"{sb['kept']:,} kept"
    rows += [
        (
            f"Service Bus sends, {kept} (msg/s)",
            sb["kept_sends_per_s"],
            "fresh",
            sb["fresh_sends_per_s"],
            sb["kept_to_fresh_ratio"],
        ),
        (
            "Service Bus sends, state file (msg/s)",
            sb["fresh_sends_per_s"],
            "memory only",
            sb["memory_only_sends_per_s"],
            sb["durable_to_memory_ratio"],
        ),
        (
            f"Service Bus restart, {kept} (s)",
            sb["restart_kept_s"],
            "fresh",
            sb["restart_fresh_s"],
            sb["restart_kept_s"] / sb["restart_fresh_s"],
        ),
        (
            f"Service Bus RSS, {kept} (MB)",
            sb["kept_rss_mb"],
            "fresh",
            sb["fresh_rss_mb"],
            sb["kept_rss_mb"] / sb["fresh_rss_mb"],
        ),
    ]
    ingest = results["failure_ingest"]
    rows.append(
        (
            f"failures' ingest, {ingest['n']:,} (failures/s)",
            ingest["ingest_per_s"],
            "the broker's batch send of them",
            ingest["floor_send_per_s"],
            ingest["ratio_to_batch_send"],
        )
    )
    rows.append(
        (
            f"their group's retry, {ingest['operation_items']:,} (failures/s)",
            ingest["operation_per_s"],
            "the broker's batch send of them",
            ingest["floor_send_per_s"],
            ingest["operation_ratio_to_batch_send"],
        )
    )
    lines = [f"{'figure':40} {'ours':>10}  {'floor':36} {'':>10} {'ratio':>7}"]
    lines += [
        f"{name:40} {ours:10.2f}  {floor_name:36} {floor:10.2f} {ratio:6.2f}x"
        for name, ours, floor_name, floor, ratio in rows
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
