"""A fork server for Functions hosts: one process that imported the host's modules once and
forks each host, instead of an interpreter started and importing them again for each (about
0.45 s of CPU a host, nearly all aiohttp and asyncio).

The launcher (``_launcher.py``) asks ``spawn`` (this module; the server is
``_forkserver_server.py``); it gives a ``ForkedHost`` (what the launcher
uses of a ``subprocess.Popen``), or None, and then the launcher starts the host as before
(``python -m funcstack.functions_host``). None when:

- ``FUNCSTACK_FORKSERVER=0``, or the platform has no ``os.fork`` or ``os.pidfd_open`` (Linux);
- coverage measures the processes started (``COVERAGE_PROCESS_START``, pytest-cov's
  ``COV_CORE_SOURCE``): each host is a process of its own that coverage starts in;
- a setting that the host's modules read when they are imported differs from the server's
  (``read_at_import``: the interpreter's ``PYTHON*`` settings, the locale, ``TZ``, the trust
  store aiohttp loads at import, the C extensions' switches, the temporary folder), or the
  trust store's file changed since (its size, time and inode);
- the host's folder or its ``PYTHONPATH`` holds a module of the name of one the server
  imported (a fresh interpreter would import that one);
- the server did not start or answer (then not again in this process).

One server per process that starts hosts, started at its first host (a process forked from it
starts its own). The server is ``python -m funcstack.functions_host._forkserver_server`` in a
process group of its own, given one end of a socket pair. A request is the host's arguments,
its environment and folder, and its standard streams (the descriptors themselves) and a socket
of its own, on which the server answers with the host's pid and a pidfd, then its wait status
when it exits. The server is the host's parent: it reaps it.

The host is forked from the server's only thread (the server refuses to fork with another
one). In the child: a process group of its own (as ``OWN_PROCESS_GROUP`` gives), the streams
on 0, 1 and 2, the folder, the environment, ``sys.argv`` and ``sys.path`` as
``python -m funcstack.functions_host`` with that environment has them, the signals' handlers
a new interpreter's; then the host's ``__main__`` runs as ``-m`` runs it, and the process
ends with its exit code (a ``SystemExit``'s as the interpreter reads it; an uncaught
exception printed, 1).

Nothing outlives the process that started it: the server ends when that process does (its
socket's end of file; the kernel's parent-death signal, Linux's ``PR_SET_PDEATHSIG``), and
stops its hosts first (SIGTERM, then SIGKILL to each host's process group after
``STOP_GRACE`` seconds); a host ends when the server does (the parent-death signal: SIGTERM,
the host's clean stop). The server is shared by the stacks of its process: each stack that
starts a host holds it (``hold``), and it ends with the last of them to stop (``release``), so
that a stack's ``stop()`` leaves none of the processes it started, the server included; hosts
started outside a stack (``start_runner``) keep it until the process ends, as before.

A forked host's language worker is forked by the same server (``spawn_worker``; None, and the
host starts it as before, where it cannot be: the host was not forked, another interpreter,
the fingerprint, the app's folder). The server imported the worker library once, never an
app's modules. The host asks on the socket it tells the server what it imported on, with the
worker's arguments, environment and folder, its standard streams and a socket of its own for
the answers (``ForkedWorker``: the pid, then the wait status). In the child: the host's
process group, and the rest as for a host (``python -m funcstack.functions_host._worker``).
The server is the worker's parent: the kernel's parent-death signal is tied to the server,
and the server sends the worker SIGTERM when it reaps its host, as a worker started by exec
is sent when its host dies (``_worker.py`` checks its parent is the host only when it was
started by exec: ``forked_for``).
"""

from __future__ import annotations

import asyncio
import atexit
import json
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from funcstack._processes import _children

logger = logging.getLogger("funcstack.functions_host.forkserver")

