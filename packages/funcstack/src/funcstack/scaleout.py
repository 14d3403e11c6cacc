"""An app on several host instances, as Azure scales it out: N instances of the whole app, or
its function groups each on instances of their own (Flex Consumption's per-function scaling),
one front spreading HTTP requests over the instances, and the chaos a test needs: kill
(SIGKILL), pause (SIGSTOP) and resume (SIGCONT) an instance, add one.

Follows Azure's docs:

* "Event-driven scaling in Azure Functions": each instance runs a host of its own with the
  whole app, the same app settings, an instance id of its own (``WEBSITE_INSTANCE_ID``); the
  triggers share the work (the Cosmos DB trigger by its leases, Service Bus and queues as
  competing consumers, a timer on one instance at a time); HTTP requests are spread over the
  instances by the front end.
* "Flex Consumption plan hosting", per-function scaling: the HTTP triggers scale together as
  the group ``http``; every other function scales on its own as ``function:<name>`` (the names
  the always-ready settings use, ``http=2``, ``function:relay_events=3``); an instance runs the
  functions of one group only, so state kept in memory by one function is not seen by a
  function of another group.

``plan`` (``parse_instances``): ``3`` -- three instances of the whole app; ``http=2,
function:relay_events=3`` (or ``relay_events=3``) -- each group on instances of its own, the
groups not named on one instance each. Instances are named ``<app>-<n>`` (whole app) or
``<app>-<group>-<n>`` (``<group>``: ``http`` or the function's name), each with its log file
``<name>.log``; their ``WEBSITE_INSTANCE_ID`` is that name.
"""

from __future__ import annotations

import functools
import os
import re
import signal
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from funcstack.front import HttpFront
from funcstack.functions_host._keys import FUNCTION_KEY_SETTING, MASTER_KEY_SETTING, HostKeys
from funcstack.functions_host._timer_trigger import LOCKS_SETTING

if TYPE_CHECKING:
    from funcstack.functions_host import RunningRunner
    from funcstack.services import LocalServices

__all__ = ["AppInstances", "Instance", "parse_instances"]

#: The HTTP functions' group (``function_group`` in the host).
HTTP_GROUP = "http"
_GROUP = re.compile(r"^(http|function:[A-Za-z_][A-Za-z0-9_]*|[A-Za-z_][A-Za-z0-9_]*)$")


def parse_instances(text: str | int | Mapping[str, int]) -> dict[str | None, int]:
    """``"3"`` -> ``{None: 3}`` (the whole app on 3 instances); ``"http=2,relay=3"`` ->
    ``{"http": 2, "function:relay": 3}`` (groups apart). ``ValueError`` names what is wrong."""
    if isinstance(text, int):
        pairs: list[tuple[str | None, str]] = [(None, str(text))]
    elif isinstance(text, Mapping):
        pairs = [(str(k), str(v)) for k, v in text.items()]
    else:
        spec = text.strip()
        if not spec:
            raise ValueError("instances: empty; give a count (3) or groups (http=2,relay=3)")
        pairs = []
        for part in spec.split(","):
            left, eq, right = part.strip().partition("=")
            pairs.append((left.strip(), right.strip()) if eq else (None, left.strip()))
        if len(pairs) > 1 and any(group is None for group, _ in pairs):
            raise ValueError(
                f"instances {text!r}: either one count (3) or groups with counts "
                "(http=2,function:relay=3), not both"
            )
    plan: dict[str | None, int] = {}
    for name, count in pairs:
        if not count.isdigit() or int(count) < 1:
            raise ValueError(
                f"instances: {count!r} is not a count of instances (1 or more)"
                + (f" for {name}" if name else "")
            )
        if name is not None and not _GROUP.match(name):
            raise ValueError(
                f"instances: {name!r} is not a function group (http, function:<name> or <name>)"
            )
        plan[_group(name)] = int(count)
    return plan


