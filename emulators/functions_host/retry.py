"""Function retry policies (``@app.retry`` / host.json ``retry``), as the host applies them."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_TIMESPAN = re.compile(
    r"^\s*(?:(?P<days>\d+)\.)?(?P<h>\d{1,2}):(?P<m>\d{1,2}):(?P<s>\d{1,2}(?:\.\d+)?)\s*$"
)


def parse_timespan(value: str | int | float) -> float:
    """A .NET TimeSpan string (``[d.]hh:mm:ss[.fff]``) in seconds; numbers are seconds."""
    if isinstance(value, int | float):
        return float(value)
    m = _TIMESPAN.match(value)
    if m is None:
        raise ValueError(f"not a TimeSpan: {value!r}")
    days = int(m.group("days") or 0)
    return days * 86400 + int(m.group("h")) * 3600 + int(m.group("m")) * 60 + float(m.group("s"))


@dataclass(frozen=True)
class RetryPolicy:
    """``max_retry_count`` of -1 retries forever."""

    strategy: str  # "fixed_delay" | "exponential_backoff"
    max_retry_count: int
    delay_interval: float = 0.0
    minimum_interval: float = 0.0
    maximum_interval: float = 0.0

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> RetryPolicy:
        """From the decorator's setting dict (snake_case) or host.json ``retry`` (camelCase)."""
        norm = {re.sub(r"[_\s]", "", str(k)).lower(): v for k, v in data.items()}
        strategy = re.sub(r"[_\s]", "", str(norm.get("strategy", ""))).lower()
        if strategy not in {"fixeddelay", "exponentialbackoff"}:
            raise ValueError(f"unknown retry strategy {data.get('strategy')!r}")
        count = int(norm.get("maxretrycount", 0))

        def span(key: str) -> float:
            raw = norm.get(key)
            return 0.0 if raw is None else parse_timespan(raw)

        if strategy == "fixeddelay":
            return cls("fixed_delay", count, delay_interval=span("delayinterval"))
        minimum = span("minimuminterval")
        maximum = span("maximuminterval") or max(minimum, 900.0)
        return cls("exponential_backoff", count, minimum_interval=minimum, maximum_interval=maximum)

    def allows(self, retries_done: int) -> bool:
        """Whether another retry may follow ``retries_done`` retries."""
        return self.max_retry_count < 0 or retries_done < self.max_retry_count

    def delay(self, retry_number: int) -> float:
        """Seconds to wait before retry number ``retry_number`` (1-based)."""
        if self.strategy == "fixed_delay":
            return self.delay_interval
        exponent = min(retry_number - 1, 30)
        return float(min(self.maximum_interval, self.minimum_interval * float(2**exponent)))
