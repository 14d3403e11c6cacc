"""A count of the servers funcstack starts, for a test suite's budget.

With ``FUNCSTACK_STARTS`` set to a file's path, every Cosmos DB endpoint, Service Bus endpoint,
Azurite, Functions host, language worker and process instance funcstack starts appends one line
to that file: a JSON object with its ``kind`` (``KINDS``), ``pid`` and, when it was started
during a pytest test (from ``PYTEST_CURRENT_TEST``, which the processes a test starts inherit),
that ``test``'s id. A restart is a start. Processes of any number append to one file (one
``write`` of one short line in append mode each); unset or empty, nothing is written.
``read_starts`` reads such files back; ``Start.module`` is the test module that started it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

__all__ = ["ENDPOINT_KINDS", "ENV_VAR", "KINDS", "Kind", "Start", "read_starts", "record_start"]

#: The environment variable naming the file each start is appended to.
ENV_VAR = "FUNCSTACK_STARTS"
Kind = Literal["cosmos", "servicebus", "azurite", "host", "worker", "process"]
#: Every kind, in the order a report lists them.
KINDS: tuple[Kind, ...] = ("cosmos", "servicebus", "azurite", "host", "worker", "process")
#: The service stand-ins (what ``funcstack up`` starts), as against the apps' processes.
ENDPOINT_KINDS: tuple[Kind, ...] = ("cosmos", "servicebus", "azurite")


@dataclass(frozen=True)
class Start:
    """One start read back from a starts file."""

    kind: str
    pid: int
    #: The pytest test id (``path::name (setup)``) it was started in, or None.
    test: str | None = None

    @property
    def module(self) -> str | None:
        """The test module (the test id's path), or None outside a test."""
        return self.test.split("::", 1)[0] if self.test else None


def record_start(kind: Kind, pid: int) -> None:
    """Append one start to ``$FUNCSTACK_STARTS`` (nothing when it is unset)."""
    path = os.environ.get(ENV_VAR)
    if not path:
        return
    line = {"kind": kind, "pid": pid, "test": os.environ.get("PYTEST_CURRENT_TEST")}
    data = (json.dumps(line) + "\n").encode()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    # one write(2) on an O_APPEND descriptor: concurrent writers' lines do not interleave
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def read_starts(path: str | Path) -> list[Start]:
    """The starts recorded in one file (a missing file: none)."""
    file = Path(path)
    if not file.exists():
        return []
    return list(_parse(file.read_text(encoding="utf-8").splitlines()))


def _parse(lines: Iterable[str]) -> Iterable[Start]:
    for line in lines:
        if line.strip():
            data = json.loads(line)
            yield Start(kind=str(data["kind"]), pid=int(data["pid"]), test=data.get("test"))
