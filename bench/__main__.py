"""`make bench`: every benchmark in one run, printed as figures and ratios (no assertions).
Results also go to .stack/bench.json."""

from __future__ import annotations

import json
import logging
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

from bench import api, cosmos_sdk, relay_cpu, relay_flow
from bench.stats import table
from tools.stack import ROOT, Ports, Stack


def main() -> None:
    warnings.filterwarnings("ignore", message="Unverified HTTPS request")
    logging.basicConfig(level=logging.WARNING)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        print("Cosmos SDK against the local endpoint ...", flush=True)
        results["cosmos_sdk"] = cosmos_sdk.measure(n=500)
        print(json.dumps(results["cosmos_sdk"], indent=2, default=str))

        print("\nHTTP API through the local Functions host ...", flush=True)
        started = time.perf_counter()
        with Stack(workdir=base / "api", ports=Ports.free(), with_servicebus=False) as stack:
            # Stack start returns once the host listens (worker started, app indexed and
            # loaded); healthy = the first 200 from /health (dependencies built, store reached).
            results["start_to_listening_s"] = time.perf_counter() - started
            results["start_to_healthy_s"] = api.until_healthy(stack) - started
            results["api"] = api.run(stack, n=500)
        print(f"  local stack (Cosmos + host with the worker) start: listening after "
              f"{results['start_to_listening_s']:.2f} s, healthy after "
              f"{results['start_to_healthy_s']:.2f} s")
        print(table("per call (n=500)", results["api"]["rows"]))
        print(f"  POST /api/contacts ÷ bare SDK batch of the same 2 documents: "
              f"{results['api']['post_to_sdk_batch_ratio']:.2f}x")
        print(f"  host overhead per HTTP call: POST "
              f"{results['api']['host_overhead_ms_post']:.3f} ms, GET "
              f"{results['api']['host_overhead_ms_get']:.3f} ms")

        print("\nRelay CPU per event (parse, map, pack; no I/O) beside the SDK's floor ...",
              flush=True)
        results["relay_cpu"] = cpu = relay_cpu.measure()
        print(f"  telemetry on {cpu['cpu_us_per_event_on']:.1f} us/event, off "
              f"{cpu['cpu_us_per_event_off']:.1f}; floor (SDK constructs and packs the same "
              f"message, {cpu['floor_kind']}) {cpu['floor_us_per_event']:.1f}, add-only "
              f"{cpu['add_only_us']:.1f}")
        print(f"  on ÷ floor {cpu['on_to_floor_ratio']:.2f}x (aim 1.2), off ÷ floor "
              f"{cpu['off_to_floor_ratio']:.2f}x, on ÷ off {cpu['on_to_off_ratio']:.2f}x")

        print("\nRelay throughput (backlog of 2000 events over 200 contacts) ...", flush=True)
        results["relay_throughput"] = relay_flow.throughput(base / "throughput")
        print(f"  {results['relay_throughput']}")

        for poll in (1000, 100):
            print(f"\nCommit-to-receive latency, 20 writes/s, FEED_POLL_DELAY_MS={poll} ...",
                  flush=True)
            results[f"latency_poll_{poll}"] = relay_flow.latency(base / f"lat{poll}",
                                                                 poll_ms=poll)
            print(f"  {results[f'latency_poll_{poll}']}")
    out = ROOT / ".stack" / "bench.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2, default=str))
    print(f"\nwritten to {out}")


if __name__ == "__main__":
    main()
