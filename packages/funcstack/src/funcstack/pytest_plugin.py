"""pytest fixtures for the local stack (registered through the ``pytest11`` entry point; inert
until a test requests one of them).

* ``funcstack_services`` (session): Cosmos DB, Service Bus and Azurite on free ports with the
  declared resources provisioned; a ``LocalStack`` with ``cosmos_connection_string``,
  ``cosmos_endpoint``, ``cosmos_key``, ``servicebus_connection_string`` and
  ``storage_connection_string``.
* ``funcstack_app`` (per test): a factory hosting an app folder on a free port; returns a
  ``HostedApp`` whose ``url`` is the app's base URL (``http://127.0.0.1:<port>`` and host.json's
  ``routePrefix``: ``/api`` by default, none with ``routePrefix: ""``, as ASGI apps have); its
  host stops when the test ends. Keys are required by each HTTP function's auth level, as in
  Azure (``HostedApp.function_key``, ``.master_key``): a suite that sends none to a
  FUNCTION/ADMIN function fails here as it would in Azure. ``enforce_keys=False`` checks none,
  as ``func start`` (and ``funcstack run``) do. ``instances=3`` (or function groups apart,
  ``instances="http=2,relay_events=3"``) scales it out as Azure does: ``url`` is the front that
  spreads requests over the HTTP instances, ``HostedApp.instances`` kills, pauses, resumes and
  adds instances (``funcstack.scaleout.AppInstances``); an instance that exits is restarted as
  in Azure (``restart=False``: it stays down; a ``RestartPolicy`` of your own: other delays).
* ``funcstack_config`` (session): the declared-resources file, from the ``--funcstack-config``
  option or the ``funcstack_config`` ini setting (relative to the ini file); override the
  fixture in a ``conftest.py`` to choose it in code. None: no declared resources.

Teardown always runs (a failing test, Ctrl-C): every process is stopped, nothing is left
listening. The processes run in process groups of their own, so a Ctrl-C reaches pytest only,
which stops them.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
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
    "funcstack_services",
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
    """An app served by a local Functions host for one test."""

    name: str
    url: str
    port: int
    settings_file: Path
    log_path: Path
    #: The host's default function key (send it as the ``x-functions-key`` header or the
    #: ``code`` query parameter) and its master key; None with ``enforce_keys=False``.
    function_key: str | None = None
    master_key: str | None = None
    #: With ``instances``: the app's instances (kill, pause, resume, add one).
    instances: AppInstances | None = None


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
    """Cosmos DB, Service Bus and Azurite on free ports, the declared resources provisioned."""
    from funcstack.config import load_config
    from funcstack.stack import LocalStack, ServicePorts

    config = load_config(funcstack_config) if funcstack_config is not None else None
    stack = LocalStack(
        workdir=tmp_path_factory.mktemp("funcstack"), config=config, ports=ServicePorts.free()
    )
    stack.start()
    try:
        yield stack
    finally:
        stack.stop()


_numbers = itertools.count(1)


@pytest.fixture
def funcstack_app(
    funcstack_services: LocalStack, tmp_path: Path
) -> Iterator[Callable[..., HostedApp]]:
    """``funcstack_app(app_dir, settings={...})``: host an app folder; its base URL is
    ``.url``. Its settings file is made from its ``local.settings.sample.json`` with the
    services' connection strings, beside the test's files: the app folder's own
    ``local.settings.json`` is neither read nor written. ``settings`` go to the host and win
    over the file. The host requires keys by auth level, as in Azure (``.function_key``,
    ``.master_key``); ``enforce_keys=False``: none, as with ``func start``."""
    started: list[str] = []

    def host(
        app_dir: str | Path,
        *,
        settings: Mapping[str, str] | None = None,
        name: str | None = None,
        enforce_keys: bool = True,
        instances: int | str | Mapping[str, int] = 1,
        restart: bool | RestartPolicy = True,
    ) -> HostedApp:
        from funcstack.scaleout import RestartPolicy

        policy = RestartPolicy() if restart is True else (restart or None)
        directory = Path(app_dir).resolve()
        host_name = name or f"{directory.name}-{next(_numbers)}"
        settings_file = tmp_path / f"{host_name}.local.settings.json"
        started.append(host_name)
        runner = funcstack_services.host_app(
            directory,
            name=host_name,
            port=0,
            overrides=settings,
            settings_file=settings_file,
            enforce_keys=enforce_keys,
            instances=instances,
            restart=policy,
        )
        scaled = funcstack_services.scaled.get(host_name)
        return HostedApp(
            name=host_name,
            url=runner.url,
            port=runner.port,
            settings_file=settings_file,
            log_path=(
                scaled.instances[0].log_path
                if scaled is not None
                else funcstack_services.log_path(host_name)
            ),
            function_key=runner.function_key,
            master_key=runner.master_key,
            instances=scaled,
        )

    try:
        yield host
    finally:
        for host_name in started:
            funcstack_services.stop_part(host_name)
            funcstack_services.hosts.pop(host_name, None)
