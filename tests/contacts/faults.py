"""Faults the tests inject into the local stack's processes (never into anything else)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

from funcstack import deadlines
from funcstack.deadlines import LOOPBACK, SHORT, scaled

#: How long the store may take to answer a flight of the worker's it has read, before the flight
#: is taken for one that gets no answer (a TLS handshake's last client flight): a grace, not a
#: verdict (the next flight's wait, under a named deadline, fails if the guess was wrong).
ANSWER_GRACE = scaled(2.0)
#: How long the store is frozen while the worker's busy invocations each reach it with a call
#: (`kill_worker_with_answers_pending`): how much a fault gathers, not a verdict.
GATHER = 0.3


class Process(Protocol):
    """A child process by its pid: a ``subprocess.Popen``, or a Functions host funcstack's
    fork server forked."""

    @property
    def pid(self) -> int: ...


@contextmanager
def frozen(process: Process) -> Iterator[None]:
    """The process stopped (SIGSTOP) for the block, then resumed: an endpoint that hangs. The
    kernel still completes TCP handshakes on its listening socket, and requests on open
    connections are taken into the socket buffers, but nothing answers."""
    os.kill(process.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(process.pid, signal.SIGCONT)


# -- processes and their connections (Linux /proc) ---------------------------------------------


def worker_pids(host: int) -> list[int]:
    """A Functions host's language worker: the live processes of the host's process group
    (the host leads it) but the host (a worker the fork server forked is the server's child,
    not the host's)."""
    workers = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        pid = int(stat.parent.name)
        if int(fields[2]) == host and pid != host and fields[0] != "Z":
            workers.append(pid)
    return workers


def _socket_inodes(pid: int) -> set[int]:
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = str(fd.readlink())
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[8:-1]))
    return inodes


def _tcp() -> list[tuple[int, int, int, int]]:
    """Every TCP socket: (local port, remote port, bytes received and not read, inode)."""
    rows = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            f = line.split()
            rows.append(
                (
                    int(f[1].rsplit(":", 1)[1], 16),
                    int(f[2].rsplit(":", 1)[1], 16),
                    int(f[4].split(":")[1], 16),
                    int(f[9]),
                )
            )
    return rows


def unread(server_port: int, client_pid: int) -> tuple[int, int]:
    """Over `client_pid`'s connections to `server_port`: the bytes the server has received and
    not read yet (requests waiting at a frozen server), and the bytes the client has received
    and not read yet (answers waiting at a frozen client)."""
    rows = _tcp()
    inodes = _socket_inodes(client_pid)
    ports = {local for local, remote, _, inode in rows if inode in inodes and remote == server_port}
    at_server = sum(q for local, remote, q, _ in rows if local == server_port and remote in ports)
    at_client = sum(q for local, remote, q, _ in rows if local in ports and remote == server_port)
    return at_server, at_client


def wait_for(condition: Callable[[], bool], what: str, deadline: float = SHORT) -> None:
    """Until `condition()`, polled every 10 ms (a socket's queue changes quickly); past
    `deadline`, fail naming `what` (`funcstack.deadlines.wait_for`)."""
    deadlines.wait_for(condition, what, deadline, every=0.01)


def wait_until(condition: Callable[[], bool], grace: float) -> bool:
    """Whether `condition()` held within `grace` seconds: for something that may rightly not
    happen (a flight with no answer); a caller that needs it uses `wait_for`."""
    end = time.monotonic() + grace
    while not condition():
        if time.monotonic() > end:
            return False
        time.sleep(0.01)
    return True


def commit_then_kill_worker(
    store: Process,
    host: Process,
    store_port: int,
    *,
    send: Callable[[], None],
    committed: Callable[[], bool],
    max_calls: int = 20,
) -> None:
    """A request whose change commits and whose worker dies before it learns so: the answer
    is lost (the host answers 500), the commit stands.

    The store is frozen while `send()` starts the request; then what the worker sends the store
    is let through one flight at a time: the worker frozen while the store reads it and answers
    into its socket (a TLS handshake's last client flight gets no answer: after a second the
    worker goes on); if the change has committed (`committed()`, read from the store), the
    worker is killed before it reads that answer; else the store is frozen again and the worker
    goes on. Only signals: no hook in the app or the host. Nothing else in the worker may call
    the store meanwhile (no timer due)."""
    [worker] = worker_pids(host.pid)
    os.kill(store.pid, signal.SIGSTOP)
    stopped = {store.pid}
    try:
        send()
        for flight in range(1, max_calls + 1):
            wait_for(lambda: unread(store_port, worker)[0] > 0, f"the worker's flight {flight}")
            os.kill(worker, signal.SIGSTOP)
            os.kill(store.pid, signal.SIGCONT)
            stopped = {worker}
            wait_for(lambda: unread(store_port, worker)[0] == 0, f"the store reading {flight}")
            wait_until(lambda: unread(store_port, worker)[1] > 0, ANSWER_GRACE)
            if committed():
                return
            os.kill(store.pid, signal.SIGSTOP)
            os.kill(worker, signal.SIGCONT)
            stopped = {store.pid}
        raise AssertionError(f"no commit after {max_calls} flights to the store")
    finally:
        for pid in stopped - {worker}:
            os.kill(pid, signal.SIGCONT)
        os.kill(worker, signal.SIGKILL)


def kill_worker_with_answers_pending(
    store: Process,
    host: Process,
    store_port: int,
    *,
    gather: float = GATHER,
) -> int:
    """Kill the host's worker while the store's answers to its calls wait, unread, in its
    sockets: the writes among those calls have committed and their answers are lost. The store
    is frozen for `gather` seconds (the worker's busy invocations each reach it with a call),
    then the worker is frozen and the store resumed, and once the store has read what the
    worker sent and answered (or `ANSWER_GRACE` passed), the worker is killed. Returns the bytes
    of answers that were waiting (none is a fault still: the caller counts which it was)."""
    [worker] = worker_pids(host.pid)
    os.kill(store.pid, signal.SIGSTOP)
    try:
        time.sleep(gather)
        os.kill(worker, signal.SIGSTOP)
    finally:
        os.kill(store.pid, signal.SIGCONT)
    try:
        wait_until(lambda: unread(store_port, worker)[0] == 0, LOOPBACK)
        wait_until(lambda: unread(store_port, worker)[1] > 0, ANSWER_GRACE)
        return unread(store_port, worker)[1]
    finally:
        os.kill(worker, signal.SIGKILL)
