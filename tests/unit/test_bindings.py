"""Binding metadata asserted from the indexed app, as the Functions host will read it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from entrypoints.openapi import OPERATIONS


def bindings(functions: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return json.loads(functions[name].get_function_json())["bindings"]  # type: ignore[no-any-return]


def test_every_http_operation_is_bound_with_its_route_method_and_auth(
    functions: dict[str, Any],
) -> None:
    http = {n for n, f in functions.items() if f.is_http_function()}
    assert http - {"not_routed"} == {op.function for op in OPERATIONS}
    for op in OPERATIONS:
        trigger = bindings(functions, op.function)[0]
        assert trigger["type"] == "httpTrigger"
        assert trigger["route"] == op.route
        assert trigger["methods"] == [op.method]
        assert trigger["authLevel"] == ("ANONYMOUS" if op.anonymous else "FUNCTION")


def test_the_fallback_takes_every_method_on_a_catch_all_route_without_a_key(
    functions: dict[str, Any],
) -> None:
    [trigger, _] = bindings(functions, "not_routed")
    assert trigger["route"] == "{*path}"
    assert "methods" not in trigger or not trigger["methods"]
    assert trigger["authLevel"] == "ANONYMOUS"


@pytest.mark.parametrize("name", ["health", "openapi"])
def test_health_and_openapi_are_anonymous(functions: dict[str, Any], name: str) -> None:
    assert bindings(functions, name)[0]["authLevel"] == "ANONYMOUS"


def test_the_relay_trigger_watches_the_contacts_container_with_leases(
    functions: dict[str, Any],
) -> None:
    [trigger] = bindings(functions, "relay_events")
    assert trigger == {
        "direction": "IN",
        "type": "cosmosDBTrigger",
        "name": "documents",
        "connection": "CosmosDBConnection",
        "databaseName": "%COSMOS_DATABASE%",
        "containerName": "%COSMOS_CONTAINER%",
        "leaseContainerName": "%COSMOS_LEASE_CONTAINER%",
        "createLeaseContainerIfNotExists": True,
        "feedPollDelay": 1000,
        "maxItemsPerInvocation": 100,
    }


def test_the_relay_retries_forever_with_exponential_backoff(functions: dict[str, Any]) -> None:
    retry = functions["relay_events"].get_setting("retry_policy").get_dict_repr()
    assert retry["strategy"] == "exponential_backoff"
    assert retry["max_retry_count"] == "-1"
    assert retry["minimum_interval"] == "00:00:01"
    assert retry["maximum_interval"] == "00:01:00"


def test_host_json_pins_the_extension_bundle() -> None:
    from pathlib import Path

    host = json.loads((Path(__file__).resolve().parents[2] / "host.json").read_text())
    assert host["extensionBundle"] == {
        "id": "Microsoft.Azure.Functions.ExtensionBundle", "version": "[4.*, 5.0.0)"}
    assert host["extensions"]["http"]["routePrefix"] == "api"
