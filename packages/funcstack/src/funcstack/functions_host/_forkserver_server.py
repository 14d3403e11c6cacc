"""The fork server itself (``_forkserver.py`` says what it is for and how a host is asked
of it): ``python -m funcstack.functions_host._forkserver_server <fd> <starting pid>``. It
imports what every host and every language worker imports, then answers requests on the
socket ``fd`` until the starting process ends; a request is forked, and in the child this
module runs the host. A forked host asks the server for its language worker in turn (on the
socket it tells the server what it imported on), and the server forks that too: the worker's
parent is the server, which ends it when its host ends."""

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

from funcstack.functions_host import _forkserver
from funcstack.functions_host._forkserver import (
    HOST_MODULE,
    LEARNABLE,
    MAX_REQUEST,
    STOP_GRACE,
    UNKNOWN_EXIT,
    WORKER_MODULE,
    fingerprint,
    logger,
    readable,
    worker_fingerprint,
)

_PR_SET_PDEATHSIG = 1


@dataclass
class _Child:
    pid: int
    pidfd: int
    status: socket.socket
    host: int | None = None  # a language worker's: its host's pid


@dataclass
class _Request:
    args: list[str]
    env: dict[str, str]
    cwd: str
    fds: list[int]  # stdin, stdout, stderr
    status: socket.socket | None  # the answers: the pid, then the wait status
    host: int | None = None  # a language worker's: the host that asked for it
    group: int = 0  # a language worker's process group: its host's


