"""azure-cosmos's sync client shared by threads (an app serves concurrent invocations on one
client): after each request, the SDK's retry loop writes the throttle headers into
``client_connection.last_response_headers``, the headers object of whichever request on *any*
thread set it last, so a query copying its own page's headers meanwhile fails with
``RuntimeError: OrderedDict mutated during iteration``. A query changes nothing: one that met
the race is sent again. (cosmos-changefeed's ``_shared_headers`` says more; its test
``test_threads_on_one_client.py`` pins the SDK's behaviour.)"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

#: How often a query that met the race is sent in all before its error is the caller's.
ATTEMPTS = 5


def read_again_on_the_race(read: Callable[[], T]) -> T:
    """``read()``, sent again while it fails with the shared headers' race (a query only)."""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return read()
        except RuntimeError as exc:
            if "mutated during iteration" not in str(exc) or attempt == ATTEMPTS:
                raise
    raise AssertionError("unreachable")  # pragma: no cover
