"""One package, three roles: all functions, API only, relay only (by app setting)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from tests.deploy import functions
from tests.deploy import templates as t
from tests.deploy.templates import FUNCTION_APP_MODULE, MAIN


def disabled_by_role() -> dict[str, list[str]]:
    table = t.variable(FUNCTION_APP_MODULE, "disabledByRole")
    return {role: t.string_list(FUNCTION_APP_MODULE, v) if v else [] for role, v in table.items()}


def test_roles_are_all_api_and_relay() -> None:
    assert t.allowed(FUNCTION_APP_MODULE, "appRole") == ["all", "api", "relay"]
    assert t.default(FUNCTION_APP_MODULE, "appRole") == "all"
    assert set(disabled_by_role()) == {"all", "api", "relay"}


def test_functions_are_disabled_with_the_official_app_setting() -> None:
    loop = t.variable(FUNCTION_APP_MODULE, "disabledFunctionSettings")
    assert loop["config"] == {"name": "AzureWebJobs.${functionName}.Disabled", "value": "true"}
    assert loop["loop_type"]["detail"]["array_name"] == "disabledFunctions"


def test_all_role_disables_nothing_api_disables_the_relay_relay_keeps_only_health() -> None:
    roles = disabled_by_role()
    assert roles["all"] == []
    assert roles["api"][:2] == ["relay_events", "outbox_backlog"]
    assert "health" not in roles["relay"]
    assert "relay_events" not in roles["relay"]
    assert "outbox_backlog" not in roles["relay"]  # the estimate runs beside the relay
    assert "outbox_operations" not in roles["relay"]  # so do the bulk operations


def test_role_lists_name_exactly_the_functions_of_function_app() -> None:
    """The roles' lists are the indexed app's functions (never restated here: a route added to
    the operators' package that the Bicep does not name fails below)."""
    roles = disabled_by_role()
    admin = functions.admin_functions()
    assert {"outbox_status", "redrive_events_operation", "list_operations"} <= admin
    console = functions.console_functions()
    assert console == {f"console_{name}" for name in admin} | {"console_page", "console_static"}
    assert set(roles["api"]) == functions.trigger_functions() | admin | console
    # the probes stay in every app: /health and the operators' anonymous outbox/health
    assert set(roles["relay"]) == (
        functions.http_functions() - {"health", "outbox_health"} - admin - console
    )


def test_the_operators_routes_run_beside_the_relay_never_in_the_api_app() -> None:
    admin = t.string_list(FUNCTION_APP_MODULE, "adminHttpFunctions")
    assert set(admin) == functions.admin_functions()
    console = t.string_list(FUNCTION_APP_MODULE, "consoleHttpFunctions")
    assert set(console) == functions.console_functions()
    relay = t.string_list(FUNCTION_APP_MODULE, "relayFunctions")
    assert set(relay) == functions.trigger_functions()
    both = t.string_list(FUNCTION_APP_MODULE, "relayAndAdminFunctions")
    assert len(both) == len(set(both)) and set(both) == set(relay) | set(admin) | set(console)


def test_split_deploys_a_second_app_in_the_relay_role_only_when_asked() -> None:
    modules = t.modules(MAIN)
    assert modules["relay"]["condition"] == "splitRelay"
    assert modules["relay"]["path"] == FUNCTION_APP_MODULE.resolve()
    assert modules["relay"]["params"]["appRole"] == "relay"
    assert modules["api"]["condition"] is None
    assert modules["api"]["params"]["azdServiceName"] == "api"
    api_role = modules["api"]["params"]["appRole"]["operator"]["operands"]
    assert api_role == {"condition": "splitRelay", "true_value": "api", "false_value": "all"}
    assert t.default(MAIN, "splitRelay") is False


def failure_ingest_mode(app_role: str, relay_here: bool, failure_ingest: bool) -> str:
    """OUTBOX_FAILURE_INGEST as functionapp.bicep sets it for these parameters: its
    `failureIngestMode` evaluated (a conditional of conditionals, an index into a table)."""
    given: dict[str, Any] = {
        "appRole": app_role,
        "relayHere": relay_here,
        "failureIngest": failure_ingest,
        "failureIngestByRole": t.variable(FUNCTION_APP_MODULE, "failureIngestByRole"),
    }

    def evaluate(node: Any) -> Any:
        if isinstance(node, str):  # an identifier, else a literal
            return given.get(node, node)
        operator = node["operator"]
        operands = operator["operands"]
        if operator["type"] == "conditional":
            chosen = "true_value" if evaluate(operands["condition"]) else "false_value"
            return evaluate(operands[chosen])
        assert operator["type"] == "index_accessor", operator
        return evaluate(operands["operand_1"])[evaluate(operands["operand_2"])]

    return str(evaluate(t.variable(FUNCTION_APP_MODULE, "failureIngestMode")))


def test_only_the_app_running_the_relay_drains_the_dead_letters_the_others_read_the_records() -> (
    None
):
    """OUTBOX_FAILURE_INGEST by role: `true` (the `ingest_failures_*` triggers) only where the
    relay runs; the api app and an app whose relay runs in containers read the records
    (`elsewhere`: no trigger); failureIngest false, no records anywhere."""
    assert t.app_settings()["OUTBOX_FAILURE_INGEST"] == "failureIngestMode"
    assert t.default(FUNCTION_APP_MODULE, "failureIngest") is True
    expected = {
        ("all", True): "true",
        ("relay", True): "true",
        ("api", True): "elsewhere",
        ("all", False): "elsewhere",
        ("relay", False): "elsewhere",
        ("api", False): "elsewhere",
    }
    for (role, relay_here), mode in expected.items():
        assert failure_ingest_mode(role, relay_here, True) == mode, (role, relay_here)
        assert failure_ingest_mode(role, relay_here, False) == "false", (role, relay_here)


@pytest.mark.parametrize(
    ("split", "hosting"), list(itertools.product([False, True], ["functions", "containerApps"]))
)
def test_each_deployment_has_one_drainer_and_its_operators_routes_read_the_records(
    split: bool, hosting: str
) -> None:
    """main.bicep's shapes (splitRelay, relayHosting): exactly one host drains the dead letters
    (the app running the relay, or the relay's container app), and the app serving the
    operators' routes (the relay app when split) reads the records, as the settings read it."""
    from cosmos_outbox.settings import load_trigger_settings

    modules = t.modules(MAIN)
    assert "failureIngest" not in modules["api"]["params"]  # the module's default: on
    relay_here = hosting == "functions"
    apps = {"api": "api" if split else "all"} | ({"relay": "relay"} if split else {})
    modes = {app: failure_ingest_mode(role, relay_here, True) for app, role in apps.items()}
    if not relay_here:
        modes["relayContainer"] = "true"  # relay-containerapp.bicep: string(failureIngest)
    read = {app: load_trigger_settings({"OUTBOX_FAILURE_INGEST": m}) for app, m in modes.items()}
    assert [app for app, s in read.items() if s.failure_ingest_here] == [
        "api" if relay_here and not split else "relay" if relay_here else "relayContainer"
    ]
    operators = "relay" if split else "api"
    assert read[operators].failure_records
    assert all(s.failure_records for s in read.values())
