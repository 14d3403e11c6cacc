"""Binding metadata asserted from the indexed app, as the Functions host will read it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

# The HTTP API docs/http-api.md documents, pinned: (method, route) -> (function, auth level). Every
# route here stays bound as it is; a route added beside them needs no edit here (the OpenAPI
# tests hold each bound function to its declaration).
API = {
    ("POST", "contacts"): ("create_contact", "FUNCTION"),
    ("GET", "contacts"): ("list_contacts", "FUNCTION"),
    ("GET", "contacts/{id}"): ("get_contact", "FUNCTION"),
    ("PATCH", "contacts/{id}"): ("patch_contact", "FUNCTION"),
    ("POST", "contacts/{id}/update-name"): ("update_contact_name", "FUNCTION"),
    ("POST", "contacts/{id}/update-email"): ("update_contact_email", "FUNCTION"),
    ("POST", "contacts/{id}/update-description"): ("update_contact_description", "FUNCTION"),
    ("POST", "contacts/{id}/update-company"): ("update_contact_company", "FUNCTION"),
    ("DELETE", "contacts/{id}"): ("delete_contact", "FUNCTION"),
    ("GET", "health"): ("health", "ANONYMOUS"),
    ("GET", "openapi.json"): ("openapi", "ANONYMOUS"),
    ("GET", "outbox/status"): ("outbox_status", "ADMIN"),
    ("GET", "outbox/quarantine"): ("list_quarantine", "ADMIN"),
    ("POST", "outbox/quarantine/{eventId}/replay"): ("replay_quarantined", "ADMIN"),
    ("DELETE", "outbox/quarantine/{eventId}"): ("discard_quarantined", "ADMIN"),
    ("POST", "outbox/redrive"): ("redrive_events", "ADMIN"),
}


def bindings(functions: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return json.loads(functions[name].get_function_json())["bindings"]  # type: ignore[no-any-return]


def test_the_http_api_is_bound_with_its_routes_methods_and_auth_levels(
    functions: dict[str, Any],
) -> None:
    bound = {}
    for name, function in functions.items():
        if function.is_http_function() and name != "zz_not_routed":
            trigger = bindings(functions, name)[0]
            assert trigger["type"] == "httpTrigger"
            for method in trigger["methods"]:
                bound[(method, trigger["route"])] = (name, trigger["authLevel"])
    assert {route: bound.get(route) for route in API} == API


def test_the_fallback_takes_every_method_on_a_catch_all_route_without_a_key(
    functions: dict[str, Any],
) -> None:
    [trigger, _] = bindings(functions, "zz_not_routed")
    assert trigger["route"] == "{*path}"
    assert "methods" not in trigger or not trigger["methods"]
    assert trigger["authLevel"] == "ANONYMOUS"


@pytest.mark.parametrize("name", ["health", "openapi"])
def test_health_and_openapi_are_anonymous(functions: dict[str, Any], name: str) -> None:
    assert bindings(functions, name)[0]["authLevel"] == "ANONYMOUS"


#: The relay trigger's settings that have a default.
_DEFAULTED = ("COSMOS_DATABASE", "COSMOS_LEASE_CONTAINER")


def test_the_relay_trigger_watches_the_contacts_container_with_leases(
    functions: dict[str, Any],
) -> None:
    [trigger] = bindings(functions, "relay_events")
    # COSMOS_DATABASE and COSMOS_LEASE_CONTAINER are bound as their expressions where they are
    # set (the Bicep sets both), as their defaults' names where not (an expression of a missing
    # setting fails the function in Azure): packages/cosmos-outbox/tests/test_settings.py
    named = {n: f"%{n}%" if os.environ.get(n) else None for n in _DEFAULTED}
    assert trigger == {
        "direction": "IN",
        "type": "cosmosDBTrigger",
        "name": "documents",
        "connection": "CosmosDBConnection",
        "databaseName": named["COSMOS_DATABASE"] or "outbox",
        "containerName": "%COSMOS_CONTAINER%",
        "leaseContainerName": named["COSMOS_LEASE_CONTAINER"] or "leases",
        "leaseContainerPrefix": "outbox.",  # its leases apart from an app's own trigger's
        "createLeaseContainerIfNotExists": True,
        "startFromBeginning": True,  # a new lease must not skip events already written
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

    host = json.loads((Path(__file__).resolve().parents[3] / "host.json").read_text())
    assert host["extensionBundle"] == {
        "id": "Microsoft.Azure.Functions.ExtensionBundle",
        "version": "[4.*, 5.0.0)",
    }
    assert host["extensions"]["http"]["routePrefix"] == "api"


INDEX = """
import json, function_app
print(json.dumps({f.get_function_name(): json.loads(f.get_function_json())["bindings"][0]
                  for f in function_app.app.get_functions()}))
"""


def index_with(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Index the app in a fresh process with these app settings, as the worker does."""
    root = Path(__file__).resolve().parents[3]
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in ("FEED_POLL_DELAY_MS", "MAX_ITEMS_PER_INVOCATION", "BACKLOG_ESTIMATE_SCHEDULE")
    }
    return subprocess.run(
        [sys.executable, "-c", INDEX],
        cwd=root,
        env={**clean, **env},
        capture_output=True,
        text=True,
        check=False,
    )


def test_relay_settings_in_the_environment_change_the_indexed_metadata() -> None:
    result = index_with(
        {
            "FEED_POLL_DELAY_MS": "250",
            "MAX_ITEMS_PER_INVOCATION": "40",
            "BACKLOG_ESTIMATE_SCHEDULE": "*/5 * * * * *",
        }
    )
    assert result.returncode == 0, result.stderr
    triggers = json.loads(result.stdout)
    assert triggers["relay_events"]["feedPollDelay"] == 250
    assert triggers["relay_events"]["maxItemsPerInvocation"] == 40
    assert triggers["outbox_backlog"]["schedule"] == "*/5 * * * * *"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("FEED_POLL_DELAY_MS", "soon"),
        ("FEED_POLL_DELAY_MS", "0"),
        ("MAX_ITEMS_PER_INVOCATION", "-1"),
        ("BACKLOG_ESTIMATE_SCHEDULE", "every minute"),
    ],
)
def test_a_bad_relay_setting_fails_indexing_naming_the_setting(name: str, value: str) -> None:
    result = index_with({name: value})
    assert result.returncode != 0
    assert f"invalid settings: {name}" in result.stderr


def test_the_backlog_estimate_runs_on_a_timer(functions: dict[str, Any]) -> None:
    [trigger] = bindings(functions, "outbox_backlog")
    assert trigger["type"] == "timerTrigger"
    assert trigger["schedule"] == "0 * * * * *"
    assert trigger["runOnStartup"] is False
    assert trigger["useMonitor"] is False
