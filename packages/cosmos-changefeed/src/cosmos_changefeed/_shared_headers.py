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

The sync processor runs a thread per lease on the client it is given (README, "Threads and
tasks"), so it meets the race: a read (a request that changes nothing) that fails so is sent
again (``read_again_on_headers_race``, public: the outbox's store sends its queries through it
too), and a hook copies the headers until it has read them whole. The aio client runs on one
event loop and is not affected.

**Upstream.** No report of this error exists in Azure/azure-sdk-for-python's issues (searched
for "OrderedDict mutated during iteration" with azure-cosmos): the nearest are
Azure/azure-sdk-for-python#36729 (open: "include throttle headers in exception response
headers", the SDK writing the throttle headers into ``client.last_response_headers``) and #46616
(closed unmerged: per-page response headers for ``query_items_change_feed``, "racy when multiple
change feed iterations run concurrently against the same client"). Seen with azure-cosmos
4.16.0 and 4.17.1 (``LAST_AFFECTED``), the newest release when it was written. **When it goes**:
once the lowest azure-cosmos this package allows (pyproject.toml's ``azure-cosmos>=``) is a
release after ``LAST_AFFECTED`` on which ``tests/test_threads_on_one_client.py``'s first test
fails (the SDK no longer shares the object); ``tests/test_shared_headers.py`` fails as soon as
that minimum passes ``LAST_AFFECTED``, for someone to run that test and delete this module (or
raise ``LAST_AFFECTED``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

T = TypeVar("T")

logger = logging.getLogger("cosmos_changefeed")

#: How often a read that met the race is sent again before its error is the caller's.
ATTEMPTS = 5
#: The newest azure-cosmos the race was seen with (see the module: when the workaround goes).
LAST_AFFECTED = "4.17.1"
_MESSAGES = ("mutated during iteration", "changed size during iteration")


def met_the_race(exc: BaseException) -> bool:
    """Whether ``exc`` is the iteration error of a headers object another thread wrote."""
    return isinstance(exc, RuntimeError) and any(m in str(exc) for m in _MESSAGES)


def read_again_on_headers_race(read: Callable[[], T], *, what: str = "a read") -> T:
    """``read()`` -- a request that changes nothing (a query, a change feed read), sent through
    azure-cosmos's sync client -- sent again, at most ``ATTEMPTS`` times in all, while it fails
    with ``RuntimeError: OrderedDict mutated during iteration`` (the client's headers object
    written by another thread's request, see the module); its result. Any other error, and the
    race met ``ATTEMPTS`` times, is raised as it came. ``what`` names the read in the DEBUG line
    logged at each attempt again."""
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
