"""Small helpers shared by the benchmarks: timing loops and percentiles."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def timed(fn: Callable[[], object], n: int, *, warmup: int = 20) -> dict[str, float]:
    """Median and p99 in milliseconds over n calls."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return {"n": n, "median_ms": statistics.median(samples), "p99_ms": percentile(samples, 99)}


def table(title: str, rows: dict[str, dict[str, float]]) -> str:
    lines = [f"\n{title}", f"  {'':44} {'n':>6} {'median ms':>10} {'p99 ms':>10}"]
    for name, r in rows.items():
        lines.append(f"  {name:44} {int(r['n']):>6} {r['median_ms']:>10.3f} {r['p99_ms']:>10.3f}")
    return "\n".join(lines)
