"""The fork server itself (``_forkserver.py`` says what it is for and how a host is asked
of it): ``python -m funcstack.functions_host._forkserver_server <fd> <starting pid>``. It
imports what every host imports, then answers requests on the socket ``fd`` until the
starting process ends; a request is forked, and in the child this module runs the host."""

from __future__ import annotations

import atexit
import gc
import importlib
import importlib.machinery
import json
import os
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Iterable, Mapping
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from funcstack.functions_host._forkserver import (
    HOST_MODULE,
    LEARNABLE,
    MAX_REQUEST,
    STOP_GRACE,
    UNKNOWN_EXIT,
    fingerprint,
    logger,
    readable,
)

_PR_SET_PDEATHSIG = 1


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
            ready = readable(waiting, timeout)
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
                names = {_module_name(entry) for entry in Path(folder).iterdir()}
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


def _module_name(entry: Path) -> str:
    """The name ``entry`` is imported by from its folder (a package, a namespace package's
    portion, a module or an extension module); "" for a file that is none (``azure.yaml``)."""
    if entry.is_dir():
        return entry.name
    for suffix in importlib.machinery.all_suffixes():
        if entry.name.endswith(suffix):
            return entry.name[: -len(suffix)]
    return ""


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
