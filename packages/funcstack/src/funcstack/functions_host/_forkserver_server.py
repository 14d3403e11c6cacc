"""The fork server itself (``_forkserver.py`` says what it is for and how a host is asked
of it): ``python -m funcstack.functions_host._forkserver_server <fd> <starting pid>``. It
imports what every host and every language worker imports, then answers requests on the
socket ``fd`` until the starting process ends; a request is forked, and in the child this
module runs the host. A forked host asks the server for its language worker in turn (on the
socket it tells the server what it imported on), and the server forks that too: the worker's
parent is the server, which ends it when its host ends.

A forked worker tells the server, as it ends, the libraries its app imported. The server does
not import them: it forks a template (``_be_template``), a process that imports them and then
forks the workers they are safe for, as the server would (``_to_template``). The server itself
keeps only the worker library, for the workers the template's libraries are not safe for."""

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
from collections.abc import Iterable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

from funcstack.functions_host import _forkserver
from funcstack.functions_host._forkserver import (
    HOST_MODULE,
    LEARNABLE,
    MAX_REQUEST,
    STOP_GRACE,
    UNKNOWN_EXIT,
    WORKER_MODULE,
    answer,
    fingerprint,
    logger,
    readable,
    worker_fingerprint,
)
from funcstack.functions_host._forkserver_child import die_with, flush, preload, run
from funcstack.functions_host._forkserver_libraries import (
    import_libraries,
    libraries,
    python_path,
    shadowing,
    threads_running,
    top_level_modules,
)

#: The templates a server starts at most (each imports what the workers told it so far: 0.7 s
#: of CPU for a web app's); another replaces one whose libraries did what one must not.
MAX_TEMPLATES = 4


@dataclass
class _Child:
    pid: int
    pidfd: int
    status: socket.socket
    host: int | None = None  # a language worker's: its host's pid


