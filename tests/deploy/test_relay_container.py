"""The relay on Azure Container Apps (deploy/modules/relay-containerapp.bicep, the image of
deploy/relay-container/Dockerfile; main.bicep relayHosting=containerApps): the same settings,
identity and leases as the Function App's trigger, so the relay moves between them on its
checkpoints; KEDA's azure-cosmosdb scale rule reads those leases with that identity; the
platform's probes are the command's; a replica told to stop has time to release its leases."""

from __future__ import annotations

import inspect
import re
import tomllib
from typing import Any

from tests.deploy import templates as t
from tests.deploy.templates import DEPLOY, FUNCTION_APP_MODULE, MAIN, ROOT
from tests.deploy.test_settings_consistency import HOST_SETTING_PREFIXES, code_settings, family

MODULE = DEPLOY / "modules" / "relay-containerapp.bicep"
DOCKERFILE = DEPLOY / "relay-container" / "Dockerfile"
#: In a container the probes listen on every interface: the platform's probes come from outside.
ANY_INTERFACE = "0.0.0.0"  # noqa: S104


def container_app() -> t.Resource:
    return t.one("Microsoft.App/containerApps", "app")


def relay_container() -> dict[str, Any]:
    [container] = container_app().properties["template"]["containers"]
    return dict(container)


def env() -> dict[str, Any]:
    return {entry["name"]: entry["value"] for entry in t.variable(MODULE, "relaySettings")}


def test_main_deploys_it_only_for_relay_hosting_container_apps_with_the_apps_identity() -> None:
    assert t.allowed(MAIN, "relayHosting") == ["functions", "containerApps"]
    assert t.default(MAIN, "relayHosting") == "functions"
    module = t.modules(MAIN)["relayContainer"]
    assert module["path"] == MODULE.resolve()
    assert t.references(module["condition"]) >= {"relayHosting"}
    params = module["params"]
    # the Function App's identity: its Cosmos DB data role, Service Bus sender, payload blobs
    # and metrics publisher are this identity's (test_bicep.py holds those assignments)
    assert t.reference(params["identityId"]) == "identity.id"
    assert t.reference(params["identityClientId"]) == "identity.properties.clientId"
    for name in ("cosmosContainer", "cosmosLeaseContainer", "cosmosDatabase"):
        assert t.reference(params[name]) == t.reference(t.modules(MAIN)["api"]["params"][name])


def test_the_function_apps_relay_is_off_when_the_relay_runs_in_containers() -> None:
    for app in ("api", "relay"):
        relay_here = t.modules(MAIN)[app]["params"]["relayHere"]
        assert t.references(relay_here) >= {"relayHosting"}
    assert t.default(FUNCTION_APP_MODULE, "relayHere") is True
    disabled = t.variable(FUNCTION_APP_MODULE, "disabledFunctions")
    assert t.references(disabled) >= {"relayHere", "relayElsewhere"}
    assert t.string_list(FUNCTION_APP_MODULE, "relayElsewhere") == [
        "relay_events",
        "outbox_backlog",
        "outbox_operations",
    ]


def scale_operands(node: Any) -> dict[str, Any]:
    """A `scaleOnLag ? a : b` expression's operands."""
    operator = node["operator"]
    assert operator["type"] == "conditional"
    operands = dict(operator["operands"])
    assert operands["condition"] == "scaleOnLag"
    return operands


def test_the_scale_rule_is_kedas_azure_cosmosdb_on_the_triggers_leases_with_the_identity() -> None:
    scale = container_app().properties["template"]["scale"]
    assert scale_operands(scale["rules"])["true_value"] == ["changeFeedLagRule"]
    rule = t.variable(MODULE, "changeFeedLagRule")
    custom = rule["custom"]
    assert custom["type"] == "azure-cosmosdb"
    assert custom["identity"] == "identityId"  # keys are disabled on the account
    metadata = custom["metadata"]
    named = {k: t.reference(v) for k, v in metadata.items() if isinstance(v, str)}
    assert (
        named.items()
        >= {
            "endpoint": "cosmosEndpoint",
            "databaseId": "cosmosDatabase",
            "containerId": "cosmosContainer",
            "leaseDatabaseId": "cosmosDatabase",
            "leaseContainerId": "cosmosLeaseContainer",
            # KEDA matches lease ids starting with processorName: the processor's name, which is
            # the trigger's leaseContainerPrefix (OUTBOX_PROCESSOR_NAME)
            "processorName": "processorName",
        }.items()
    )
    assert t.references(metadata["changeFeedLagThreshold"]) >= {"lagPerReplica"}
    from cosmos_outbox.settings import DEFAULT_PROCESSOR_NAME

    trigger_name = t.app_settings()["OUTBOX_PROCESSOR_NAME"]
    assert t.default(MODULE, "processorName") == trigger_name == DEFAULT_PROCESSOR_NAME
    assert env()["OUTBOX_PROCESSOR_NAME"] == "processorName"
    assert t.reference(scale["maxReplicas"]) == "maxReplicas"


def test_without_kedas_scaler_a_fixed_number_of_replicas_runs_and_no_rule() -> None:
    """KEDA's azure-cosmosdb scaler ships in KEDA 2.21; where the platform's KEDA lacks it,
    relayScaling=fixed runs relayMaxReplicas replicas (docs/changefeed-deploying.md)."""
    assert t.allowed(MAIN, "relayScaling") == ["keda", "fixed"]
    assert t.default(MAIN, "relayScaling") == "keda"
    scale_on_lag = t.modules(MAIN)["relayContainer"]["params"]["scaleOnLag"]
    assert t.references(scale_on_lag) >= {"relayScaling"}
    assert t.default(MODULE, "scaleOnLag") is True
    scale = container_app().properties["template"]["scale"]
    assert scale_operands(scale["rules"])["false_value"] == []
    minimum = scale_operands(scale["minReplicas"])
    assert (minimum["true_value"], minimum["false_value"]) == ("minReplicas", "maxReplicas")


