"""funcstack: a Docker-free local Azure stack for Python Functions apps.

Cosmos DB, Service Bus and Azurite stand-ins and a Functions host driving the real worker
library; declared resources (the Service Bus emulator's Config.json plus a Cosmos part); the
``funcstack`` command (``run``, ``up``, ``setup``); a pytest plugin (``funcstack_services``,
``funcstack_app``). See the package's README."""

from __future__ import annotations

from typing import TYPE_CHECKING

from funcstack._lazy import lazy_exports

if TYPE_CHECKING:
    from funcstack._cache import SetupError
    from funcstack._process_instances import ProcessInstances, ProcessSpec
    from funcstack.config import ConfigError, StackConfig, load_config
    from funcstack.provision import ProvisionReport, provision_cosmos
    from funcstack.services import LocalServices, PartStartError
    from funcstack.stack import (
        LocalStack,
        ServicePorts,
        SettingsChanges,
        local_settings,
        update_local_settings,
    )

#: Its pyproject.toml's version (tests/repository/test_versions.py holds them equal; a literal,
#: not importlib.metadata's: no file read at import).
__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "LocalServices",
    "LocalStack",
    "PartStartError",
    "ProcessInstances",
    "ProcessSpec",
    "ProvisionReport",
    "ServicePorts",
    "SettingsChanges",
    "SetupError",
    "StackConfig",
    "__version__",
    "load_config",
    "local_settings",
    "provision_cosmos",
    "update_local_settings",
]

# the public names, imported when first used (funcstack/_lazy.py)
__getattr__, __dir__ = lazy_exports(
    __name__,
    __all__,
    {
        "ConfigError": "funcstack.config",
        "StackConfig": "funcstack.config",
        "load_config": "funcstack.config",
        "ProvisionReport": "funcstack.provision",
        "provision_cosmos": "funcstack.provision",
        "LocalStack": "funcstack.stack",
        "ServicePorts": "funcstack.stack",
        "local_settings": "funcstack.stack",
        "SettingsChanges": "funcstack.stack",
        "update_local_settings": "funcstack.stack",
        "LocalServices": "funcstack.services",
        "PartStartError": "funcstack.services",
        "SetupError": "funcstack._cache",
        "ProcessSpec": "funcstack._process_instances",
        "ProcessInstances": "funcstack._process_instances",
    },
)
