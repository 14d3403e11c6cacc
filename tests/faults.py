"""Faults the tests inject into the local stack's processes (never into anything else)."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def frozen(process: subprocess.Popen[Any]) -> Iterator[None]:
    """The process stopped (SIGSTOP) for the block, then resumed: an endpoint that hangs. The
    kernel still completes TCP handshakes on its listening socket, and requests on open
    connections are taken into the socket buffers, but nothing answers."""
    os.kill(process.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(process.pid, signal.SIGCONT)