#: ``0`` turns the fork server off: each host is an interpreter of its own, as before.
ENV_VAR = "FUNCSTACK_FORKSERVER"
#: The module every host runs (``python -m``).
HOST_MODULE = "funcstack.functions_host"
#: The module every language worker runs (``python -m``).
WORKER_MODULE = "funcstack.functions_host._worker"
#: The server's (``python -m``).
SERVER_MODULE = "funcstack.functions_host._forkserver_server"
#: How long the server gives its hosts to stop (SIGTERM) when it ends, before SIGKILL.
STOP_GRACE = 5.0
#: How long a start waits for the server's answer (its first start: the server's imports).
ANSWER_TIMEOUT = 60.0
#: The modules a host imports when its app needs them that the server imports once a host
#: did (``_Server.tell``): the SDKs of the triggers and bindings, funcstack's modules for them.
LEARNABLE = ("azure.", "funcstack.", "cosmos_changefeed")
#: The exit code of a host whose status was lost (the server ended before it, or did not tell
#: it within ``STATUS_GRACE`` of the host's end).
UNKNOWN_EXIT = 255
#: How long a host's end (its pidfd readable) may go untold by the server (its reaper: stopped,
#: or starved under load) before it is taken as an exit of unknown status.
STATUS_GRACE = 5.0
#: The largest request (the host's environment, mostly); a larger one is started by exec.
MAX_REQUEST = 1 << 16

#: The variables read by name when the host's modules are imported (besides the prefixes).
_READ_AT_IMPORT = frozenset(
    {
        "LANG",
        "LANGUAGE",
        "TZ",
        "TMPDIR",
        "TEMP",
        "TMP",
        "HOME",  # the user's site-packages folder
        "AIOHTTP_NOSENDFILE",
        "FUNCTIONS_RPC_WHEEL",  # the RPC messages' wheel (_cache.RPC_WHEEL_ENV), loaded too
    }
)
#: Prefixes of the variables read at import: the interpreter's own (``PYTHONPATH`` aside,
#: given to each host's ``sys.path``), the locale's, OpenSSL's, the trust store's, protobuf's.
_READ_AT_IMPORT_PREFIXES = (
    "PYTHON",
    "_PYTHON",
    "LC_",
    "SSL_CERT_",
    "OPENSSL_",
    "PROTOCOL_BUFFERS_",
)
#: Set when coverage measures every process started: each host starts coverage of its own.
_COVERAGE = ("COVERAGE_PROCESS_START", "COV_CORE_SOURCE")


def read_at_import(name: str) -> bool:
    """Whether the host's modules (or the interpreter, at its start) read the variable when
    they are imported: then a host given another value cannot be forked from the server.
    aiohttp builds its TLS contexts at import (``SSL_CERT_FILE``, ``SSL_CERT_DIR``), and it
    and its libraries read ``*_NO_EXTENSIONS`` then."""
    if name == "PYTHONPATH":
        return False
    return (
        name in _READ_AT_IMPORT
        or name.startswith(_READ_AT_IMPORT_PREFIXES)
        or name.endswith("_NO_EXTENSIONS")
    )


def fingerprint(env: Mapping[str, str]) -> dict[str, str]:
    """What of ``env`` the host's modules read at import: those variables, and the trust
    store's file and folder as they are now (a bundle written again at the same path)."""
    found = {name: value for name, value in env.items() if read_at_import(name)}
    for name in ("SSL_CERT_FILE", "SSL_CERT_DIR"):
        path = env.get(name)
        if path:
            try:
                stat = Path(path).stat()
            except OSError:
                found[f"{name} (file)"] = "missing"
            else:
                found[f"{name} (file)"] = f"{stat.st_ino}:{stat.st_size}:{stat.st_mtime_ns}"
    return found


#: The interpreter's own ``PYTHON_*`` settings (3.13). The worker library's (the app's
#: ``PYTHON_ENABLE_DEBUG_LOGGING``, ``PYTHON_SCRIPT_FILE_NAME``...) are read when it runs, not
#: when it is imported: a worker given another value is forked all the same.
_INTERPRETER_UNDERSCORED = frozenset(
    {
        "PYTHON_BASIC_REPL",
        "PYTHON_COLORS",
        "PYTHON_CPU_COUNT",
        "PYTHON_FROZEN_MODULES",
        "PYTHON_GIL",
        "PYTHON_HISTORY",
        "PYTHON_JIT",
        "PYTHON_PERF_JIT_SUPPORT",
        "PYTHON_PRESITE",
    }
)


