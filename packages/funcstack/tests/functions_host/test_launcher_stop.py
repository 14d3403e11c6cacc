"""A host's stop when the news of its end comes late: a forked host's exit is reported by the
fork server, which on a loaded machine can take longer than the stop's grace after the kill."""

from __future__ import annotations

import signal
import subprocess
import time
from typing import IO

from funcstack.functions_host._launcher import KILLED_REPORT_TIMEOUT, RunningRunner

#: How late the double's exit is known after its kill: longer than the grace the test gives.
LATE = 0.5


class LateReport:
    """A process that ignores SIGTERM and, once killed, is known to have ended only ``LATE``
    seconds later (``funcstack._processes.ChildProcess``)."""

    pid = 4242
    stdout: IO[bytes] | None = None

    def __init__(self) -> None:
        self.signals: list[int] = []
        self.killed_at: float | None = None

    @property
    def returncode(self) -> int | None:
        return self.poll()

    def poll(self) -> int | None:
        if self.killed_at is None or time.monotonic() < self.killed_at + LATE:
            return None
        return -signal.SIGKILL

    def wait(self, timeout: float | None = None) -> int:
        deadline = time.monotonic() + (timeout if timeout is not None else 3600.0)
        while (code := self.poll()) is None:
            if time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired("host", timeout or 0.0)
            time.sleep(0.01)
        return code

    def send_signal(self, sig: int) -> None:
        self.signals.append(sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.signals.append(signal.SIGKILL)
        self.killed_at = time.monotonic()


def test_a_stop_waits_for_the_news_of_a_killed_host_longer_than_its_grace() -> None:
    process = LateReport()
    runner = RunningRunner(url="http://127.0.0.1:1", port=1, process=process)

    runner.stop(timeout=0.1)  # the grace is shorter than the report's delay: no TimeoutExpired

    assert process.signals == [signal.SIGTERM, signal.SIGKILL]
    assert process.poll() == -signal.SIGKILL
    assert KILLED_REPORT_TIMEOUT > LATE