@dataclass
class _Template:
    """A template the server forked: it imports the libraries the workers told of and forks
    the workers they are safe for. ``channel``: the requests go on it (None: retired, it ends
    once its workers have)."""

    pid: int
    pidfd: int
    channel: socket.socket | None
    pending: int = 1  # imports asked and not yet done: no worker is sent to it meanwhile
    modules: frozenset[str] = frozenset()  # the top-level modules it holds
    read: dict[str, str | None] = field(default_factory=dict)  # the settings read at import


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
        self.modules = top_level_modules()
        self.children: dict[int, _Child] = {}  # by pidfd
        self.wake_r, self.wake_w = socket.socketpair()
        self.wake_r.setblocking(False)
        self.wake_w.setblocking(False)
        # from the hosts: what they imported after their start (``_learn``), for the next
        # ones, and their requests for a language worker
        self.hints_r, self.hints_w = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.hints_r.setblocking(False)
        self.hints_w.setblocking(False)
        self.signals: list[int] = []
        self.stopping_since: float | None = None
        self.killed = False
        self.loaded: frozenset[str] = frozenset()  # in a host: the modules at its fork
        self.templates: dict[int, _Template] = {}  # by pidfd
        self.template: _Template | None = None  # the one the workers are sent to
        self.asked: list[str] = []  # the libraries the templates were asked to import
        self.rejected: set[str] = set()  # those that must not be
        self.started = 0  # templates
        self.wanted: dict[str, str] | None = None  # libraries told of, no template: the env
        self.hosts: dict[int, int] = {}  # in a template: its workers' hosts' pids, by pidfd
        self.read: dict[str, str | None] = {}  # in a template: the settings read at import

    def serve(self) -> _Request | None:
        """Answer requests until the starting process ends; the request in a forked child."""
        signal.set_wakeup_fd(self.wake_w.fileno(), warn_on_full_buffer=False)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, self._signalled)
        while not (self.stopping_since is not None and not self.children and not self.templates):
            channels = {t.channel.fileno(): t for t in self.templates.values() if t.channel}
            waiting = [self.wake_r.fileno(), self.hints_r.fileno(), *self.children]
            waiting += [*self.templates, *channels]
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
                    request = self._from_hosts()
                    if request is not None:
                        return request
                elif fd == self.control.fileno():
                    request = self._receive()
                    if request is not None and self._fork(request):
                        return request
                elif fd in channels:
                    request = self._from_template(channels[fd])
                    if request is not None:
                        return request
                elif fd in self.templates:
                    self._reap_template(fd)
                else:
                    self._reap(fd)
        return None

    def _from_hosts(self) -> _Request | None:
        """The hosts' messages: their requests for a language worker forked (the request in
        the forked child), what the ones that ended imported (``_learn``)."""
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
            if isinstance(body, dict) and "imported" in body and not fds:
                self._consider(body)
            elif isinstance(body, dict) and len(fds) == 4:
                request = self._worker_request(body, fds)
                if request is not None and not self._to_template(request) and self._fork(request):
                    return request
                if self.template is None and self.wanted is not None:
                    # another worker since one told of libraries: a template for the next ones
                    env, self.wanted = self.wanted, None
                    request = self._start_template(env)
                    if request is not None:
                        return request
            elif fds:
                for fd in fds:
                    os.close(fd)
        self._learn(names)
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
            answer(request.status, {"exec": refusal})
            self._close_request(request)
            return None
        return request

    def _learn(self, names: set[str]) -> None:
        """Import what a host that ended had imported and the server had not: a trigger's or
        a binding's SDK (``azure.cosmos.aio``, ``azure.servicebus.aio``: about 0.5 s of CPU
        each) is then imported once, not in every host of an app that uses it. Not traced as
        a template's imports are: ``azure.storage.blob.aio`` lists the environment when
        imported (every host would be started by exec)."""
        learned = False
        for name in sorted(names - sys.modules.keys()):
            try:
                importlib.import_module(name)
            except Exception:  # noqa: S112  (a host imports it then, as before)
                continue
            learned = True
        if learned:
            self.modules = top_level_modules()
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
        for template in self.templates.values():
            self._retire(template)  # it ends once its workers have (their hosts stop them)
        for child in self.children.values():
            if child.host is None:  # a host stops its worker itself (then it is reaped)
                with suppress(ProcessLookupError):
                    signal.pidfd_send_signal(child.pidfd, signal.SIGTERM)

    def _kill_all(self) -> None:
        self.killed = True
        for template in self.templates.values():
            with suppress(ProcessLookupError):
                signal.pidfd_send_signal(template.pidfd, signal.SIGKILL)
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
            answer(request.status, {"exec": refusal})
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
        return shadowing(request.cwd, request.env, self.modules)

    def _fork(self, request: _Request) -> bool:
        """Fork the host; True in the child."""
        server = os.getpid()
        signals = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD}
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, signals)  # none handled in between
        try:
            pid = os.fork()
        except OSError as exc:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            answer(request.status, {"error": f"fork: {exc}"})
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
        answer(child.status, {"status": status})
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

    def _let_go(self) -> None:
        """In a forked child: the server's children, templates, sockets and hosts closed."""
        for child in self.children.values():
            os.close(child.pidfd)
            child.status.close()
        self.children.clear()
        for template in self.templates.values():
            os.close(template.pidfd)
            if template.channel is not None:
                template.channel.close()
        self.templates.clear()
        self.template = None
        for pidfd in self.hosts:
            os.close(pidfd)
        self.hosts.clear()
        self.control.close()
        self.hints_r.close()

    # -- the libraries of the workers' apps: the templates -------------------------------------

    def _consider(self, body: dict[str, object]) -> None:
        """A worker's report of what it imported: the libraries found in the server's import
        path entries and in none of the worker's own (its folder, its ``PYTHONPATH``) are
        imported by the template; where there is none, one is started at the next worker's
        request (a process that starts one host never pays for one)."""
        try:
            env = body["env"]
            assert isinstance(env, dict)
            names = libraries(body, self.base_path)
        except (ValueError, KeyError, TypeError, IndexError, AssertionError):
            return
        known = {*self.asked, *self.rejected}
        names = [name for name in names if name not in sys.modules and name not in known]
        if not names or self.stopping_since is not None:
            return
        self.asked += names
        template = self.template
        if template is not None and template.channel is not None:
            try:
                template.channel.send(json.dumps({"learn": names, "env": env}).encode())
            except OSError:
                self._retire(template)
            else:
                template.pending += 1
                return
        self.wanted = env

    def _start_template(self, env: Mapping[str, str]) -> _Request | None:
        """Fork a template that imports what the workers told of (``self.asked``); None in
        the server, the request in a worker the template forked."""
        if self.started >= MAX_TEMPLATES or threading.active_count() != 1:
            return None
        self.started += 1
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        server = os.getpid()
        signals = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD}
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, signals)
        try:
            pid = os.fork()
        except OSError:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            ours.close()
            theirs.close()
            return None
        if pid == 0:
            ours.close()
            return self._be_template(theirs, env, server, mask)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        theirs.close()
        ours.setblocking(False)
        template = _Template(pid, os.pidfd_open(pid), ours)
        for old in self.templates.values():
            self._retire(old)
        self.templates[template.pidfd] = self.template = template
        return None

    def _from_template(self, template: _Template) -> _Request | None:
        """A template's answers: its imports done (what it holds, the settings they read),
        or a library that did what it must not (then it is retired and another one started
        without it: the request in a worker that one forks)."""
        while True:
            channel = template.channel
            if channel is None:
                return None
            try:
                data = channel.recv(MAX_REQUEST)
            except BlockingIOError:
                return None
            except OSError:
                data = b""
            try:
                body = json.loads(data) if data else {}
                assert isinstance(body, dict)
            except (ValueError, AssertionError):
                body = {}
            if "ready" in body:
                template.pending -= 1
                template.modules = frozenset(body["ready"]["modules"])
                template.read = dict(body["ready"]["read"])
                continue
            self._retire(template)  # its end, or what it must not hold
            if "spoiled" in body:
                logger.debug("not preloaded for workers: %s", body["spoiled"])
                self.rejected.update(str(name) for name in body["spoiled"]["modules"])
                env = body["spoiled"]["env"]
                if self.stopping_since is None and any(n not in self.rejected for n in self.asked):
                    self.asked = [name for name in self.asked if name not in self.rejected]
                    return self._start_template(env)

    def _retire(self, template: _Template) -> None:
        """No more requests to ``template``: it ends once its workers have."""
        if template.channel is not None:
            with suppress(OSError):
                template.channel.shutdown(socket.SHUT_RDWR)
            template.channel.close()
            template.channel = None
        if self.template is template:
            self.template = None

    def _reap_template(self, pidfd: int) -> None:
        template = self.templates.pop(pidfd)
        with suppress(ChildProcessError):
            os.waitpid(template.pid, 0)
        os.close(pidfd)
        self._retire(template)

    def _to_template(self, request: _Request) -> bool:
        """Send a worker's request to the template, if its libraries are safe for the worker:
        the settings they read at import are the worker's too, and neither the worker's folder
        nor its ``PYTHONPATH`` holds a module of a name it imported. False: not sent (the
        server forks the worker, with the worker library only)."""
        template = self.template
        if template is None or template.channel is None or template.pending:
            return False
        if any(request.env.get(name) != value for name, value in template.read.items()):
            return False
        if shadowing(request.cwd, request.env, template.modules) is not None:
            return False
        host = next(
            (c.pidfd for c in self.children.values() if c.pid == request.host and c.host is None),
            None,
        )
        if host is None or request.status is None:
            return False
        worker = {"args": request.args, "env": request.env, "cwd": request.cwd}
        body = {"worker": {**worker, "host": request.host, "group": request.group}}
        try:
            socket.send_fds(
                template.channel,
                [json.dumps(body).encode()],
                [*request.fds, request.status.fileno(), host],
            )
        except OSError:
            return False
        self._close_request(request)
        return True

    def _be_template(
        self, channel: socket.socket, env: Mapping[str, str], server: int, mask: Iterable[int]
    ) -> _Request:
        """In a template the server forked: import the libraries, then fork the workers the
        server sends (the request, in such a worker), each ended when its host ends. The
        template ends with the server (SIGKILL: its workers are sent SIGTERM then), and once
        its workers have when the server retires it."""
        die_with(server, signal.SIGKILL)
        self._let_go()
        self.control = channel  # closed in its workers
        self.signals.clear()
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        self.stopping_since = None
        self._import(self.asked, env)
        while not (self.stopping_since is not None and not self.children):
            waiting = [self.wake_r.fileno(), *self.children, *self.hosts]
            if self.stopping_since is None:
                waiting.append(channel.fileno())
            for fd in readable(waiting, None):
                if fd == self.wake_r.fileno():
                    with suppress(BlockingIOError):
                        while self.wake_r.recv(4096):
                            pass
                    if self.signals:
                        self.stopping_since = time.monotonic()
                elif fd == channel.fileno():
                    request = self._for_template(channel, env)
                    if request is not None:
                        return request
                elif fd in self.hosts:
                    host = self.hosts.pop(fd)
                    os.close(fd)
                    for worker in self.children.values():
                        if worker.host == host:
                            with suppress(ProcessLookupError):
                                signal.pidfd_send_signal(worker.pidfd, signal.SIGTERM)
                else:
                    self._reap(fd)
        os._exit(0)

    def _for_template(self, channel: socket.socket, env: Mapping[str, str]) -> _Request | None:
        """In a template: the server's message (more libraries, a worker to fork: the request
        in that worker)."""
        try:
            data, fds, _, _ = socket.recv_fds(channel, MAX_REQUEST, 5, socket.MSG_CMSG_CLOEXEC)
            body = json.loads(data) if data else None
        except (OSError, ValueError):
            data, fds, body = b"", [], None
        if not isinstance(body, dict):  # the server retired it, or ended
            for fd in fds:
                os.close(fd)
            self.stopping_since = time.monotonic()
            return None
        if "learn" in body:
            self._import(body["learn"], body["env"])
            return None
        worker = body["worker"]
        request = _Request(
            worker["args"], worker["env"], worker["cwd"], fds[:3], socket.socket(fileno=fds[3])
        )
        request.host, request.group = int(worker["host"]), int(worker["group"])
        if readable([fds[4]], 0) or threads_running():
            os.close(fds[4])
            answer(request.status, {"exec": "the host ended, or the template has threads"})
            self._close_request(request)
            return None
        self.hosts[fds[4]] = request.host
        return request if self._fork(request) else None

    def _import(self, names: Sequence[str], env: Mapping[str, str]) -> None:
        """In a template: import ``names``, in order, and tell the server what it holds and
        the settings they read; or, if one of them did what a preloaded library must not,
        tell it which one, and take no more requests."""
        assert self.control is not None
        read, spoiled, why = import_libraries(names, env)
        self.read.update(read)  # what every import so far read
        if not spoiled:
            gc.collect()
            gc.freeze()
            ready = {"modules": sorted(top_level_modules()), "read": self.read}
            answer: dict[str, object] = {"ready": ready}
        else:
            answer = {"spoiled": {"modules": spoiled, "why": why, "env": dict(env)}}
            self.stopping_since = time.monotonic()
        with suppress(OSError):
            self.control.send(json.dumps(answer).encode())

    def _become_child(self, request: _Request, server: int, mask: Iterable[int]) -> None:
        """In the forked child: the server's state let go, the process set up as
        ``python -m funcstack.functions_host`` (a worker: ``..._worker``) would be, a worker
        in its host's process group (the caller then runs the host or the worker)."""
        os.setpgid(0, 0 if request.host is None else request.group)
        # a host's clean stop; a worker's end, as the one its host's death gives
        die_with(server, signal.SIGTERM)
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        self._let_go()
        if request.status is not None:
            request.status.close()
        self.wake_r.close()
        self.wake_w.close()
        # a host asks for its language workers on it; both tell what they imported
        _forkserver.to_server = self.hints_w
        if request.host is not None:
            _forkserver.forked_for = request.host
            _forkserver.forked_env = dict(request.env)
        self.loaded = _forkserver.forked_with = frozenset(sys.modules)
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
        sys.path[:] = [folder, *python_path(request.env, folder), *self.base_path]
        sys.argv[:] = ["-m", *request.args]


def main() -> None:
    """The server: ``python -m funcstack.functions_host._forkserver <fd> <starting pid>``."""
    control = socket.socket(fileno=int(sys.argv[1]))
    owner = int(sys.argv[2])
    # SIGHUP when the starting process ends, or its thread that started this one (ignored)
    die_with(owner, signal.SIGHUP)
    if sys.path and sys.path[0] == str(Path.cwd()):  # -m's entry for its folder: not a host's
        del sys.path[0]
    base_path = list(sys.path)
    preload()
    # What the server holds now is left out of the hosts' garbage collections: they neither
    # walk it nor write to its pages (which the fork shares until written).
    gc.collect()
    gc.freeze()

    server = _Server(control, owner, base_path)
    request = server.serve()
    if request is None:
        return
    if request.host is not None:
        code = run(WORKER_MODULE)
    else:
        code = run(HOST_MODULE)
        server.tell()
    with suppress(Exception):
        atexit._run_exitfuncs()
    flush()
    os._exit(code & 0xFF)


if __name__ == "__main__":
    main()