def worker_fingerprint(env: Mapping[str, str]) -> dict[str, str]:
    """``fingerprint`` for a language worker: the worker library's ``PYTHON_*`` settings
    left out (the interpreter's kept)."""
    return {
        name: value
        for name, value in fingerprint(env).items()
        if not name.startswith("PYTHON_") or name in _INTERPRETER_UNDERSCORED
    }


#: In a host forked by the server: the socket it asks that server for its language workers
#: on (``spawn_worker``). None in any other process.
to_server: socket.socket | None = None
#: In a language worker forked by the server: the pid of the host it was forked for (the
#: server ends the worker when that host ends). None in any other process.
forked_for: int | None = None


def available() -> bool:
    """Whether hosts are forked here: on by default where it works, off with
    ``FUNCSTACK_FORKSERVER=0``."""
    if os.environ.get(ENV_VAR, "").strip() in ("0", "false", "no", "off"):
        return False
    if any(os.environ.get(name) for name in _COVERAGE):
        return False
    return (
        sys.platform == "linux"
        and hasattr(os, "fork")
        and hasattr(os, "pidfd_open")
        and hasattr(signal, "pidfd_send_signal")
    )


# -- the starting process's side ------------------------------------------------------------


class ForkedHost:
    """A host forked by the server, as the launcher uses a ``subprocess.Popen``: ``pid``,
    ``stdout`` (the read end of its standard output), ``returncode`` (negative: the signal
    that ended it), ``poll()``, ``wait(timeout)`` (``subprocess.TimeoutExpired``),
    ``send_signal()``, ``terminate()``, ``kill()``. Signals go through a pidfd: never to
    another process given the pid again."""

    def __init__(
        self, args: Sequence[str], pid: int, pidfd: int, status: socket.socket, stdout: IO[bytes]
    ) -> None:
        self.args = list(args)
        self.pid = pid
        self.stdout: IO[bytes] | None = stdout
        self.returncode: int | None = None
        self._pidfd = pidfd
        self._status = status
        self._lock = threading.Lock()
        self._ended_at: float | None = None  # when its pidfd said it ended, status untold
        self._server_gone = False  # the server ended first: no status will come
        self._closed = weakref.finalize(self, _close_all, pidfd, status)

    def __repr__(self) -> str:
        return f"<ForkedHost: pid {self.pid}, returncode {self.returncode}>"

    def poll(self) -> int | None:
        if self.returncode is None:
            self._receive(0.0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None and not self._receive(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is not None:
            return  # as Popen: an exited process is not signalled
        with suppress(ProcessLookupError):  # exited, not yet reaped
            signal.pidfd_send_signal(self._pidfd, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def _receive(self, timeout: float | None) -> bool:
        """Wait up to ``timeout`` seconds (None: for ever) for the exit status; whether the
        host has exited. The status is the server's (it reaps the host); the host's end is seen
        on its pidfd too, so a server that does not tell it within ``STATUS_GRACE`` of that end
        leaves the host exited, its status unknown, rather than running past it."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if not self._lock.acquire(timeout=-1 if timeout is None else max(timeout, 0.0)):
            return False
        try:
            if self.returncode is None and not self._wait_status(deadline):
                return False
            self._closed()
            return True
        finally:
            self._lock.release()

    def _wait_status(self, deadline: float | None) -> bool:
        status = self._status.fileno()
        while self.returncode is None:
            now = time.monotonic()
            wait = None if deadline is None else max(deadline - now, 0.0)
            if self._server_gone:  # its end only, status unknown
                watched = [self._pidfd]
            elif self._ended_at is None:
                watched = [status, self._pidfd]
            else:  # ended: its status, until the grace is over
                watched = [status]
                grace = max(self._ended_at + STATUS_GRACE - now, 0.0)
                wait = grace if wait is None else min(wait, grace)
            ready = readable(watched, wait)
            if status in ready:
                self._read_status()
            elif self._pidfd in ready:
                if self._server_gone:
                    self.returncode = UNKNOWN_EXIT
                self._ended_at = time.monotonic()
            elif self._ended_at is not None and time.monotonic() >= self._ended_at + STATUS_GRACE:
                self.returncode = UNKNOWN_EXIT  # the server did not tell it
            elif deadline is not None and time.monotonic() >= deadline:
                return False
        return True

    def _read_status(self) -> None:
        try:
            data = self._status.recv(4096)
        except OSError:
            data = b""
        if data:
            self.returncode = os.waitstatus_to_exitcode(int(json.loads(data)["status"]))
        else:  # the server ended before the host: the host's end is waited for, status unknown
            self._server_gone = True


def readable(fds: Sequence[int], timeout: float | None) -> list[int]:
    """Those of ``fds`` readable within ``timeout`` seconds (None: for ever); poll(2), not
    select(2): a process's descriptors may be numbered past select's 1024."""
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN)
    wait = None if timeout is None else max(0, int(timeout * 1000 + 0.999))
    return [fd for fd, _ in poller.poll(wait)]


def _close_all(pidfd: int, status: socket.socket) -> None:
    with suppress(OSError):
        os.close(pidfd)
    status.close()


@dataclass
class _Client:
    """This process's server: its process and the socket requests go on."""

    owner: int
    process: subprocess.Popen[bytes]
    control: socket.socket
    lock: threading.Lock = field(default_factory=threading.Lock)
    broken: bool = False


_client: _Client | None = None
_client_lock = threading.Lock()


def spawn(
    args: Sequence[str],
    *,
    env: Mapping[str, str],
    server_env: Mapping[str, str],
    cwd: str,
    stderr: IO[bytes] | None,
) -> ForkedHost | None:
    """Start ``python -m funcstack.functions_host *args`` in ``cwd`` with ``env`` as a fork
    of this process's server (started with ``server_env`` if there is none yet), its stdout a
    pipe (``ForkedHost.stdout``), its stderr ``stderr`` (None: discarded) and its stdin this
    process's; None where it cannot be (the module's docstring): start it as before."""
    if not available():
        return None
    client = _server(server_env)
    if client is None:
        return None
    request = json.dumps({"args": list(args), "env": dict(env), "cwd": cwd}).encode()
    if len(request) > MAX_REQUEST:
        return None
    read_end, write_end = os.pipe()
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    opened: list[int] = []  # /dev/null for a stream the host is given none of

    def devnull() -> int:
        opened.append(os.open(os.devnull, os.O_RDWR))
        return opened[-1]

    forked: ForkedHost | None = None
    try:
        stdin = 0 if _is_open(0) else devnull()  # as Popen's child inherits it
        error = stderr.fileno() if stderr is not None else devnull()
        try:
            with client.lock:
                socket.send_fds(
                    client.control, [request], [stdin, write_end, error, theirs.fileno()]
                )
        except OSError as exc:
            _give_up(client, f"the fork server took no request ({exc})")
            return None
        finally:
            for fd in (write_end, *opened):
                os.close(fd)
            theirs.close()
        ours.settimeout(ANSWER_TIMEOUT)
        try:
            data, fds, _, _ = socket.recv_fds(ours, 4096, 1, socket.MSG_CMSG_CLOEXEC)
        except OSError as exc:
            _give_up(client, f"the fork server did not answer ({exc})")
            return None
        ours.settimeout(None)
        answer = json.loads(data) if data else {"error": "the fork server ended"}
        if "pid" not in answer or len(fds) != 1:
            for fd in fds:
                os.close(fd)
            if "exec" in answer:
                logger.debug("host not forked: %s", answer["exec"])
            else:
                _give_up(client, f"the fork server did not start the host ({answer.get('error')})")
            return None
        argv = [sys.executable, "-m", HOST_MODULE, *args]
        forked = ForkedHost(argv, int(answer["pid"]), fds[0], ours, os.fdopen(read_end, "rb"))
        return forked
    finally:
        if forked is None:
            os.close(read_end)
            ours.close()


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def _give_up(client: _Client, why: str) -> None:
    """No more forks in this process: each host is started as before."""
    if not client.broken:
        logger.warning("%s; hosts are started without it", why)
    client.broken = True


def _server(server_env: Mapping[str, str]) -> _Client | None:
    """This process's server, started now if it has none (a process forked from one that
    had one: a server of its own)."""
    global _client
    with _client_lock:
        me = os.getpid()
        if _client is not None and _client.owner == me:
            return None if _client.broken else _client
        if _client is not None:  # inherited by a fork: the starting process's, not ours
            _client.control.close()
            _client = None
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = {k: v for k, v in server_env.items() if k != "PYTHONPATH"}
        try:
            process = subprocess.Popen(
                [sys.executable, "-m", SERVER_MODULE, str(theirs.fileno()), str(me)],
                pass_fds=[theirs.fileno()],
                env=env,
                cwd="/",  # nothing to import from: the server's sys.path is the hosts'
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                process_group=0,  # a Ctrl-C in the terminal reaches the starting process only
            )
        except OSError as exc:
            logger.warning("the fork server did not start (%s); hosts are started without it", exc)
            ours.close()
            return None
        finally:
            theirs.close()
        _client = _Client(me, process, ours)
        atexit.register(_stop_at_exit, _client)
        return _client


#: The stacks of this process that started a host (``hold``), by their ``id()``; the pid of the
#: process whose they are (a process forked from this one holds none of its parent's).
_holders: set[int] = set()
_holders_pid = 0


def hold(stack: object) -> None:
    """``stack`` (a ``LocalServices``) starts hosts from this process's server: the server runs
    until the last stack that held it lets go (``release``)."""
    global _holders_pid
    with _client_lock:
        if _holders_pid != os.getpid():
            _holders.clear()
            _holders_pid = os.getpid()
        _holders.add(id(stack))


def release(stack: object, timeout: float = STOP_GRACE + 5.0) -> bool:
    """``stack`` stopped: when it was the last stack of this process to hold the server and
    the server forks no host that still runs (one started outside a stack, by
    ``start_runner``, which keeps it as before: it ends with the process), the server is ended
    and waited for. Whether it was."""
    with _client_lock:
        if _holders_pid != os.getpid() or id(stack) not in _holders:
            return False
        _holders.discard(id(stack))
        if _holders:
            return False
    pid = server_pid()
    if pid is None or _children(pid, leaders=True):  # a host forked by it runs
        return False
    stop_server(timeout)
    return True


def server_pid() -> int | None:
    """The pid of this process's server, if it started one that still runs."""
    client = _client
    if client is None or client.owner != os.getpid() or client.process.poll() is not None:
        return None
    return client.process.pid


def stop_server(timeout: float = STOP_GRACE + 5.0) -> None:
    """End this process's server (it stops its hosts first) and wait for it."""
    global _client
    with _client_lock:
        client = _client
        if client is None or client.owner != os.getpid():
            return
        _client = None
    _stop(client, timeout)


def _stop_at_exit(client: _Client) -> None:
    if client.owner == os.getpid():
        _stop(client, STOP_GRACE + 5.0)


def _stop(client: _Client, timeout: float) -> None:
    client.broken = True
    with suppress(OSError):
        client.control.shutdown(socket.SHUT_RDWR)
    client.control.close()
    try:
        client.process.wait(timeout)
    except subprocess.TimeoutExpired:
        client.process.kill()
        client.process.wait()


# -- a forked host's side: its language workers ---------------------------------------------


class ForkedWorker:
    """A language worker forked by the server for this host, as the host uses an
    ``asyncio.subprocess.Process``: ``pid``, ``stdout`` (a reader of its standard output, when
    it was asked to be a pipe), ``returncode``, ``kill()``, ``await wait()``. The server is the
    worker's parent: it reaps it and tells its wait status on ``status``."""

    def __init__(
        self,
        pid: int,
        pidfd: int,
        status: socket.socket,
        stdout: asyncio.StreamReader | None,
    ) -> None:
        self.pid = pid
        self.stdout = stdout
        self.returncode: int | None = None
        self._pidfd = pidfd
        self._status = status
        self._loop = asyncio.get_running_loop()
        self._done: asyncio.Future[int] = self._loop.create_future()
        self._loop.add_reader(status.fileno(), self._on_status)

    def __repr__(self) -> str:
        return f"<ForkedWorker: pid {self.pid}, returncode {self.returncode}>"

    def kill(self) -> None:
        if self.returncode is None:
            with suppress(ProcessLookupError):  # exited, not yet reaped
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)

    async def wait(self) -> int:
        return await asyncio.shield(self._done)

    def _on_status(self) -> None:
        try:
            data = self._status.recv(4096)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        self._loop.remove_reader(self._status.fileno())
        # no answer: the server ended first (and this host with it)
        status = json.loads(data)["status"] if data else UNKNOWN_EXIT << 8
        self.returncode = os.waitstatus_to_exitcode(int(status))
        _close_all(self._pidfd, self._status)
        if not self._done.done():
            self._done.set_result(self.returncode)


async def spawn_worker(
    args: Sequence[str], *, env: Mapping[str, str], cwd: str, pipe_stdout: bool
) -> ForkedWorker | None:
    """In a host the server forked: start ``python -m funcstack.functions_host._worker *args``
    in ``cwd`` with ``env`` as a fork of that server, in this host's process group, its stdin
    ``/dev/null``, its stdout a pipe (``pipe_stdout``) or this host's, its stderr this host's;
    None where it cannot be (anywhere else, or the server says to exec it): start it as
    before."""
    channel = to_server
    if channel is None or not available():
        return None
    request = json.dumps(
        {
            "worker": {
                "args": list(args),
                "env": dict(env),
                "cwd": cwd,
                "host": os.getpid(),
                "group": os.getpgid(0),
            }
        }
    ).encode()
    if len(request) > MAX_REQUEST:
        return None
    read_end, write_end = os.pipe() if pipe_stdout else (-1, 1)
    stdin = os.open(os.devnull, os.O_RDONLY)
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    forked: ForkedWorker | None = None
    try:
        try:
            socket.send_fds(channel, [request], [stdin, write_end, 2, theirs.fileno()])
        except OSError as exc:  # its queue full (a burst of starts): by exec, as before
            logger.debug("the fork server took no worker request (%s)", exc)
            return None
        finally:
            os.close(stdin)
            if pipe_stdout:
                os.close(write_end)
            theirs.close()
        ours.setblocking(False)
        loop = asyncio.get_running_loop()
        answered = loop.create_future()
        loop.add_reader(ours.fileno(), _set_once, answered)
        try:
            await asyncio.wait_for(answered, ANSWER_TIMEOUT)
            data, fds, _, _ = socket.recv_fds(ours, 4096, 1, socket.MSG_CMSG_CLOEXEC)
        except (OSError, TimeoutError) as exc:
            logger.warning("the fork server did not answer a worker request (%r)", exc)
            return None
        finally:
            loop.remove_reader(ours.fileno())
        answer = json.loads(data) if data else {"error": "the fork server ended"}
        if "pid" not in answer or len(fds) != 1:
            for fd in fds:
                os.close(fd)
            logger.debug("worker not forked: %s", answer.get("exec") or answer.get("error"))
            return None
        stdout = None
        if pipe_stdout:
            stdout = asyncio.StreamReader()
            protocol = asyncio.StreamReaderProtocol(stdout)
            pipe = os.fdopen(read_end, "rb", 0)
            read_end = -1
            await loop.connect_read_pipe(lambda: protocol, pipe)
        forked = ForkedWorker(int(answer["pid"]), fds[0], ours, stdout)
        return forked
    finally:
        if read_end >= 0:
            os.close(read_end)
        if forked is None:
            ours.close()


def _set_once(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