def _group(name: str | None) -> str | None:
    """A group as the host names it: ``http``, ``function:<name>`` (a bare name is a
    function's)."""
    if name is None or name == HTTP_GROUP or name.startswith("function:"):
        return name
    return f"function:{name}"


@dataclass
class Instance:
    """One host instance of the app."""

    name: str
    #: Its function group (None: the whole app).
    group: str | None
    runner: RunningRunner
    log_path: Path
    paused: bool = False

    @property
    def pid(self) -> int:
        return self.runner.process.pid

    @property
    def port(self) -> int:
        return self.runner.port

    @property
    def alive(self) -> bool:
        return self.runner.process.poll() is None

    @property
    def serves_http(self) -> bool:
        return self.group in {None, HTTP_GROUP}


@dataclass
class AppInstances:
    """An app on several instances of ``stack`` (``LocalStack.host_app(..., instances=...)``).

    ``url`` is the front's (the app's address); ``instances`` the hosts, in start order."""

    stack: LocalServices
    name: str
    app_dir: Path
    settings: dict[str, str]
    plan: dict[str | None, int]
    port: int = 0
    settings_file: Path | None = None
    python: str | None = None
    extra_import_paths: Sequence[str | Path] = ()
    enforce_keys: bool = False
    #: The hosts' terminal records (``start_runner``), each naming its instance
    #: (``"instance"``).
    on_console: Callable[[Mapping[str, Any]], None] | None = None
    instances: list[Instance] = field(default_factory=list)
    #: The app's function groups and their functions (as its hosts indexed it).
    groups: dict[str, list[str]] = field(default_factory=dict)
    front: HttpFront | None = None
    function_key: str | None = None
    master_key: str | None = None
    _prefix: str = ""
    _numbers: dict[str | None, int] = field(default_factory=dict)

    # -- start and stop -------------------------------------------------------------------------

    def start(self) -> AppInstances:
        """Start the instances (each ready before the next), then the front on ``port``. On a
        failure, what started is stopped and the error raised."""
        # a timer runs on one instance at a time (the singleton listener lock's folder)
        self.settings = {
            **self.settings,
            LOCKS_SETTING: str(self.stack.workdir / "locks" / self.name),
        }
        if self.enforce_keys:  # one set of keys for every instance, as one app has in Azure
            keys = HostKeys.from_settings(self.settings)
            self.settings = {
                **self.settings,
                FUNCTION_KEY_SETTING: keys.function_key,
                MASTER_KEY_SETTING: keys.master_key,
            }
        try:
            self._start_instances()
            if any(inst.serves_http for inst in self.instances) and self.groups.get(HTTP_GROUP):
                self.front = HttpFront(self._http_backends, port=self.port).start()
                self.port = self.front.port
            else:
                self.port = self.instances[0].port
        except BaseException:
            self.stop()
            raise
        return self

    def _start_instances(self) -> None:
        whole = None in self.plan
        if whole:
            for _ in range(self.plan[None]):
                self.add_instance(None)
            return
        named = list(self.plan)
        first = self.add_instance(named[0])
        unknown = [g for g in named if g not in self.groups]
        if unknown:
            raise ValueError(
                f"{self.name}: no function group {', '.join(map(str, unknown))} "
                f"in the app (its groups: {', '.join(self.groups)})"
            )
        for group in self.groups:
            wanted = self.plan.get(group, 1) - (1 if group == first.group else 0)
            for _ in range(wanted):
                self.add_instance(group)

    def stop(self) -> None:
        """Stop the front and every instance (a paused one is resumed to stop cleanly)."""
        if self.front is not None:
            self.front.stop()
            self.front = None
        for inst in self.instances:
            if inst.paused:
                self.resume(inst)
        from funcstack.services import STOP_TIMEOUT, stop_all

        stop_all(
            [
                (inst.name, functools.partial(inst.runner.stop, timeout=STOP_TIMEOUT))
                for inst in self.instances
            ]
        )
        for inst in self.instances:
            self.stack.hosts.pop(inst.name, None)

    # -- the app's address --------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The app's base URL through the front (with the route prefix, as a host's)."""
        return f"http://127.0.0.1:{self.port}{self._prefix}"

    def _http_backends(self) -> list[str]:
        return [
            f"http://127.0.0.1:{inst.port}"
            for inst in self.instances
            if inst.serves_http and inst.alive
        ]

    # -- chaos ----------------------------------------------------------------------------------

    def instance(self, which: str | Instance) -> Instance:
        if isinstance(which, Instance):
            return which
        for inst in self.instances:
            if inst.name == which:
                return inst
        raise KeyError(
            f"{self.name}: no instance {which!r} (instances: "
            f"{', '.join(i.name for i in self.instances)})"
        )

    def in_group(self, group: str | None) -> list[Instance]:
        """The instances of ``group`` (``http``, ``function:<name>`` or ``<name>``; None: the
        whole app's)."""
        return [inst for inst in self.instances if inst.group == _group(group)]

    def kill(self, which: str | Instance) -> Instance:
        """SIGKILL the instance's host (its worker ends with it): nothing it held is released;
        its Cosmos DB leases wait for their expiry."""
        inst = self.instance(which)
        inst.runner.kill()
        inst.paused = False
        return inst

    def pause(self, which: str | Instance) -> Instance:
        """SIGSTOP the instance's host and worker (their process group): it stops renewing
        its leases and answering, as a hung instance."""
        inst = self.instance(which)
        os.killpg(inst.pid, signal.SIGSTOP)
        inst.paused = True
        return inst

    def resume(self, which: str | Instance) -> Instance:
        """SIGCONT a paused instance."""
        inst = self.instance(which)
        with suppress(ProcessLookupError):
            os.killpg(inst.pid, signal.SIGCONT)
        inst.paused = False
        return inst

    def add_instance(self, group: str | None = None) -> Instance:
        """Start one more instance of ``group`` (None: of the whole app; in groups mode a
        group's name), ready when this returns."""
        group = _group(group)
        if (group is None) != (None in self.plan):
            raise ValueError(
                f"{self.name}: runs "
                + ("the whole app per instance" if None in self.plan else "function groups apart")
                + f"; no instance of {group!r}"
            )
        number = self._numbers.get(group, 0) + 1
        self._numbers[group] = number
        label = (
            ""
            if group is None
            else ("http" if group == HTTP_GROUP else group.removeprefix("function:")) + "-"
        )
        name = f"{self.name}-{label}{number}"
        settings = {**self.settings, "WEBSITE_INSTANCE_ID": name}
        runner = self.stack.run_host(
            name,
            self.app_dir,
            settings=settings,
            port=0,
            settings_file=self.settings_file,
            python=self.python,
            extra_import_paths=self.extra_import_paths,
            enforce_keys=self.enforce_keys,
            group=group,
            on_console=None if self.on_console is None else _tagged(self.on_console, name),
        )
        inst = Instance(name, group, runner, self.stack.log_path(name))
        self.instances.append(inst)
        if not self.groups:
            self.groups = dict(runner.groups)
            base = f"http://127.0.0.1:{runner.port}"
            self._prefix = runner.url[len(base) :] if runner.url.startswith(base) else ""
            self.function_key, self.master_key = runner.function_key, runner.master_key
        return inst

    def lines(self) -> list[str]:
        """One line per instance, for a banner."""
        return [
            f"{inst.name} ({inst.group or 'whole app'}, pid {inst.pid}, 127.0.0.1:{inst.port})"
            for inst in self.instances
        ]


def _tagged(
    show: Callable[[Mapping[str, Any]], None], instance: str
) -> Callable[[Mapping[str, Any]], None]:
    """``show`` given each record with the instance that wrote it."""
    return lambda entry: show({**entry, "instance": instance})
