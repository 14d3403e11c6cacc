"""The local Service Bus endpoint at scale (issue 45): what keeping 100,000 messages costs.

Through the synchronous azure-servicebus SDK against ``funcstack.servicebus`` with a state
file (durable before acknowledged: each send is written before its ``accepted`` disposition):

- send throughput, one acknowledged message of about 1 KB at a time, with 100,000 such messages
  kept in the same queue ÷ the same on a fresh endpoint (the endpoints run at once and are
  measured in turns, so that the shared machine's busy moments fall on each alike);
- the same fresh without a state file (memory only): what durability costs a send;
- restart (process start to ready, the state file read) with them kept, and fresh;
- the endpoint's resident memory (RSS) with them kept, and fresh.

Figures, not assertions. ``measure()`` returns them; ``python -m bench.servicebus_scale``
prints them (``--kept N`` for another number of messages kept).
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSender

from funcstack.servicebus import ServiceBusEndpoint, start_servicebus

QUEUE = "scale"
BODY = "x" * 1000
SENDS = 1000
ROUNDS = 9


def _config(base: Path) -> Path:
    path = base / "Config.json"
    path.write_text(
        json.dumps(
            {
                "UserConfig": {
                    "Namespaces": [
                        {
                            "Name": "sbemulatorns",
                            "Topics": [],
                            "Queues": [
                                {"Name": QUEUE, "Properties": {"DefaultMessageTimeToLive": "P14D"}}
                            ],
                        }
                    ],
                    "Logging": {"Type": "File"},
                }
            }
        )
    )
    return path


def _rss_mb(endpoint: ServiceBusEndpoint) -> float:
    for line in Path(f"/proc/{endpoint.started().pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _sends_per_s(sender: ServiceBusSender, n: int) -> float:
    """``n`` acknowledged sends of one message each, one after the other: messages a second."""
    started = time.perf_counter()
    for _ in range(n):
        sender.send_messages(ServiceBusMessage(BODY))
    return n / (time.perf_counter() - started)


def _fill(sender: ServiceBusSender, kept: int) -> float:
    """Send ``kept`` messages in full batches: seconds taken."""
    started = time.perf_counter()
    left = kept
    while left:
        batch = sender.create_message_batch()
        while left:
            try:
                batch.add_message(ServiceBusMessage(BODY))
            except ValueError:
                break
            left -= 1
        sender.send_messages(batch)
    return time.perf_counter() - started


def _start(base: Path, state: Path | None) -> tuple[ServiceBusEndpoint, float]:
    started = time.perf_counter()
    endpoint = start_servicebus(
        config=_config(base),
        state_file=state,
        timeout=300,
        log_path=base / "servicebus.log",
        log_level="WARNING",
    )
    return endpoint, time.perf_counter() - started


def _throughputs(endpoints: dict[str, ServiceBusEndpoint], sends: int) -> dict[str, list[float]]:
    """Sends a second to each endpoint, the endpoints in turns (``ROUNDS`` rounds of ``sends``
    each, so that a busy moment of the shared machine falls on all alike): each round's."""
    with ExitStack() as stack:
        senders = {}
        for name, endpoint in endpoints.items():
            client = stack.enter_context(
                ServiceBusClient.from_connection_string(endpoint.connection_string)
            )
            senders[name] = stack.enter_context(client.get_queue_sender(QUEUE))
            _sends_per_s(senders[name], 100)  # warm: links open, code paths taken
        rates: dict[str, list[float]] = {name: [] for name in endpoints}
        for _ in range(ROUNDS):
            for name, sender in senders.items():
                rates[name].append(_sends_per_s(sender, sends))
    return rates


def _stopped(endpoint: ServiceBusEndpoint) -> float:
    started = time.perf_counter()
    endpoint.stop(timeout=120)
    return time.perf_counter() - started


