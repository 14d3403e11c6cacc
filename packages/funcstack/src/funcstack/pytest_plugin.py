"""pytest fixtures for the local stack (registered through the ``pytest11`` entry point; inert
until a test requests one of them).

* ``funcstack_services`` (session): Cosmos DB, Service Bus and Azurite on free ports with the
  declared resources provisioned; a ``LocalStack`` with ``cosmos_connection_string``,
  ``cosmos_endpoint``, ``cosmos_key``, ``servicebus_connection_string`` and
  ``storage_connection_string``. With ``FUNCSTACK_SERVICES`` set (``funcstack exec -- pytest``
  sets it), the services it names, started once for several test runs: the declared resources
  are provisioned there (a Service Bus queue, topic or subscription of a declared name with
  other settings is an error naming it), left there when the session ends, and the services
  are not stopped (``funcstack.handoff``). A value naming no running services is an error
  naming the variable and the value, never a stack of the fixture's own.
* ``funcstack_app`` (per test), ``funcstack_module_app`` (per test module) and
  ``funcstack_session_app`` (per session): a factory hosting an app folder on a free port;
  returns a ``HostedApp`` whose ``url`` is the app's base URL (``http://127.0.0.1:<port>`` and
  host.json's ``routePrefix``: ``/api`` by default, none with ``routePrefix: ""``, as ASGI apps
  have); its host stops at the end of the fixture's scope. The module and session factories
  start one host for the same arguments and hand it to every test that asks again (one host
  per module: a module of 13 tests starts its app once), so what one test leaves in the
  services or in the app's memory, the next one sees: each test uses names and ids of its own
  (a queue message, a document, a blob), or asks ``funcstack_app`` for a host of its own. Keys
  are required by each HTTP function's auth level, as in Azure (``HostedApp.function_key``,
  ``.master_key``): a suite that sends none to a FUNCTION/ADMIN function fails here as it would
  in Azure. ``enforce_keys=False`` checks none, as ``func start`` (and ``funcstack run``) do.
  ``instances=3`` (or function groups apart, ``instances="http=2,relay_events=3"``) scales it
  out as Azure does: ``url`` is the front that spreads requests over the HTTP instances,
  ``HostedApp.instances`` kills, pauses, resumes and adds instances
  (``funcstack.scaleout.AppInstances``); an instance that exits is restarted as in Azure
  (``restart=False``: it stays down; a ``RestartPolicy`` of your own: other delays).
  ``HostedApp.stop()`` / ``start()`` stop one app and start it again (a relay taken down), on
  its port.
* ``funcstack_config`` (session): the declared-resources file, from the ``--funcstack-config``
  option or the ``funcstack_config`` ini setting (relative to the ini file); override the
  fixture in a ``conftest.py`` to choose it in code. None: no declared resources.

Teardown always runs (a failing test, Ctrl-C): every process is stopped, nothing is left
listening. The processes run in process groups of their own, so a Ctrl-C reaches pytest only,
which stops them.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from funcstack.scaleout import AppInstances, RestartPolicy
    from funcstack.stack import LocalStack

__all__ = [
    "HostedApp",
    "funcstack_app",
    "funcstack_config",
    "funcstack_module_app",
    "funcstack_services",
    "funcstack_session_app",
    "pytest_addoption",
]

_INI = "funcstack_config"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        _INI,
        "funcstack: the declared-resources file of funcstack_services (relative to the ini file)",
        default="",
    )
    parser.getgroup("funcstack").addoption(
        "--funcstack-config",
        dest="funcstack_config",
        default=None,
        metavar="FILE",
        help="the declared-resources file of the funcstack_services fixture",
    )


@dataclass(frozen=True)
class HostedApp:
    """An app served by a local Functions host for a test (or a test module, or the session)."""

    name: str
    url: str
    port: int
    settings_file: Path
    log_path: Path
    #: The host's default function key (send it as the ``x-functions-key`` header or the
    #: ``code`` query parameter) and its master key; None with ``enforce_keys=False``. Not in
    #: the repr, which ends up in test reports.
    function_key: str | None = field(default=None, repr=False)
    master_key: str | None = field(default=None, repr=False)
    #: With ``instances``: the app's instances (kill, pause, resume, add one).
    instances: AppInstances | None = None
    _stack: LocalStack | None = field(default=None, repr=False, compare=False)

    def stop(self) -> None:
        """Stop the app's host (every instance of a scaled app), as ``LocalStack.stop_part``
        does: a relay taken down while the services run. ``start()`` brings it back."""
        assert self._stack is not None
        self._stack.stop_part(self.name)

    def start(self) -> HostedApp:
        """Start a stopped host again, on its port, with its settings; ready (every trigger
        listening) when this returns. Not for an app on instances: kill and add instances."""
        assert self._stack is not None
        if self.instances is not None:
            raise ValueError(f"{self.name} runs on instances: kill, resume or add them instead")
        part = self._stack.hosts[self.name]
        if part.process.poll() is None:
            return self
        assert part.options is not None
        self._stack.start_host(self.name, part.options, port=self.port)
        return self


@pytest.fixture(scope="session")
def funcstack_config(request: pytest.FixtureRequest) -> Path | None:
    """The declared-resources file (None: nothing declared)."""
    option = request.config.getoption("funcstack_config", default=None)
    if option:
        return Path(option).resolve()
    value = str(request.config.getini(_INI) or "")
    if not value:
        return None
    base = request.config.inipath.parent if request.config.inipath else request.config.rootpath
    return (base / value).resolve()


@pytest.fixture(scope="session")
def funcstack_services(
    funcstack_config: Path | None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalStack]:
    """Cosmos DB, Service Bus and Azurite on free ports, the declared resources provisioned;
    or, with ``FUNCSTACK_SERVICES`` set, the running services it names (``funcstack exec``)."""
    from funcstack.config import load_config
    from funcstack.handoff import SERVICES_VARIABLE, services_from
    from funcstack.stack import LocalStack, ServicePorts

    config = load_config(funcstack_config) if funcstack_config is not None else None
    workdir = tmp_path_factory.mktemp("funcstack")
    if os.environ.get(SERVICES_VARIABLE):
        cosmos, servicebus, azurite = services_from()
        stack = LocalStack(
            workdir=workdir,
            config=config,
            shared_cosmos=cosmos,
            shared_servicebus=servicebus,
            shared_azurite=azurite,
        )
    else:
        stack = LocalStack(workdir=workdir, config=config, ports=ServicePorts.free())
    stack.start()
    try:
        yield stack
    finally:
        stack.stop()


_numbers = itertools.count(1)


class _Apps:
    """The apps one fixture hosts: started on demand (once per set of arguments, when
    ``shared``), stopped at the end of the fixture's scope."""

    def __init__(self, services: LocalStack, folder: Path, *, shared: bool) -> None:
        self._services = services
        self._folder = folder
        self._shared = shared
        self._started: dict[object, HostedApp] = {}
        self._names: list[str] = []

    def host(
        self,
        app_dir: str | Path,
        *,
        settings: Mapping[str, str] | None = None,
        name: str | None = None,
        enforce_keys: bool = True,
        instances: int | str | Mapping[str, int] = 1,
        restart: bool | RestartPolicy = True,
    ) -> HostedApp:
        from funcstack.scaleout import RestartPolicy

        directory = Path(app_dir).resolve()
        key = (
            directory,
            tuple(sorted((settings or {}).items())),
            name,
            enforce_keys,
            str(sorted(instances.items()) if isinstance(instances, Mapping) else instances),
            restart,
        )
        if self._shared and key in self._started:
            return self._started[key]
        policy = RestartPolicy() if restart is True else (restart or None)
        host_name = name or f"{directory.name}-{next(_numbers)}"
        settings_file = self._folder / f"{host_name}.local.settings.json"
        self._names.append(host_name)
        services = self._services
        runner = services.host_app(
            directory,
            name=host_name,
            port=0,
            overrides=settings,
            settings_file=settings_file,
            enforce_keys=enforce_keys,
            instances=instances,
            restart=policy,
        )
        scaled = services.scaled.get(host_name)
        hosted = HostedApp(
            name=host_name,
            url=runner.url,
            port=runner.port,
            settings_file=settings_file,
            log_path=(
                scaled.instances[0].log_path if scaled is not None else services.log_path(host_name)
            ),
            function_key=runner.function_key,
            master_key=runner.master_key,
            instances=scaled,
            _stack=services,
        )
        self._started[key] = hosted
        return hosted

    def serve(self) -> Iterator[Callable[..., HostedApp]]:
        """The fixture's value, ``host``; the apps stopped when the fixture ends."""
        try:
            yield self.host
        finally:
            for host_name in self._names:
                self._services.stop_part(host_name)
                self._services.hosts.pop(host_name, None)


