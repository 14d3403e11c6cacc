"""What the sync and the aio estimator share, written once: the checks when one is made (the
processor's own: ``_checks``, ``_options``), and the push runner's decisions and words. The
shells (``_estimator.py``: a thread; ``aio/_estimator_async.py``: a task) read and wait.

The push runner is .NET's ``GetChangeFeedEstimatorBuilder(processorName, handler,
estimationPeriod)`` (``ChangeFeedEstimatorRunner``): once started, every ``estimation_interval``
(default 5 s, .NET's) the estimator reads every lease's estimate and hands them to
``on_estimate`` -- here the states lease by lease, where .NET's delegate gets their sum. A
failed read or a failing ``on_estimate`` is logged and the next period comes all the same.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from cosmos_changefeed._checks import Flavour, check_callable, check_containers
from cosmos_changefeed._events import error_text, logger
from cosmos_changefeed._options import ChangeFeedProcessorState, EstimateFrom, check_processor_name

#: .NET's ``ChangeFeedEstimatorRunner`` default period.
DEFAULT_ESTIMATION_INTERVAL = 5.0


def check_estimate_from(estimate_from: object) -> None:
    """``estimate_from``: None, "beginning" or a timezone-aware time not in the future ("now"
    is a running processor's own: an estimator cannot know it)."""
    if estimate_from is None or estimate_from == "beginning":
        return
    if not isinstance(estimate_from, dt.datetime):
        raise ValueError(
            f"estimate_from: 'beginning', a datetime or None (a processor's start 'now' is "
            f"known to that processor only), not {estimate_from!r}"
        )
    if estimate_from.tzinfo is None:
        raise ValueError("estimate_from: a time needs a time zone")
    now = dt.datetime.now(dt.UTC)
    if estimate_from > now:
        raise ValueError(
            f"estimate_from: {estimate_from.isoformat()} is in the future (now is "
            f"{now.isoformat(timespec='seconds')})"
        )


class EstimatorBase:
    """The part of an estimator that neither reads nor waits."""

    _flavour: ClassVar[Flavour]
    _lease_ports: ClassVar[tuple[type, ...]]
    _feed_ports: ClassVar[tuple[type, ...]] = ()

    def __init__(
        self,
        monitored_container: object,
        lease_container: object,
        *,
        processor_name: str,
        estimate_from: EstimateFrom,
        on_estimate: Callable[[list[ChangeFeedProcessorState]], Any] | None,
        estimation_interval: float,
    ) -> None:
        check_processor_name(processor_name)
        check_estimate_from(estimate_from)
        if on_estimate is not None:
            check_callable(
                on_estimate,
                "on_estimate",
                flavour=self._flavour,
                takes="(states)",
                arity=1,
                awaited=True,
            )
        if (
            isinstance(estimation_interval, bool)
            or not isinstance(estimation_interval, int | float)
            or not math.isfinite(estimation_interval)
            or estimation_interval <= 0
        ):
            raise ValueError(
                f"estimation_interval must be a finite number of seconds > 0, not "
                f"{estimation_interval!r}"
            )
        check_containers(
            monitored_container, lease_container, self._flavour, self._feed_ports, self._lease_ports
        )
        self.processor_name = processor_name
        self.estimate_from = estimate_from
        self.estimation_interval = float(estimation_interval)
        self._on_estimate = on_estimate

    def _push_callback(self) -> Callable[[list[ChangeFeedProcessorState]], Any]:
        if self._on_estimate is None:
            raise RuntimeError(
                "this estimator has no on_estimate: give ChangeFeedEstimator(..., "
                "on_estimate=...) to start it (get_estimates() reads once, without starting)"
            )
        return self._on_estimate

    def _pushed(self, states: Sequence[ChangeFeedProcessorState]) -> None:
        logger.debug(
            "estimator '%s': %d lease(s), %d change(s) pending",
            self.processor_name,
            len(states),
            sum(state.estimated_lag for state in states),
        )

    def _push_failed(self, what: str, exc: BaseException) -> None:
        logger.warning(
            "estimator '%s': %s failed (%s); again in %gs",
            self.processor_name,
            what,
            error_text(exc),
            self.estimation_interval,
            stacklevel=2,
        )
