"""A fork server for Functions hosts: one process that imported the host's modules once and
forks each host, instead of an interpreter started and importing them again for each (about
0.45 s of CPU a host, nearly all aiohttp and asyncio).

The launcher (``_launcher.py``) asks ``spawn``; it gives a ``ForkedHost`` (what the launcher
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
starts its own). The server is ``python -m funcstack.functions_host._forkserver`` in a process
group of its own, given one end of a socket pair. A request is the host's arguments, its
environment and folder, and its standard streams (the descriptors themselves) and a socket of
its own, on which the server answers with the host's pid and a pidfd, then its wait status
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
the host's clean stop). A host's language worker watches the host as before (its parent).
"""

from __future__ import annotations

import atexit
import gc
import importlib
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
import traceback
import weakref
from collections.abc import Iterable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

logger = logging.getLogger("funcstack.functions_host.forkserver")

#: ``0`` turns the fork server off: each host is an interpreter of its own, as before.
ENV_VAR = "FUNCSTACK_FORKSERVER"
#: The module every host runs (``python -m``).
HOST_MODULE = "funcstack.functions_host"
#: How long the server gives its hosts to stop (SIGTERM) when it ends, before SIGKILL.
STOP_GRACE = 5.0
#: How long a start waits for the server's answer (its first start: the server's imports).
ANSWER_TIMEOUT = 60.0
#: The modules a host imports when its app needs them that the server imports once a host
#: did (``_Server.tell``): the SDKs of the triggers and bindings, funcstack's modules for them.
LEARNABLE = ("azure.", "funcstack.", "cosmos_changefeed")
#: The exit code of a host whose status was lost (the server ended before it).
UNKNOWN_EXIT = 255
#: The largest request (the host's environment, mostly); a larger one is started by exec.
MAX_REQUEST = 1 << 16

_PR_SET_PDEATHSIG = 1
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
        host has exited."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if not self._lock.acquire(timeout=-1 if timeout is None else max(timeout, 0.0)):
            return False
        try:
            if self.returncode is not None:
                return True
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            if not _readable([self._status.fileno()], left):
                return False
            try:
                data = self._status.recv(4096)
            except OSError:
                data = b""
            if data:
                self.returncode = os.waitstatus_to_exitcode(int(json.loads(data)["status"]))
            else:  # the server ended before the host: wait for the host's end, status unknown
                left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
                if not _readable([self._pidfd], left):
                    return False
                self.returncode = UNKNOWN_EXIT
            self._closed()
            return True
        finally:
            self._lock.release()


def _readable(fds: Sequence[int], timeout: float | None) -> list[int]:
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
                [sys.executable, "-m", f"{HOST_MODULE}._forkserver", str(theirs.fileno()), str(me)],
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


# -- the server -------------------------------------------------------------------------------


@dataclass
class _Child:
    pid: int
    pidfd: int
    status: socket.socket


@dataclass
class _Request:
    args: list[str]
    env: dict[str, str]
    cwd: str
    fds: list[int]  # stdin, stdout, stderr
    status: socket.socket | None  # the answers: the pid, then the wait status