def measure(base: Path, *, kept: int = 100_000, sends: int = SENDS) -> dict[str, Any]:
    """Three endpoints at once: memory only, a fresh state file, and one with ``kept``
    messages (filled, then restarted on its file)."""
    logging.getLogger("azure").setLevel(logging.WARNING)
    out: dict[str, Any] = {"kept": kept, "sends": sends, "body_bytes": len(BODY)}
    dirs = {name: base / name for name in ("memory", "fresh", "kept")}
    for folder in dirs.values():
        folder.mkdir(parents=True, exist_ok=True)
    states = {name: dirs[name] / "servicebus.state" for name in ("fresh", "kept")}
    endpoints: dict[str, ServiceBusEndpoint] = {}
    try:
        endpoints["kept"], _ = _start(dirs["kept"], states["kept"])
        with (
            ServiceBusClient.from_connection_string(endpoints["kept"].connection_string) as client,
            client.get_queue_sender(QUEUE) as sender,
        ):
            out["fill_s"] = _fill(sender, kept)
        out["stop_kept_s"] = _stopped(endpoints.pop("kept"))
        out["state_file_mb"] = states["kept"].stat().st_size / 2**20
        endpoints["kept"], out["restart_kept_s"] = _start(dirs["kept"], states["kept"])
        endpoints["fresh"], out["fresh_start_s"] = _start(dirs["fresh"], states["fresh"])
        endpoints["memory"], _ = _start(dirs["memory"], None)
        out["kept_rss_mb"] = _rss_mb(endpoints["kept"])
        out["fresh_rss_mb"] = _rss_mb(endpoints["fresh"])
        rates = _throughputs(endpoints, sends)
    finally:
        for endpoint in endpoints.values():
            endpoint.stop()
    # the best round of each (the endpoint's own speed; the rest is its neighbours'), and the
    # median of the rounds' own ratios (each of two rounds measured one after the other)
    out["rounds"] = rates
    out["kept_sends_per_s"] = max(rates["kept"])
    out["fresh_sends_per_s"] = max(rates["fresh"])
    out["memory_only_sends_per_s"] = max(rates["memory"])
    endpoint, out["restart_fresh_s"] = _start(dirs["fresh"], states["fresh"])
    endpoint.stop()
    out["kept_to_fresh_ratio"] = out["kept_sends_per_s"] / out["fresh_sends_per_s"]
    out["durable_to_memory_ratio"] = out["fresh_sends_per_s"] / out["memory_only_sends_per_s"]
    out["kept_to_fresh_median_round_ratio"] = statistics.median(
        k / f for k, f in zip(rates["kept"], rates["fresh"], strict=True)
    )
    out["durable_to_memory_median_round_ratio"] = statistics.median(
        f / m for f, m in zip(rates["fresh"], rates["memory"], strict=True)
    )
    return out


def report(figures: dict[str, Any]) -> str:
    f = figures
    return "\n".join(
        [
            f"  sends (one acknowledged ~1 KB message at a time, the endpoints in turns, best of "
            f"{ROUNDS} x {f['sends']}): "
            f"fresh {f['fresh_sends_per_s']:.0f}/s, with {f['kept']:,} kept "
            f"{f['kept_sends_per_s']:.0f}/s: {f['kept_to_fresh_ratio']:.2f}x (the median of the "
            f"rounds' ratios {f['kept_to_fresh_median_round_ratio']:.2f}x)",
            f"  durability's cost: fresh with a state file ÷ memory only "
            f"({f['memory_only_sends_per_s']:.0f}/s): {f['durable_to_memory_ratio']:.2f}x (rounds "
            f"{f['durable_to_memory_median_round_ratio']:.2f}x)",
            f"  restart: with {f['kept']:,} kept {f['restart_kept_s']:.2f} s, fresh "
            f"{f['restart_fresh_s']:.2f} s (stop with them kept {f['stop_kept_s']:.2f} s; "
            f"filling them took {f['fill_s']:.1f} s; state file {f['state_file_mb']:.0f} MB)",
            f"  memory (RSS): with {f['kept']:,} kept {f['kept_rss_mb']:.0f} MB, fresh "
            f"{f['fresh_rss_mb']:.0f} MB",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.servicebus_scale")
    parser.add_argument("--kept", type=int, default=100_000)
    parser.add_argument("--sends", type=int, default=SENDS)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        figures = measure(Path(tmp), kept=args.kept, sends=args.sends)
    print(report(figures))
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
