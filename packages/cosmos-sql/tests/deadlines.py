"""Named deadlines for tests that wait on servers, processes and background work, scaled by one
setting for a slow machine.

A test never asserts how fast something happened: it waits for the event it expects, under one
of these deadlines, and fails naming what did not happen. The deadlines are generous for a
machine several times slower than a developer's; a faster machine only ends the waits sooner.
CPython's ``test.support`` is the model (``LOOPBACK_TIMEOUT``, ``SHORT_TIMEOUT``,
``LONG_TIMEOUT``, raised together for a slow buildbot).

``TEST_DEADLINE_SCALE`` (a positive number, default 1) multiplies every deadline: a machine
slower still than these allow (an emulated CPU, a Raspberry Pi) sets it once for the whole run.

Where a test checks a time bound the product promises (a takeover after a lease's expiry, a
route that answers within its bound), it sets that bound in the product's settings and waits
for the behaviour under a deadline from here; it never relies on the machine being quick.

It imports only the standard library, so a test suite that cannot install funcstack (on Python
3.11 or 3.12) copies it into its tests folder, as it copies ``funcstack.external``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TypeVar

__all__ = [
    "LONG",
    "LOOPBACK",
    "SCALE",
    "SCALE_VARIABLE",
    "SHORT",
    "DeadlineError",
    "scaled",
    "wait_for",
]

T = TypeVar("T")

#: The environment variable that multiplies every deadline.
SCALE_VARIABLE = "TEST_DEADLINE_SCALE"


def _scale() -> float:
    text = os.environ.get(SCALE_VARIABLE, "").strip()
    if not text:
        return 1.0
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{SCALE_VARIABLE}={text!r}: not a number (e.g. 1, 2.5)") from None
    if not value > 0:
        raise ValueError(f"{SCALE_VARIABLE}={text!r}: must be a positive number")
    return value


#: What every deadline here is multiplied by (``TEST_DEADLINE_SCALE``, default 1).
SCALE = _scale()

#: A local server's answer to one request, a port that should listen, a thread that should end.
LOOPBACK = 10.0 * SCALE
#: Something the test started that should happen soon: a message delivered, a change relayed, a
#: process started or stopped, a lease taken over after its expiry.
SHORT = 60.0 * SCALE
#: A whole scenario's work: a host started with its apps, a backlog drained, a fleet settled, a
#: suite run in a subprocess.
LONG = 300.0 * SCALE


def scaled(seconds: float) -> float:
    """`seconds` times ``TEST_DEADLINE_SCALE``: for a deadline none of the named ones fits."""
    return seconds * SCALE


class DeadlineError(AssertionError):
    """What a test waited for did not happen within its deadline (an AssertionError: pytest
    reports it as the test's failure, with the sentence naming what did not happen)."""


def wait_for(  # noqa: UP047 - a TypeVar: the copies run on Python 3.11
    condition: Callable[[], T | None],
    what: str,
    deadline: float = SHORT,
    *,
    every: float = 0.05,
) -> T:
    """Call `condition` until it returns something true, and return that; past `deadline`
    seconds, fail with `what` (what the test waited for) and how long it waited. An exception
    from `condition` is not caught: a wait for an answer that errors fails at once."""
    start = time.monotonic()
    end = start + deadline
    while True:
        result = condition()
        if result:
            return result
        now = time.monotonic()
        if now >= end:
            raise DeadlineError(f"{what}: not within {deadline:g} s (waited {now - start:.1f} s)")
        time.sleep(min(every, end - now))