class _Server:
    def __init__(self, control: socket.socket, owner: int, base_path: list[str]) -> None:
        self.control = control
        self.owner = owner
        self.base_path = base_path
        self.environment = fingerprint(os.environ)
        self.worker_environment = worker_fingerprint(os.environ)
        self.modules = _top_level_modules()
        self.children: dict[int, _Child] = {}  # by pidfd
        self.wake_r, self.wake_w = socket.socketpair()
        self.wake_r.setblocking(False)
        self.wake_w.setblocking(False)
        # from the hosts: what they imported after their start (``_learn_one``), for the next
        # ones, and their requests for a language worker
        self.hints_r, self.hints_w = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.hints_r.setblocking(False)
        self.hints_w.setblocking(False)
        self.signals: list[int] = []
        self.stopping_since: float | None = None
        self.killed = False
        self.loaded: frozenset[str] = frozenset()  # in a host: the modules at its fork
        #: what ended hosts imported and the server has not yet (``_learn_one``): imported one
        #: at a time, a host's end told between two, before the next host is forked
        self.to_learn: set[str] = set()
        self.learned = False

    def serve(self) -> _Request | None:
        """Answer requests until the starting process ends; the request in a forked child."""
        signal.set_wakeup_fd(self.wake_w.fileno(), warn_on_full_buffer=False)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, self._signalled)
        while not (self.stopping_since is not None and not self.children):
            waiting = [self.wake_r.fileno(), self.hints_r.fileno(), *self.children]
            if self.stopping_since is None:
                # a host's start waits for what is being learned (it then need not import it
                # itself); a host's end does not
                if not self.to_learn:
                    waiting.append(self.control.fileno())
                timeout = 0.0 if self.to_learn else None
            else:
                timeout = max(self.stopping_since + STOP_GRACE - time.monotonic(), 0.0)
                if self.killed:
                    timeout = None
            # the hosts that ended first: their ends are told before anything is learned
            ready = sorted(readable(waiting, timeout), key=lambda fd: fd not in self.children)
            if self.stopping_since is not None and not ready and not self.killed:
                self._kill_all()
            elif not ready and self.to_learn:
                self._learn_one()
            for fd in ready:
                if fd == self.wake_r.fileno():
                    self._check_signals()
                elif fd == self.hints_r.fileno():
                    request = self._from_hosts()
                    if request is not None:
                        return request
                elif fd == self.control.fileno():
                    request = self._receive()
                    if request is not None and self._fork(request):
                        return request
                else:
                    self._reap(fd)
        return None

    def _from_hosts(self) -> _Request | None:
        """The hosts' messages: their requests for a language worker forked (the request in
        the forked child), what the ones that ended imported (``_learn_one``)."""
        names: set[str] = set()
        while True:
            try:
                data, fds, _, _ = socket.recv_fds(self.hints_r, 1 << 20, 4, socket.MSG_CMSG_CLOEXEC)
            except BlockingIOError:
                break
            except OSError:
                data, fds = b"", []
            try:
                body = json.loads(data)
            except ValueError:
                body = None
            if isinstance(body, list):
                names.update(str(name) for name in body)
            if isinstance(body, dict) and len(fds) == 4:
                request = self._worker_request(body, fds)
                if request is not None and self._fork(request):
                    return request
            elif fds:
                for fd in fds:
                    os.close(fd)
        if self.stopping_since is None:
            self.to_learn |= names - sys.modules.keys()
        return None

    def _worker_request(self, body: dict[str, object], fds: list[int]) -> _Request | None:
        """A host's request for its language worker; None when it is answered already (the
        worker to be started by exec)."""
        request = _Request([], {}, "", fds[:3], socket.socket(fileno=fds[3]))
        try:
            worker = body["worker"]
            assert isinstance(worker, dict)
            request.args, request.env, request.cwd = worker["args"], worker["env"], worker["cwd"]
            request.host, request.group = int(worker["host"]), int(worker["group"])
            refusal = self._refusal(request)
        except (ValueError, KeyError, TypeError, AssertionError) as exc:
            refusal = f"a request the server does not read ({exc!r})"
        if refusal is None and not any(
            child.pid == request.host and child.host is None for child in self.children.values()
        ):
            refusal = "not asked by a host of this server's that runs"
        if refusal is None and self.stopping_since is not None:
            refusal = "the server is stopping"
        if refusal is not None:
            _answer(request.status, {"exec": refusal})
            self._close_request(request)
            return None
        return request

    def _learn_one(self) -> None:
        """Import one of what hosts that ended had imported and the server had not (a
        trigger's or a binding's SDK, ``azure.cosmos.aio``, ``azure.servicebus.aio``: about 0.5 s
        of CPU each), so that it is imported once, not in every host of an app that uses it. One
        at a time, while no host's end waits to be told (all at once, a host's end that came
        with them waited for them all); a request for a host waits for them, so that the host
        is forked with them."""
        name = min(self.to_learn)
        self.to_learn.discard(name)
        if name not in sys.modules:
            with suppress(Exception):  # not imported: a host imports it then, as before
                importlib.import_module(name)
                self.learned = True
            self.modules = _top_level_modules()  # before the next fork's refusal check
        if not self.to_learn and self.learned:
            self.learned = False
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
            if child.host is None:  # a host stops its worker itself (then it is reaped)
                with suppress(ProcessLookupError):
                    signal.pidfd_send_signal(child.pidfd, signal.SIGTERM)

    def _kill_all(self) -> None:
        self.killed = True
        for child in self.children.values():
            with suppress(ProcessLookupError, PermissionError):
                if child.host is None:
                    os.killpg(child.pid, signal.SIGKILL)  # the host and its worker
                else:
                    signal.pidfd_send_signal(child.pidfd, signal.SIGKILL)

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
        if request.host is None:
            given, server = fingerprint(request.env), self.environment
        else:
            given, server = worker_fingerprint(request.env), self.worker_environment
        differ = sorted(
            name for name in given.keys() | server.keys() if given.get(name) != server.get(name)
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
            # as the child does: in place before its pid is given
            os.setpgid(pid, pid if request.host is None else request.group)
        pidfd = os.pidfd_open(pid)
        assert request.status is not None
        try:
            socket.send_fds(request.status, [json.dumps({"pid": pid}).encode()], [pidfd])
        except OSError:  # the start was given up: the process is not wanted
            with suppress(ProcessLookupError):
                if request.host is None:
                    os.killpg(pid, signal.SIGKILL)
                else:
                    signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        self.children[pidfd] = _Child(pid, pidfd, request.status, request.host)
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
        if child.host is None:
            # its language workers end with it, as a worker it started by exec does (the
            # parent-death signal it sets: SIGTERM)
            for worker in self.children.values():
                if worker.host == child.pid:
                    with suppress(ProcessLookupError):
                        signal.pidfd_send_signal(worker.pidfd, signal.SIGTERM)

    def _close_request(self, request: _Request) -> None:
        for fd in request.fds:
            with suppress(OSError):
                os.close(fd)
        if request.status is not None:
            request.status.close()

    def _become_child(self, request: _Request, server: int, mask: Iterable[int]) -> None:
        """In the forked child: the server's state let go, the process set up as
        ``python -m funcstack.functions_host`` (a worker: ``..._worker``) would be, a worker
        in its host's process group (the caller then runs the host or the worker)."""
        os.setpgid(0, 0 if request.host is None else request.group)
        # a host's clean stop; a worker's end, as the one its host's death gives
        _die_with(server, signal.SIGTERM)
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
        if request.host is None:
            _forkserver.to_server = self.hints_w  # its language workers are asked on it
        else:
            self.hints_w.close()
            _forkserver.forked_for = request.host
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


def _run(module: str) -> int:
    """``python -m <module>`` (the host's, a language worker's) in this process: its exit
    code as the interpreter makes it."""
    import runpy

    # it runs as __main__, as `python -m` runs it: the copy this server imported to warm its
    # imports (`_preload`) is forgotten first (its imports stay), else runpy warns that it was
    # "found in sys.modules ... prior to execution" -- a RuntimeWarning in every host's and
    # worker's log -- and the process holds two of it
    for name in (module, f"{module}.__main__"):
        if not hasattr(sys.modules.get(name), "__path__"):
            sys.modules.pop(name, None)
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
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

    _preload_worker()


def _preload_worker() -> None:
    """What a language worker imports before its app (``_worker.py``, the worker library:
    about 0.1 s of CPU) and at its init (azure-functions, whose binding registry the library
    loads then: about 0.07 s), none of which reads a setting or starts a thread when
    imported; not the app's modules. An app folder or ``PYTHONPATH`` entry that
    holds its own ``azure`` (or werkzeug, which azure-functions imports) has its worker
    started by exec (``_refusal``), as for any module the server imported."""
    import argparse  # noqa: F401

    import azure_functions_runtime  # noqa: F401

    import funcstack.functions_host._worker  # noqa: F401

    with suppress(ImportError):  # not installed: each worker's init says so, as by exec
        import azure.functions  # noqa: F401

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
    if request.host is not None:
        code = _run(WORKER_MODULE)
    else:
        code = _run(HOST_MODULE)
        server.tell()
    with suppress(Exception):
        atexit._run_exitfuncs()
    _flush()
    os._exit(code & 0xFF)


if __name__ == "__main__":
    main()
