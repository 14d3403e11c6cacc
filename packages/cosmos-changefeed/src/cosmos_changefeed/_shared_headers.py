"""azure-cosmos's sync client shared by threads: one headers object written by every thread.

After each request, azure-cosmos 4.x's retry loop (``_retry_utility.Execute``) writes the throttle
headers (``x-ms-throttle-retry-count``, ``x-ms-throttle-retry-wait-time-ms``) into
``client_connection.last_response_headers``: the headers object of whichever request *on any
thread* set it last. A query copying its own page's headers meanwhile
(``__QueryFeed``: ``response_headers.update(post_response_headers)``), or a ``response_hook``
reading them, iterates that very object: ``RuntimeError: OrderedDict mutated during iteration``
(requests' ``CaseInsensitiveDict`` keeps an ``OrderedDict``). Reproduced with 8 threads on one
client, half querying one partition, half reading an item: 18 failed queries in 2,561 with
``sys.setswitchinterval(1e-6)``; seen once in this project's suite on a loaded machine.

The sync processor runs a thread per lease on the client it is given (README, "Threading"), so
it meets the race: a read (a request that changes nothing) that fails so is sent again, and a
hook copies the headers until it has read them whole. The aio client runs on one event loop and
is not affected.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

T = TypeVar("T")

logger = logging.getLogger("cosmos_changefeed")

#: How often a read that met the race is sent again before its error is the caller's.
ATTEMPTS = 5
_MESSAGES = ("mutated during iteration", "changed size during iteration")


def met_the_race(exc: BaseException) -> bool:
    """Whether ``exc`` is the iteration error of a headers object another thread wrote."""
    return isinstance(exc, RuntimeError) and any(m in str(exc) for m in _MESSAGES)


def read_again_on_the_race(read: Callable[[], T], *, what: str) -> T:
    """``read()``, sent again (at most ``ATTEMPTS`` times in all) while it fails with the shared
    headers' race; only for requests that change nothing."""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return read()
        except RuntimeError as exc:
            if not met_the_race(exc) or attempt == ATTEMPTS:
                raise
            logger.debug(
                "%s met azure-cosmos's shared headers race (attempt %d): read again",
                what,
                attempt,
                extra={"attempt": attempt},
            )
    raise AssertionError("unreachable")  # pragma: no cover


def copy_headers(headers: Mapping[str, Any]) -> dict[str, str]:
    """``headers`` copied (keys lowercased, values as text), again while another thread's
    request adds the throttle headers to them meanwhile."""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return {str(k).lower(): str(v) for k, v in list(headers.items())}
        except RuntimeError as exc:
            if not met_the_race(exc) or attempt == ATTEMPTS:
                raise
    raise AssertionError("unreachable")  # pragma: no cover