class _Server:
    def __init__(self, control: socket.socket, owner: int, base_path: list[str]) -> None:
        self.control = control
        self.owner = owner
        self.base_path = base_path
        self.environment = fingerprint(os.environ)
        self.modules = _top_level_modules()
        self.children: dict[int, _Child] = {}  # by pidfd
        self.wake_r, self.wake_w = socket.socketpair()
        self.wake_r.setblocking(False)
        self.wake_w.setblocking(False)
        # what the hosts imported after their start (``learn``), for the next ones
        self.hints_r, self.hints_w = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.hints_r.setblocking(False)
        self.hints_w.setblocking(False)
        self.signals: list[int] = []
        self.stopping_since: float | None = None
        self.killed = False
        self.loaded: frozenset[str] = frozenset()  # in a host: the modules at its fork

    def serve(self) -> _Request | None:
        """Answer requests until the starting process ends; the request in a forked child."""
        signal.set_wakeup_fd(self.wake_w.fileno(), warn_on_full_buffer=False)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, self._signalled)
        while not (self.stopping_since is not None and not self.children):
            waiting = [self.wake_r.fileno(), self.hints_r.fileno(), *self.children]
            if self.stopping_since is None:
                waiting.append(self.control.fileno())
                timeout = None
            else:
                timeout = max(self.stopping_since + STOP_GRACE - time.monotonic(), 0.0)
                if self.killed:
                    timeout = None
            ready = _readable(waiting, timeout)
            if self.stopping_since is not None and not ready and not self.killed:
                self._kill_all()
            for fd in ready:
                if fd == self.wake_r.fileno():
                    self._check_signals()
                elif fd == self.hints_r.fileno():
                    self._learn()
                elif fd == self.control.fileno():
                    request = self._receive()
                    if request is not None and self._fork(request):
                        return request
                else:
                    self._reap(fd)
        return None

    def _learn(self) -> None:
        """Import what a host that ended had imported and the server had not: a trigger's or
        a binding's SDK (``azure.cosmos.aio``, ``azure.servicebus.aio``: about 0.5 s of CPU
        each) is then imported once, not in every host of an app that uses it."""
        names: set[str] = set()
        with suppress(BlockingIOError):
            while True:
                with suppress(ValueError, TypeError):
                    names.update(str(name) for name in json.loads(self.hints_r.recv(1 << 20)))
        learned = False
        for name in sorted(names - sys.modules.keys()):
            try:
                importlib.import_module(name)
            except Exception:  # noqa: S112  (a host imports it then, as before)
                continue
            learned = True
        if learned:
            self.modules = _top_level_modules()
            gc.collect()
            gc.freeze()

    def tell(self) -> None:
        """In a host that ends: the modules it imported of those the server may learn."""
        names = [name for name in sys.modules.keys() - self.loaded if name.startswith(LEARNABLE)]
        with suppress(OSError):
            self.hints_w.send(json.dumps(names).encode())

    def _signalled(self, signum: int, frame: object) -> None:
        self.signals.append(signum)

    def _check_signals(self) -> None:
        with suppress(BlockingIOError):
            while self.wake_r.recv(4096):
                pass
        signals, self.signals = self.signals, []
        for signum in signals:
            # SIGHUP: the parent-death signal; it also comes when the starting process's
            # thread that started the server ends, and then the parent is still the same.
            if signum != signal.SIGHUP or os.getppid() != self.owner:
                self._stop()

    def _stop(self) -> None:
        if self.stopping_since is not None:
            return
        self.stopping_since = time.monotonic()
        for child in self.children.values():
            with suppress(ProcessLookupError):
                signal.pidfd_send_signal(child.pidfd, signal.SIGTERM)

    def _kill_all(self) -> None:
        self.killed = True
        for child in self.children.values():
            with suppress(ProcessLookupError, PermissionError):
                os.killpg(child.pid, signal.SIGKILL)  # the host and its worker

    def _receive(self) -> _Request | None:
        try:
            data, fds, _, _ = socket.recv_fds(self.control, MAX_REQUEST, 4, socket.MSG_CMSG_CLOEXEC)
        except OSError:
            data, fds = b"", []
        if not data:  # the starting process ended (or stopped this server)
            for fd in fds:
                os.close(fd)
            self._stop()
            return None
        if len(fds) != 4:
            for fd in fds:
                os.close(fd)
            return None
        request = _Request([], {}, "", fds[:3], socket.socket(fileno=fds[3]))
        try:
            body = json.loads(data)
            request.args, request.env, request.cwd = body["args"], body["env"], body["cwd"]
            refusal = self._refusal(request)
        except (ValueError, KeyError, TypeError) as exc:
            refusal = f"a request the server does not read ({exc!r})"
        if refusal is not None:
            _answer(request.status, {"exec": refusal})
            self._close_request(request)
            return None
        return request

    def _refusal(self, request: _Request) -> str | None:
        """Why the host cannot be forked: started by exec instead."""
        if threading.active_count() != 1:
            return f"the server holds {threading.active_count()} threads"
        given = fingerprint(request.env)
        differ = sorted(
            name
            for name in given.keys() | self.environment.keys()
            if given.get(name) != self.environment.get(name)
        )
        if differ:
            return "set otherwise than the server's: " + ", ".join(differ)
        for folder in [request.cwd, *_python_path(request.env, request.cwd)]:
            try:
                names = {entry.name.split(".", 1)[0] for entry in Path(folder).iterdir()}
            except OSError:
                continue
            shadowing = names & self.modules
            if shadowing:
                return f"{folder} holds {', '.join(sorted(shadowing))}"
        return None

    def _fork(self, request: _Request) -> bool:
        """Fork the host; True in the child."""
        server = os.getpid()
        signals = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD}
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, signals)  # none handled in between
        try:
            pid = os.fork()
        except OSError as exc:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            _answer(request.status, {"error": f"fork: {exc}"})
            self._close_request(request)
            return False
        if pid == 0:
            self._become_child(request, server, mask)
            return True
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        with suppress(OSError):
            os.setpgid(pid, pid)  # as the child does: in place before its pid is given
        pidfd = os.pidfd_open(pid)
        assert request.status is not None
        try:
            socket.send_fds(request.status, [json.dumps({"pid": pid}).encode()], [pidfd])
        except OSError:  # the start was given up: the host is not wanted
            with suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        self.children[pidfd] = _Child(pid, pidfd, request.status)
        request.status = None
        self._close_request(request)
        return False

    def _reap(self, pidfd: int) -> None:
        child = self.children.pop(pidfd)
        try:
            _, status = os.waitpid(child.pid, 0)
        except ChildProcessError:
            status = UNKNOWN_EXIT << 8
        _answer(child.status, {"status": status})
        child.status.close()
        os.close(child.pidfd)

    def _close_request(self, request: _Request) -> None:
        for fd in request.fds:
            with suppress(OSError):
                os.close(fd)
        if request.status is not None:
            request.status.close()

    def _become_child(self, request: _Request, server: int, mask: Iterable[int]) -> None:
        """In the forked child: the server's state let go, the process set up as
        ``python -m funcstack.functions_host`` would be (the caller then runs the host)."""
        os.setpgid(0, 0)
        _die_with(server, signal.SIGTERM)  # the host's clean stop
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for child in self.children.values():
            os.close(child.pidfd)
            child.status.close()
        self.children.clear()
        if request.status is not None:
            request.status.close()
        self.control.close()
        self.wake_r.close()
        self.wake_w.close()
        self.hints_r.close()
        self.loaded = frozenset(sys.modules)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        for target, fd in enumerate(request.fds):
            os.dup2(fd, target)  # inheritable, as a new process's 0, 1 and 2
        for fd in set(request.fds):
            if fd > 2:
                os.close(fd)
        os.chdir(request.cwd)
        os.environ.clear()
        os.environ.update(request.env)
        folder = str(Path.cwd())
        sys.path[:] = [folder, *_python_path(request.env, folder), *self.base_path]
        sys.argv[:] = ["-m", *request.args]