def test_its_settings_are_the_function_apps_that_the_code_reads() -> None:
    read = set().union(*code_settings())
    families = {family(name) for name in read}
    settings = env()
    functions = t.app_settings()
    for name, value in settings.items():
        assert name in functions, f"{name}: not a setting of the Function App"
        # parameters here, their defaults the app's (below); the failures' ingest is the relay's
        # here, `elsewhere` in the Function Apps (test_the_relay_in_containers_drains_...)
        if name not in {"OUTBOX_PROCESSOR_NAME", "OUTBOX_FAILURE_INGEST"}:
            assert value == functions[name], f"{name}: set otherwise than in the Function App"
        assert name in read or family(name) in families or name.startswith(HOST_SETTING_PREFIXES)
    # what the relay needs to find its feed, leases, topic and claim check
    assert {
        "CosmosDBConnection__accountEndpoint",
        "ServiceBusConnection__fullyQualifiedNamespace",
        "OutboxPayloadStorage__blobServiceUri",
        "COSMOS_DATABASE",
        "COSMOS_CONTAINER",
        "COSMOS_LEASE_CONTAINER",
        "SERVICEBUS_TOPIC",
        "OUTBOX_PROCESSOR_NAME",
        "APPLICATIONINSIGHTS_CONNECTION_STRING",
        "APPLICATIONINSIGHTS_AUTHENTICATION_STRING",
    } <= set(settings)
    assert relay_container()["env"] == "relaySettings"  # those, and nothing else


def test_the_relay_in_containers_drains_the_watched_dead_letters_the_function_apps_do_not() -> None:
    """Only what runs the relay drains the dead letters into failure records: the container app
    watches the Function Apps' subscriptions with OUTBOX_FAILURE_INGEST `true` (a receiver per
    dead-letter path, `cosmos-outbox relay`), while the Function Apps, their relay off, read
    the records (`elsewhere`: test_app_roles.py)."""
    from cosmos_outbox.settings import load_trigger_settings

    settings = env()
    assert settings["OUTBOX_SUBSCRIPTIONS"] == "watchedSubscriptions"
    assert settings["OUTBOX_DEAD_LETTER_QUEUES"] == "deadLetterQueues"
    assert t.references(settings["OUTBOX_FAILURE_INGEST"]) >= {"failureIngest"}
    assert t.default(MODULE, "failureIngest") is True
    for name in ("failureIngest", "failureRetentionSeconds", "deadLetterQueues"):
        assert t.default(MODULE, name) == t.default(FUNCTION_APP_MODULE, name), name
    params = t.modules(MAIN)["relayContainer"]["params"]
    assert (
        params["watchedSubscriptions"] == t.modules(MAIN)["api"]["params"]["watchedSubscriptions"]
    )
    drains = load_trigger_settings(
        {"OUTBOX_FAILURE_INGEST": str(t.default(MODULE, "failureIngest")).lower()}
    )
    assert drains.failure_ingest_here


def test_the_platforms_probes_are_the_commands_and_a_stop_has_time_to_release_the_leases() -> None:
    from aiohttp import web

    from cosmos_outbox.relay import RelayProcessor, probe_app

    stop_grace = inspect.signature(RelayProcessor.stop).parameters["grace"].default

    container = relay_container()
    probes = {probe["type"]: probe["httpGet"] for probe in container["probes"]}
    assert probes["Liveness"]["path"] == "/live"
    assert probes["Readiness"]["path"] == "/ready"  # ready means listening
    assert {t.reference(p["port"]) for p in probes.values()} == {"probesPort"}
    app = probe_app(RelayProcessor.__new__(RelayProcessor))
    routes = {r.resource.canonical for r in app.router.routes() if r.method == "GET" and r.resource}
    assert {p["path"] for p in probes.values()} <= routes
    assert isinstance(app, web.Application)
    args = container["args"]
    assert args[:3] == ["relay", "--host", ANY_INTERFACE] and args[3] == "--port"
    assert t.references(args[4]) >= {"probesPort"}
    grace = int(container_app().properties["template"]["terminationGracePeriodSeconds"])
    assert grace > stop_grace
    # no ingress: the relay takes no requests
    assert "ingress" not in container_app().properties["configuration"]


def test_the_image_runs_the_relay_command_with_its_extras_on_the_probes_port() -> None:
    text = DOCKERFILE.read_text("utf-8")
    assert re.search(r'^ENTRYPOINT \["cosmos-outbox"\]$', text, re.M)
    cmd = re.search(r"^CMD \[(.*)\]$", text, re.M)
    assert cmd is not None
    assert [a.strip().strip('"') for a in cmd.group(1).split(",")] == [
        "relay",
        "--host",
        ANY_INTERFACE,
        "--port",
        str(t.default(MODULE, "probesPort")),
    ]
    installed = re.search(r'"cosmos-outbox\[([a-z,-]+)\]"', text)
    assert installed is not None
    pyproject = tomllib.loads(
        (ROOT / "packages" / "cosmos-outbox" / "pyproject.toml").read_text("utf-8")
    )
    extras = pyproject["project"]["optional-dependencies"]
    assert set(installed.group(1).split(",")) == {"relay", "azure-monitor"} <= set(extras)
    assert re.search(r"^USER \d+$", text, re.M), "runs as a non-root user"
    assert re.search(r"^STOPSIGNAL SIGTERM$", text, re.M)