@pytest.fixture
def funcstack_app(
    funcstack_services: LocalStack, tmp_path: Path
) -> Iterator[Callable[..., HostedApp]]:
    """``funcstack_app(app_dir, settings={...})``: host an app folder for this test; its base
    URL is ``.url``. Its settings file is made from its ``local.settings.sample.json`` with the
    services' connection strings, beside the test's files: the app folder's own
    ``local.settings.json`` is neither read nor written. ``settings`` go to the host and win
    over the file and the environment. The host requires keys by auth level, as in Azure
    (``.function_key``, ``.master_key``); ``enforce_keys=False``: none, as with ``func
    start``. Each call starts a host of its own."""
    yield from _Apps(funcstack_services, tmp_path, shared=False).serve()


@pytest.fixture(scope="module")
def funcstack_module_app(
    funcstack_services: LocalStack, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[..., HostedApp]]:
    """``funcstack_app`` for a test module: the same arguments give the same host to every
    test of the module (one start); it stops when the module's last test ends."""
    yield from _Apps(funcstack_services, tmp_path_factory.mktemp("apps"), shared=True).serve()


@pytest.fixture(scope="session")
def funcstack_session_app(
    funcstack_services: LocalStack, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[..., HostedApp]]:
    """``funcstack_app`` for the session: the same arguments give the same host to every test
    (one start); it stops when the session ends."""
    yield from _Apps(funcstack_services, tmp_path_factory.mktemp("apps"), shared=True).serve()