def _answer(status: socket.socket | None, answer: dict[str, object]) -> None:
    if status is None:
        return
    with suppress(OSError):
        status.send(json.dumps(answer).encode())


def _python_path(env: Mapping[str, str], cwd: str) -> list[str]:
    """``PYTHONPATH``'s entries as a new interpreter in ``cwd`` puts them on ``sys.path``."""
    value = env.get("PYTHONPATH")
    if not value:
        return []
    return [os.path.normpath(Path(cwd, entry)) for entry in value.split(os.pathsep)]


def _top_level_modules() -> frozenset[str]:
    """The names of the packages and modules imported from a folder (a new interpreter would
    take one of the same name from the host's folder or ``PYTHONPATH`` instead)."""
    return frozenset(
        name.split(".", 1)[0]
        for name, module in list(sys.modules.items())
        if getattr(module, "__file__", None) or getattr(module, "__path__", None)
    )


def _die_with(parent: int, signum: int) -> bool:
    """The kernel sends this process ``signum`` when ``parent`` (the thread that started it)
    ends: Linux's parent-death signal. A parent gone already ends this process now. False
    where there is no such signal."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signum)
    except (OSError, AttributeError):
        return False
    if os.getppid() != parent:
        os._exit(1)
    return True


def _run_host() -> int:
    """``python -m funcstack.functions_host`` in this process: its exit code as the
    interpreter makes it."""
    import runpy

    try:
        runpy.run_module(HOST_MODULE, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = exc.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code
        print(code, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        traceback.print_exc()
        _flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)  # as the interpreter ends on one: by the signal
        return 130
    except BaseException as error:  # as the interpreter: printed, exit code 1
        sys.excepthook(type(error), error, error.__traceback__)
        return 1
    return 0


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with suppress(Exception):
            stream.flush()


def _preload() -> None:
    """What every host imports: its ``__main__``'s modules, the RPC messages (protobuf, about
    0.07 s of CPU), and the few modules its start imports besides."""
    import concurrent.futures.thread  # noqa: F401
    import encodings.idna  # noqa: F401
    import numbers  # noqa: F401
    import queue  # noqa: F401
    import runpy  # noqa: F401

    import funcstack.functions_host.__main__  # noqa: F401

    if os.environ.get("FUNCTIONS_RPC_WHEEL"):
        from funcstack.functions_host._rpc import protos

        try:
            protos()
        except Exception:  # each host loads them then, and says why it cannot
            logger.debug("the RPC messages were not loaded", exc_info=True)


def main() -> None:
    """The server: ``python -m funcstack.functions_host._forkserver <fd> <starting pid>``."""
    control = socket.socket(fileno=int(sys.argv[1]))
    owner = int(sys.argv[2])
    # SIGHUP when the starting process ends, or its thread that started this one (ignored)
    _die_with(owner, signal.SIGHUP)
    if sys.path and sys.path[0] == str(
        Path.cwd()
    ):  # -m's entry for the server's folder: not a host's
        del sys.path[0]
    base_path = list(sys.path)
    _preload()
    # What the server holds now is left out of the hosts' garbage collections: they neither
    # walk it nor write to its pages (which the fork shares until written).
    gc.collect()
    gc.freeze()

    server = _Server(control, owner, base_path)
    request = server.serve()
    if request is None:
        return
    code = _run_host()
    server.tell()
    with suppress(Exception):
        atexit._run_exitfuncs()
    _flush()
    os._exit(code & 0xFF)


if __name__ == "__main__":
    main()
