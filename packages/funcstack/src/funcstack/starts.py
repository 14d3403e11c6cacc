"""A count of the servers funcstack starts, for a test suite's budget.

With ``FUNCSTACK_STARTS`` set to a file's path, every Cosmos DB endpoint, Service Bus endpoint,
Azurite, Functions host, language worker and process instance funcstack starts appends one line
to that file: a JSON object with its ``kind`` (``KINDS``), ``pid``, what it is started as
(``id``: the folder or file it keeps its state in, its log, or the port it was asked for; a
worker, its host's process) and, when it was started during a pytest test
(``PYTEST_CURRENT_TEST``, which the processes a test starts inherit), that ``test``'s id.
Processes of any number append to one file (one ``write`` of one short line in append mode
each); unset or empty, nothing is written.

``read_starts`` reads such a file back. A start is a **restart** when an earlier one in the file
was of the same kind, the same id and the same test module: the same endpoint, host or worker
started again on its state or its port (a test's fault, or a persistence check). A server
started on a port of the kernel's choice (port 0) and no state is never one.
"""

from __future__ import annotations

import json
import os
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
    #: What it was started as (its state, its log, its port), or None.
    id: str | None = None
    #: Started again as an earlier start of the file was (same kind, id and test module).
    restart: bool = False

    @property
    def module(self) -> str | None:
        """The test module (the test id's path), or None outside a test."""
        return self.test.split("::", 1)[0] if self.test else None


def record_start(kind: Kind, pid: int, *, identity: str | int | Path | None = None) -> None:
    """Append one start to ``$FUNCSTACK_STARTS`` (nothing when it is unset). ``identity``:
    what makes a later start of the same kind the same server (its state, log or port)."""
    path = os.environ.get(ENV_VAR)
    if not path:
        return
    line = {
        "kind": kind,
        "pid": pid,
        "test": os.environ.get("PYTEST_CURRENT_TEST"),
        "id": None if identity is None else str(identity),
    }
    data = (json.dumps(line) + "\n").encode()
    Path(path).absolute().parent.mkdir(parents=True, exist_ok=True)
    # one write(2) on an O_APPEND descriptor: concurrent writers' lines do not interleave
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def read_starts(path: str | Path) -> list[Start]:
    """The starts recorded in one file, in order (a missing file: none)."""
    file = Path(path)
    if not file.exists():
        return []
    starts: list[Start] = []
    seen: set[tuple[str, str, str | None]] = set()
    for line in file.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        data = json.loads(line)
        start = Start(
            kind=str(data["kind"]), pid=int(data["pid"]), test=data.get("test"), id=data.get("id")
        )
        if start.id is not None:
            key = (start.kind, start.id, start.module)
            if key in seen:
                start = Start(start.kind, start.pid, start.test, start.id, restart=True)
            seen.add(key)
        starts.append(start)
    return starts
