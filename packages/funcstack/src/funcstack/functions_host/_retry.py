"""Function retry policies (``@app.retry`` / host.json ``retry``), as the host applies them.

Exponential back-off is the WebJobs SDK's randomized strategy: the first retry waits the
minimum interval; each later one waits ``minimum + r * 2^(k-1) * minimum`` (``r`` uniform in
0.8..1.2, ``k`` counting from 1) until that reaches the maximum, which then holds. The retry
count lives in memory only (a restarted host starts counting again).
"""

from __future__ import annotations

import asyncio
import logging
import random
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger("funcstack.functions_host._retry")

_TIMESPAN = re.compile(
    r"^\s*(?:(?P<days>\d+)\.)?(?P<h>\d{1,2}):(?P<m>\d{1,2}):(?P<s>\d{1,2}(?:\.\d+)?)\s*$"
)
RANDOMIZATION_FACTOR = 0.2


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
        """From host.json ``retry`` (camelCase) or the decorator's setting dict (snake_case)."""
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

    @classmethod
    def from_rpc(cls, options: Any) -> RetryPolicy:
        """From the ``RpcRetryOptions`` the worker returned with the function's metadata."""
        strategy = (
            options.DESCRIPTOR.fields_by_name["retry_strategy"]
            .enum_type.values_by_number[options.retry_strategy]
            .name
        )
        count = int(options.max_retry_count)
        if strategy == "fixed_delay":
            delay = options.delay_interval.ToTimedelta().total_seconds()
            return cls("fixed_delay", count, delay_interval=delay)
        return cls(
            "exponential_backoff",
            count,
            minimum_interval=options.minimum_interval.ToTimedelta().total_seconds(),
            maximum_interval=options.maximum_interval.ToTimedelta().total_seconds(),
        )

    def allows(self, retries_done: int) -> bool:
        """Whether another retry may follow ``retries_done`` retries."""
        return self.max_retry_count < 0 or retries_done < self.max_retry_count

    def backoff(self, rng: random.Random | None = None) -> Backoff:
        """The delays of one failing batch, one per retry."""
        return Backoff(self, rng or random.Random())


@dataclass
class Backoff:
    """The host's delay strategy for one execution (state carried from retry to retry)."""

    policy: RetryPolicy
    rng: random.Random
    _current: float = field(default=0.0, init=False)
    _exponent: int = field(default=0, init=False)

    def next_delay(self) -> float:
        policy = self.policy
        if policy.strategy == "fixed_delay":
            return policy.delay_interval
        if self._current == policy.maximum_interval and self._exponent:
            return self._current
        interval = policy.minimum_interval
        if self._exponent > 0:
            factor = self.rng.uniform(1.0 - RANDOMIZATION_FACTOR, 1.0 + RANDOMIZATION_FACTOR)
            interval += factor * (2.0 ** (self._exponent - 1)) * policy.minimum_interval
        if interval < policy.maximum_interval:
            self._current = interval
        else:
            self._current = policy.maximum_interval
        self._exponent += 1
        return self._current


#: One invocation attempt: given (retry count, max retry count) for the RetryContext, the
#: failure's message, or None when the function succeeded.
Attempt = Callable[[int, int], Awaitable[str | None]]


async def invoke_with_retries(
    policy: RetryPolicy | None, attempt: Attempt, *, what: str
) -> tuple[bool, int]:
    """Run ``attempt`` until it succeeds or the policy allows no further retry, waiting the
    host's back-off between tries (every trigger the same way); logs each failure and each
    retry as ``what``. Returns whether it succeeded and how many retries were made."""
    backoff = policy.backoff() if policy else None
    max_retry_count = policy.max_retry_count if policy else 0
    retries = 0
    while True:
        error = await attempt(retries, max_retry_count)
        if error is None:
            return True, retries
        logger.error("%s: invocation failed (retry %d): %s", what, retries, error)
        if policy is None or backoff is None or not policy.allows(retries):
            return False, retries
        retries += 1
        delay = backoff.next_delay()
        logger.warning(
            "%s: retry %d of %s in %.2fs",
            what,
            retries,
            "unlimited" if max_retry_count < 0 else max_retry_count,
            delay,
        )
        await asyncio.sleep(delay)
