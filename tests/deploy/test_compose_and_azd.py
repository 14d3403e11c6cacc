"""docker-compose.yml (official emulators) and azure.yaml (azd) say what the docs promise."""

from __future__ import annotations

from typing import Any, cast

import yaml

from tests.deploy.templates import DEPLOY, ROOT

SERVICEBUS_CONFIG = "./tools/servicebus-config.json"


def compose() -> dict[str, Any]:
    return cast(dict[str, Any], yaml.safe_load((ROOT / "docker-compose.yml").read_text("utf-8")))


def test_compose_runs_the_official_emulators() -> None:
    services = compose()["services"]
    images = {name: str(service["image"]) for name, service in services.items()}
    assert (
        images["cosmos"] == "mcr.microsoft.com/cosmosdb/linux/azure-cosmos-emulator:vnext-preview"
    )
    assert images["azurite"].startswith("mcr.microsoft.com/azure-storage/azurite")
    assert images["servicebus"].startswith("mcr.microsoft.com/azure-messaging/servicebus-emulator")
    assert images["sqledge"].startswith("mcr.microsoft.com/azure-sql-edge")
    assert "sqledge" in services["servicebus"]["depends_on"]
    assert services["servicebus"]["environment"]["SQL_SERVER"] == "sqledge"


def test_servicebus_emulator_uses_the_local_stack_entity_config() -> None:
    servicebus = compose()["services"]["servicebus"]
    mounts = [str(v).split(":") for v in servicebus["volumes"]]
    assert [SERVICEBUS_CONFIG, "/ServiceBus_Emulator/ConfigFiles/Config.json"] in [
        m[:2] for m in mounts
    ]


def test_compose_publishes_the_default_local_ports() -> None:
    ports = {
        name: [str(p).split(":")[-1] for p in service.get("ports", [])]
        for name, service in compose()["services"].items()
    }
    assert "8081" in ports["cosmos"]
    assert {"10000", "10001", "10002"} <= set(ports["azurite"])
    assert "5672" in ports["servicebus"]
    assert ports["sqledge"] == []  # internal to the Service Bus emulator


def test_azd_deploys_this_directory_as_a_python_function_app_from_the_bicep() -> None:
    azure = cast(dict[str, Any], yaml.safe_load((ROOT / "azure.yaml").read_text("utf-8")))
    assert azure["infra"] == {"provider": "bicep", "path": "deploy", "module": "main"}
    assert (ROOT / azure["infra"]["path"] / f"{azure['infra']['module']}.bicep").exists()
    assert azure["services"] == {"api": {"project": ".", "language": "python", "host": "function"}}
    assert (DEPLOY / "main.parameters.json").exists()
