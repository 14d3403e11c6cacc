"""The control channel of a running stack: what ``funcstack instances`` uses, from another
terminal, to list, kill, pause, resume and add the instances of the apps ``funcstack run``
serves.

The serving process listens on 127.0.0.1 (a free port) and writes where, with a secret token
made for this run, in ``<state folder>/control.json``, created readable and writable by its user
only (mode 0600, as ``.funcstack/`` holds it beside ``pids.json``); a client reads the file,
connects and sends one JSON line, ``{"token": ..., "command": ..., ...}``, and gets one JSON
line back, ``{"ok": true, ...}`` or ``{"ok": false, "error": "<one line>"}``. Whoever cannot
read the file cannot act on the stack (the token is compared in constant time); the file goes
when the stack stops, and a file whose stack no longer answers is said to be stale.

The commands (``StackControl``), against ``LocalStack.scaled`` and the hosts of ``run``; a
process's instances (``_process_instances``) are an app's for all of them:

* ``list``: each app (and each process ``run --process`` declared, ``kind`` saying which)
  with its URL and its instances (name, group, state, pid, port, restarts, last exit, log);
* ``kill`` ``{"instance", "restart": true}``: SIGKILL, then back as after a crash unless
  ``restart`` is false (``AppInstances.kill``);
* ``pause`` / ``resume`` ``{"instance"}``: SIGSTOP / SIGCONT;
* ``add`` ``{"app", "group": null}``: one more instance, ready when the answer comes.

An app run as one host (no ``--instances``) is listed, and refused to the other commands with
the reason: its host holds the app's port, so it has no front to add instances behind.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import os
import secrets
import socket
import socketserver
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from funcstack.functions_host import RunningRunner
    from funcstack.scaleout import AppInstances, Instance

__all__ = [
    "CONTROL_FILE",
    "ControlError",
    "ControlServer",
    "StackControl",
    "ask",
]

logger = logging.getLogger("funcstack.control")

#: The file, in the stack's state folder, that says where its control channel listens.
CONTROL_FILE = "control.json"
#: The longest request line the server reads.
_MAX_LINE = 64 * 1024


class ControlError(Exception):
    """Why a control command could not be done, in one line."""


class StackControl:
    """The commands, against the apps of a running stack (``apps``: by name, the host or the
    scaled app ``LocalStack.host_app`` returned)."""

    def __init__(
        self, apps: Mapping[str, RunningRunner | AppInstances], *, shown: Callable[[Path], str]
    ) -> None:
        self._apps = apps
        self._shown = shown

    def handle(self, request: Mapping[str, Any]) -> dict[str, Any]:
        from funcstack.scaleout import InstanceError

        command = request.get("command")
        try:
            if command == "list":
                return {"ok": True, "apps": [self._app(n, a) for n, a in self._apps.items()]}
            if command == "add":
                scaled = self._scaled(str(request.get("app") or ""))
                group = request.get("group")
                added = scaled.add_instance(str(group) if group else None)
                return {"ok": True, "instance": self._instance(added)}
            if command in {"kill", "pause", "resume"}:
                scaled, inst = self._find(str(request.get("instance") or ""))
                if command == "kill":
                    scaled.kill(inst, restart=bool(request.get("restart", True)))
                elif command == "pause":
                    scaled.pause(inst)
                else:
                    scaled.resume(inst)
                return {"ok": True, "instance": self._instance(inst)}
        except (InstanceError, ControlError, KeyError) as exc:
            return {"ok": False, "error": str(exc.args[0] if exc.args else exc)}
        except Exception as exc:  # an instance that did not start, say: one line
            return {"ok": False, "error": f"{type(exc).__name__}: {exc}".splitlines()[0]}
        return {"ok": False, "error": f"unknown command {command!r}"}

    def _scaled(self, app: str) -> AppInstances:
        from funcstack.scaleout import AppInstances

        found = self._apps.get(app)
        if found is None:
            raise ControlError(f"no app {app!r} in this stack (its apps: {', '.join(self._apps)})")
        if not isinstance(found, AppInstances):
            raise ControlError(
                f"{app} runs as one host, not scaled out: start it with --instances N to kill, "
                "pause, resume or add instances"
            )
        return found

    def _find(self, name: str) -> tuple[AppInstances, Instance]:
        from funcstack.scaleout import AppInstances

        for app, hosted in self._apps.items():
            if not isinstance(hosted, AppInstances):
                if app == name:
                    self._scaled(app)  # says why not
                continue
            for inst in hosted.instances:
                if inst.name == name:
                    return hosted, inst
        known = [
            inst.name
            for hosted in self._apps.values()
            if isinstance(hosted, AppInstances)
            for inst in hosted.instances
        ]
        raise ControlError(
            f"no instance {name!r} in this stack"
            + (f" (its instances: {', '.join(known)})" if known else " (no app is scaled out)")
        )

    def _app(self, name: str, hosted: RunningRunner | AppInstances) -> dict[str, Any]:
        from funcstack.scaleout import AppInstances

        if isinstance(hosted, AppInstances):
            from funcstack._process_instances import ProcessInstances

            return {
                "app": name,
                "url": hosted.url,
                "scaled": True,
                "kind": "process" if isinstance(hosted, ProcessInstances) else "app",
                "instances": [self._instance(inst) for inst in list(hosted.instances)],
            }
        alive = hosted.process.poll() is None
        return {
            "app": name,
            "url": hosted.url,
            "scaled": False,
            "kind": "app",
            "instances": [
                {
                    "name": name,
                    "group": None,
                    "state": "running" if alive else "exited",
                    "pid": hosted.process.pid,
                    "port": hosted.port,
                    "restarts": 0,
                    "last_exit": None,
                    "log": self._shown(hosted.log_path) if hosted.log_path else None,
                }
            ],
        }

    def _instance(self, inst: Instance) -> dict[str, Any]:
        return {
            "name": inst.name,
            "group": inst.group,
            "state": inst.state,
            "pid": inst.pid,
            "port": inst.port,
            "restarts": inst.restarts,
            "last_exit": inst.last_exit,
            "log": self._shown(inst.log_path),
        }


class _Handler(socketserver.StreamRequestHandler):
    server: _Server

    def handle(self) -> None:
        with contextlib.suppress(OSError):
            line = self.rfile.readline(_MAX_LINE)
            try:
                request = json.loads(line)
                if not isinstance(request, dict):
                    raise ValueError("not an object")
            except ValueError:
                answer: dict[str, Any] = {"ok": False, "error": "not a JSON request line"}
            else:
                token = str(request.get("token") or "")
                if not hmac.compare_digest(token.encode(), self.server.token.encode()):
                    answer = {"ok": False, "error": "refused: not this stack's token"}
                else:
                    answer = self.server.handle(request)
                    logger.log(
                        logging.DEBUG if request.get("command") == "list" else logging.INFO,
                        "control: %s %s -> %s",
                        request.get("command"),
                        request.get("instance") or request.get("app") or "",
                        "ok" if answer.get("ok") else answer.get("error"),
                        extra={"command": request.get("command")},
                    )
            self.wfile.write(json.dumps(answer).encode() + b"\n")


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, handle: Callable[[Mapping[str, Any]], dict[str, Any]], token: str) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.handle = handle
        self.token = token


class ControlServer:
    """Serves ``handle`` on 127.0.0.1 from a thread of its own; ``<state>/control.json`` says
    where, with the token (mode 0600)."""

    def __init__(self, state: Path, handle: Callable[[Mapping[str, Any]], dict[str, Any]]) -> None:
        self.file = state / CONTROL_FILE
        self._handle = handle
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> ControlServer:
        token = secrets.token_urlsafe(32)
        self._server = _Server(self._handle, token)
        port = int(self._server.server_address[1])
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="stack-control", daemon=True
        )
        self._thread.start()
        document = json.dumps({"port": port, "token": token, "pid": os.getpid()})
        temporary = self.file.with_name(f".{self.file.name}.{os.getpid()}")
        temporary.unlink(missing_ok=True)
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as out:
            out.write(document + "\n")
        temporary.replace(self.file)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        with contextlib.suppress(OSError):
            if json.loads(self.file.read_text()).get("pid") == os.getpid():
                self.file.unlink()


def ask(state: Path, request: Mapping[str, Any], *, timeout: float = 120.0) -> dict[str, Any]:
    """Send one command to the stack running from ``state``'s folder; its answer (``ok``
    false with ``error`` when it refused). ``ControlError`` when no stack answers."""
    where = state / CONTROL_FILE
    try:
        document = json.loads(where.read_text())
        port, token = int(document["port"]), str(document["token"])
    except FileNotFoundError:
        raise ControlError(
            f"no stack runs from this folder (no {where}): start one with `funcstack run`"
        ) from None
    except PermissionError:
        raise ControlError(f"{where} is not readable by this user: not your stack") from None
    except (OSError, ValueError, KeyError, TypeError):
        raise ControlError(f"{where} is not a control file funcstack wrote") from None
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as connection:
            connection.sendall(json.dumps({**request, "token": token}).encode() + b"\n")
            with connection.makefile("rb") as answer:
                line = answer.readline(_MAX_LINE)
    except ConnectionRefusedError:
        raise ControlError(
            f"the stack of {where} does not answer (it was stopped without removing it?): "
            "start one with `funcstack run`"
        ) from None
    except OSError as exc:
        raise ControlError(f"the stack did not answer: {exc}") from None
    try:
        reply = json.loads(line)
    except ValueError:
        raise ControlError("the stack's answer is not JSON") from None
    if not isinstance(reply, dict):
        raise ControlError("the stack's answer is not a JSON object")
    return reply
