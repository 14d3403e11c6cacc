"""The suites' deployed mode (tools/target.py, `pytest --deployed`), in-process: the target read
from the deployment's output names (each missing one named), the credential it reaches Cosmos DB
and Service Bus with (an Entra ID identity; a local token only for endpoints on the loopback),
and which tests a deployed run keeps -- a server test that is neither the target's nor marked
local_stack refused, naming it. The suites themselves run against `make run`'s stack in that
mode as docs/testing.md ("The deployed smoke test") says."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from azure.identity import DefaultAzureCredential

from tools.target import (
    KEY_VARIABLE,
    VARIABLES,
    Deployed,
    DeployedError,
    LocalToken,
    deployed_selection,
)

AZURE = {
    "AZURE_FUNCTION_APP_URL": "https://func-api-abc.azurewebsites.net",
    "COSMOS_ENDPOINT": "https://cosmos-abc.documents.azure.com:443/",
    "COSMOS_DATABASE": "outbox",
    "COSMOS_CONTAINER": "contacts",
    "SERVICEBUS_FULLY_QUALIFIED_NAMESPACE": "sb-abc.servicebus.windows.net",
    "SERVICEBUS_TOPIC": "contact-events",
    "SERVICEBUS_SUBSCRIPTION": "all-events",
}
LOCAL = AZURE | {
    "AZURE_FUNCTION_APP_URL": "http://127.0.0.1:7071",
    "COSMOS_ENDPOINT": "https://[::ffff:127.0.0.1]:8081/",
    "SERVICEBUS_FULLY_QUALIFIED_NAMESPACE": "127.0.0.1:5672",
}


def test_the_target_is_the_deployments_outputs_and_each_missing_one_is_named() -> None:
    assert set(AZURE) == set(VARIABLES)
    with pytest.raises(DeployedError) as missing:
        Deployed.from_environment({"COSMOS_DATABASE": "outbox", "SERVICEBUS_TOPIC": " "})
    named = str(missing.value)
    assert all(name in named for name in VARIABLES if name != "COSMOS_DATABASE")
    assert "COSMOS_DATABASE" not in named
    deployed = Deployed.from_environment(AZURE | {KEY_VARIABLE: "k3y"})
    assert deployed.api_url == "https://func-api-abc.azurewebsites.net/api"
    assert deployed.headers == {"x-functions-key": "k3y"}
    assert Deployed.from_environment(AZURE).headers == {}  # a local host that checks no key


def test_azure_is_reached_with_an_identity_and_only_the_loopback_with_a_local_token() -> None:
    assert isinstance(Deployed.from_environment(AZURE).credential, DefaultAzureCredential)
    assert isinstance(Deployed.from_environment(LOCAL).credential, LocalToken)
    # one endpoint in Azure is enough for the identity
    mixed = LOCAL | {"COSMOS_ENDPOINT": AZURE["COSMOS_ENDPOINT"]}
    assert isinstance(Deployed.from_environment(mixed).credential, DefaultAzureCredential)


@dataclass
class Item:
    nodeid: str
    fixturenames: list[str]
    marks: set[str] = field(default_factory=set)

    def get_closest_marker(self, name: str) -> object | None:
        return name if name in self.marks else None


def test_a_deployed_run_keeps_the_targets_tests_and_refuses_an_unsorted_server_test() -> None:
    http = Item("api::http", ["client", "target"], {"integration"})
    relay = Item("outbox::relay", ["relay_target"], {"e2e"})
    killed = Item("outbox::killed", ["stack"], {"e2e", "local_stack"})
    hung = Item("api::hung", ["client", "target"], {"integration", "local_stack"})
    in_process = Item("api::in_process", ["world"])
    kept, deselected, unsorted = deployed_selection([http, relay, killed, hung, in_process])
    assert (kept, deselected, unsorted) == ([http, relay], [killed, hung, in_process], [])

    forgotten = Item("outbox::forgotten", ["stack"], {"e2e"})
    both = Item("api::both", ["target", "stack"], {"integration"})
    _, _, unsorted = deployed_selection([forgotten, both])
    assert unsorted == ["outbox::forgotten", "api::both (it asks for stack)"]
