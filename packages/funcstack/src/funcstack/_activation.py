"""A server started at its first connection (socket activation, as inetd and systemd do it).

The ports are bound and listening at once, in this process; the server is started when a
client first connects to any of them, or when asked (``Activation.fire``), and is handed the
listening sockets (``pass_fds``): the connection that woke it waits in their backlog until the
server accepts it, so a client sees a slow first answer, never a refusal. A stand-in nothing
connects to costs a thread and three sockets instead of a process's start (Azurite: 0.55 s of
CPU). ``node/listen_fds.js`` has a Node server listen on the sockets it was handed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import socket
import subprocess
import threading
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["LISTEN_FDS_ENV", "Activation", "listen_fds", "listened_on"]

logger = logging.getLogger("funcstack")

#: Where a Node server started by an activation finds its sockets (``node/listen_fds.js``):
#: ``<port>:<fd>`` pairs, comma-separated.
LISTEN_FDS_ENV = "FUNCSTACK_LISTEN_FDS"


def listen_fds(sockets: Sequence[socket.socket]) -> str:
    """``LISTEN_FDS_ENV``'s value for ``sockets``."""
    return ",".join(f"{s.getsockname()[1]}:{s.fileno()}" for s in sockets)


def listened_on(host: str, port: int) -> bool:
    """Whether a socket listens on ``port``, asked without connecting (a connection would start
    a server waiting for its first connection): a bind there is refused. SO_REUSEADDR, as a
    server binds: a port a closed connection left in TIME_WAIT is not listened on."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return True
        return False


def activated_stopped(process: subprocess.Popen[Any] | None, activation: Activation | None) -> bool:
    """Whether an endpoint started at its first connection is stopped: its process ended, or
    (none started yet) its activation closed; not while it waits for a first connection."""
    if process is None:
        return activation is None or activation.closed
    return process.poll() is not None


class Activation:
    """Listen on ``ports`` now; call ``start(sockets)`` once, at the first connection or at
    ``fire()``; ``close()`` first: never. The sockets are closed here once ``start`` returns (the
    server holds its own copies) or at ``close()``."""

    def __init__(
        self,
        ports: Sequence[int],
        start: Callable[[list[socket.socket]], None],
        *,
        name: str,
        host: str = "127.0.0.1",
    ) -> None:
        self._start = start
        self._lock = threading.Lock()
        self._done = False
        self._closed = False
        self.sockets: list[socket.socket] = []
        try:
            for port in ports:
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                # as Node and asyncio servers bind: a port left in TIME_WAIT by the server's
                # previous process (a restart on its port) is not in use
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                self.sockets.append(sock)
                sock.bind((host, port))
                sock.listen(511)
        except BaseException:
            self._close_sockets()
            raise
        self._wake_read, self._wake_write = os.pipe()
        self._thread = threading.Thread(
            target=self._wait, name=f"funcstack-activation-{name}", daemon=True
        )
        self._thread.start()

    @property
    def closed(self) -> bool:
        """``close()`` was called before anything started the server."""
        return self._closed

    def _wait(self) -> None:
        with contextlib.suppress(OSError, ValueError):  # closed meanwhile
            select.select([*(s.fileno() for s in self.sockets), self._wake_read], [], [])
        self.fire()
        with self._lock:  # the pipe is this thread's: closed once nothing will write to it
            os.close(self._wake_read)
            os.close(self._wake_write)
            self._wake_write = -1

    def _wake(self) -> None:
        """Wake the waiting thread (under the lock; it may have gone already)."""
        if self._wake_write >= 0:
            os.write(self._wake_write, b"x")

    def fire(self) -> None:
        """Start the server now (once; nothing after ``close()``)."""
        with self._lock:
            if self._done:
                return
            self._done = True
            try:
                self._start(self.sockets)
            except Exception:  # the server's own log says why; its clients are refused
                logger.exception("a server started at its first connection did not start")
            finally:
                self._close_sockets()
                self._wake()

    def close(self) -> None:
        """Give up listening; a server started already is left to its owner."""
        with self._lock:
            self._closed = not self._done
            self._done = True
            self._close_sockets()
            self._wake()
        self._thread.join(timeout=5)

    def _close_sockets(self) -> None:
        for sock in self.sockets:
            sock.close()
        self.sockets = []
