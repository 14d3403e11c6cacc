"""`make status`: a one-screen summary of the outbox from the local OTLP/JSON files
(.stack/otel/metrics.jsonl, written by `funcstack.otel` in the workers during `make run`) and,
while the stack runs, from the app's own `GET /api/outbox/status`.

It says first whether a stack runs from this checkout (the processes `make run` recorded in
.stack/pids.json, checked by PID, start time and command line) and when the figures were
exported: with no stack running they are the last run's, said so, and the exit status is 1.
Backlog and quarantined records are the API's (now) when it answers; otherwise the backlog is
the timer's exported estimate, or estimated live with the app's own estimator. The relay's
figures (lag, messages sent, offloaded by claim check, failures, quarantine actions) are its
counters since its start.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cosmos_outbox import telemetry as names
from funcstack.otel import METRICS_FILE
from funcstack.services import running_stack
from tools.stack import PIDFILE, ROOT

DEFAULT_DIR = ROOT / ".stack" / "otel"
#: The local stack's API (`make run`).
DEFAULT_API = "http://127.0.0.1:7071/api"


@dataclass
class Histogram:
    count: int = 0
    total: float = 0.0
    bounds: list[float] = field(default_factory=list)
    buckets: list[int] = field(default_factory=list)

    def quantile(self, q: float) -> float | None:
        """Linear interpolation inside the bucket holding the q-quantile."""
        if not self.count or not self.buckets:
            return None
        rank, seen = q * self.count, 0
        for i, n in enumerate(self.buckets):
            if n and seen + n >= rank:
                low = self.bounds[i - 1] if i > 0 else 0.0
                high = self.bounds[i] if i < len(self.bounds) else low * 2 or 1.0
                return low + (high - low) * (rank - seen) / n
            seen += n
        return self.bounds[-1] if self.bounds else None


@dataclass
class Summary:
    sums: dict[str, float] = field(default_factory=dict)
    failures_by_type: dict[str, float] = field(default_factory=dict)
    gauges: dict[tuple[str, str], float] = field(default_factory=dict)
    lag: Histogram = field(default_factory=Histogram)
    send: Histogram = field(default_factory=Histogram)


def _attrs(point: dict[str, Any]) -> dict[str, Any]:
    return {a["key"]: next(iter(a["value"].values()), None) for a in point.get("attributes", [])}


def _number(point: dict[str, Any]) -> float:
    return float(point.get("asDouble", point.get("asInt", 0)))


def summarise(lines: Iterable[str]) -> Summary:
    """Cumulative points: the last export of each metric holds its totals."""
    latest: dict[str, dict[str, Any]] = {}
    for line in lines:
        if not line.strip():
            continue
        request = json.loads(line)
        for rm in request.get("resourceMetrics", []):
            for sm in rm.get("scopeMetrics", []):
                for metric in sm.get("metrics", []):
                    latest[metric["name"]] = metric
    summary = Summary()
    for name, metric in latest.items():
        if "sum" in metric:
            for point in metric["sum"].get("dataPoints", []):
                summary.sums[name] = summary.sums.get(name, 0.0) + _number(point)
                if name == names.RELAY_FAILURES:
                    kind = str(_attrs(point).get("error.type"))
                    summary.failures_by_type[kind] = summary.failures_by_type.get(
                        kind, 0.0
                    ) + _number(point)
        elif "gauge" in metric:
            for point in metric["gauge"].get("dataPoints", []):
                summary.gauges[(name, str(_attrs(point).get("outbox.lease")))] = _number(point)
        elif "histogram" in metric:
            target = {names.RELAY_LAG: summary.lag, names.OPERATION_DURATION: summary.send}.get(
                name
            )
            for point in metric["histogram"].get("dataPoints", []) if target else []:
                assert target is not None
                target.count += int(point.get("count", 0))
                target.total += float(point.get("sum", 0.0))
                counts = [int(c) for c in point.get("bucketCounts", [])]
                target.bounds = [float(b) for b in point.get("explicitBounds", [])]
                target.buckets = (
                    [a + b for a, b in zip(target.buckets, counts, strict=True)]
                    if len(target.buckets) == len(counts)
                    else counts
                )
    return summary


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.1f} s"


def _size(n: float) -> str:
    if n < 1024 * 1024:
        return f"{n / 1024:.0f} KB"
    return f"{n / (1024 * 1024):.1f} MB"


def live_backlog(settings_file: Path) -> tuple[int, float] | None:
    """(pending, oldest age s) estimated now from the local stack, or None if unreachable."""
    if not settings_file.exists():
        return None
    values = json.loads(settings_file.read_text())["Values"]
    os.environ.update({k: str(v) for k, v in values.items() if k not in os.environ})
    try:
        from funcstack.cosmos import local_tls

        # as the app's host runs: funcstack's authority trusted besides the machine's
        os.environ.update(local_tls().environment())
        from cosmos_outbox import Outbox
        from cosmos_outbox.ports import BacklogEstimator
        from domain.contact import Contact

        # The Contacts app's outbox services, from the settings (its default composition).
        estimator = Outbox((Contact,)).services().backlog()
        assert isinstance(estimator, BacklogEstimator)
        now = time.time()
        leases = estimator.estimate()
    except Exception as exc:  # status is best effort: say why, do not crash
        print(f"  (live backlog estimate unavailable: {type(exc).__name__})")
        return None
    # As the backlog timer reports it: the age of the oldest pending change of any lease.
    ages = [
        max(0.0, now - b.oldest_created_at)
        for b in leases
        if b.pending and b.oldest_created_at is not None
    ]
    return sum(b.pending for b in leases), max(ages, default=0.0)


@dataclass(frozen=True)
class Context:
    """What the figures are of: whether a stack runs, when they were exported, and the app's
    own status when it answered (or why not)."""

    running: bool = True
    exported_at: float | None = None
    now: float = field(default_factory=time.time)
    api: dict[str, Any] | None = None
    api_error: str | None = None


def exported_at(lines: Iterable[str]) -> float | None:
    """When the last export happened (epoch s): the latest point time in the file."""
    latest = 0
    for line in lines:
        if not line.strip():
            continue
        for rm in json.loads(line).get("resourceMetrics", []):
            for sm in rm.get("scopeMetrics", []):
                for metric in sm.get("metrics", []):
                    for kind in ("sum", "gauge", "histogram"):
                        for point in metric.get(kind, {}).get("dataPoints", []):
                            latest = max(latest, int(point.get("timeUnixNano", 0)))
    return latest / 1e9 if latest else None


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s ago"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min ago"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h ago"
    return f"{seconds / 86400:.0f} days ago"


def heading(context: Context) -> list[str]:
    when = (
        "no figures exported yet"
        if context.exported_at is None
        else "figures exported at "
        + time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(context.exported_at))
        + f" ({_age(max(0.0, context.now - context.exported_at))})"
    )
    if context.running:
        return [f"outbox status: local stack running; {when}"]
    return [
        "NO LOCAL STACK IS RUNNING from this checkout (`make run` starts one).",
        f"The figures below are its last run's, not current: {when}.",
    ]


def render(
    summary: Summary, live: tuple[int, float] | None = None, context: Context | None = None
) -> str:
    context = context or Context()
    api = context.api
    pending = summary.gauges.get((names.PENDING, names.ALL_LEASES))
    oldest = summary.gauges.get((names.OLDEST_PENDING_AGE, names.ALL_LEASES))
    leases = sorted(
        lease
        for (name, lease) in summary.gauges
        if name == names.PENDING and lease != names.ALL_LEASES
    )
    source = f"timer estimate at the export, {len(leases)} lease(s)"
    if api is not None:
        pending, oldest = api.get("pending"), api.get("oldestPendingAgeSeconds")
        source = f"now, from the API, {len(api.get('leases') or [])} lease(s)"
    elif pending is None and live is not None:
        pending, oldest, source = live[0], live[1], "live estimate"
    if api is not None:
        quarantined = f"{api.get('quarantined')}  (records not resolved, now, from the API)"
    elif not context.running:
        quarantined = "-  (no stack running)"
    else:
        quarantined = f"-  (the API did not answer: {context.api_error or 'unknown'})"
    lag = summary.lag
    failures = ", ".join(f"{k}={v:.0f}" for k, v in sorted(summary.failures_by_type.items()))
    rows = [
        ("backlog (pending changes)", "-" if pending is None else f"{pending:.0f}  ({source})"),
        ("oldest pending age", _seconds(oldest) if pending else "-"),
        (
            "relay lag p50 / p95 / p99",
            " / ".join(_seconds(lag.quantile(q)) for q in (0.5, 0.95, 0.99)) + f"  (n={lag.count})",
        ),
        ("messages sent", f"{summary.sums.get(names.SENT_MESSAGES, 0):.0f}"),
        (
            "sends (batches)",
            f"{summary.send.count}, mean "
            + _seconds(summary.send.total / summary.send.count if summary.send.count else None),
        ),
        (
            "relay failures",
            f"{summary.sums.get(names.RELAY_FAILURES, 0):.0f}"
            + (f"  ({failures})" if failures else ""),
        ),
        (
            "offloaded (claim check)",
            f"{summary.sums.get(names.OFFLOADED, 0):.0f} events, "
            f"{_size(summary.sums.get(names.OFFLOADED_BYTES, 0))}  (sent with their bodies in the "
            "payload store; counted in messages sent)",
        ),
        ("quarantined events now", quarantined),
        (
            "quarantine actions",
            f"{summary.sums.get(names.QUARANTINED, 0):.0f}  (events the relay "
            "set aside since it started, set aside again included)",
        ),
    ]
    width = max(len(k) for k, _ in rows)
    return "\n".join([*heading(context), *(f"  {k.ljust(width)}  {v}" for k, v in rows)])


def api_status(base: str = DEFAULT_API) -> tuple[dict[str, Any] | None, str | None]:
    """The app's GET /outbox/status (bounded by the app to 4 s), or why there is none (the
    local host checks no key; a key from OUTBOX_ADMIN_KEY is sent when set)."""
    import http.client

    from tools.httpclient import Client

    key = os.environ.get("OUTBOX_ADMIN_KEY")
    client = Client(base, timeout=10)
    try:
        reply = client.request(
            "GET", "/outbox/status", headers={"x-functions-key": key} if key else None
        )
    except (OSError, http.client.HTTPException) as exc:
        return None, f"GET {base}/outbox/status: {type(exc).__name__}: {exc!s:.200}"
    finally:
        client.close()
    try:
        body = reply.json()
    except ValueError:
        body = None
    if reply.status != 200 or not isinstance(body, dict):
        detail = body.get("detail") if isinstance(body, dict) else None
        return None, f"{reply.status}" + (f" {detail}" if detail else "")
    return body, None


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    directory = Path(args[0]) if args else DEFAULT_DIR
    path = directory / METRICS_FILE
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    running = bool(running_stack(PIDFILE))
    if not lines:
        print(f"no metrics in {path} yet" + (" (the workers export every 5 s)" if running else ""))
    summary = summarise(lines)
    api, api_error = api_status() if running else (None, None)
    live = None
    if running and api is None and (names.PENDING, names.ALL_LEASES) not in summary.gauges:
        live = live_backlog(ROOT / "local.settings.json")
    print(
        render(
            summary,
            live,
            Context(running=running, exported_at=exported_at(lines), api=api, api_error=api_error),
        )
    )
    return 0 if running else 1


if __name__ == "__main__":
    raise SystemExit(main())
