"""The subscriber app's deployment: an option of main.bicep (off by default) deploying a Flex
Consumption app of its own, running as its own identity with Service Bus rights on its own
session-enabled subscription only (Data Owner there by default, for target-based scaling),
Storage Blob Data Reader on the claim check's container and Cosmos data access to its
projection container only; settings that agree with the code, the local sample and the local
broker's entities; and a package (`func azure functionapp publish` in subscriber/) with the app
and nothing else."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pathspec

import tests.subscriber  # noqa: F401  (puts subscriber/ on sys.path)
from tests.deploy import functions
from tests.deploy import templates as t
from tests.deploy.templates import DEPLOY, MAIN, ROOT
from tests.subscriber import subscriber_functions

from contacts_projection.settings import (  # isort: skip
    DEFAULT_INBOX_TTL_SECONDS,
    SubscriberSettings,
)

SUBSCRIBER = ROOT / "subscriber"
MODULE = DEPLOY / "modules" / "subscriberapp.bicep"
SERVICEBUS_DATA_RECEIVER = "4f6d3b9b-027b-4f4c-9142-0e5a2a2247e0"
SERVICEBUS_DATA_OWNER = "090c5cfd-751d-490a-894a-3ce6f1109419"
SUBSCRIBER_PRINCIPAL = "subscriberIdentity.properties.principalId"


def app_settings() -> dict[str, Any]:
    return {e["name"]: e["value"] for e in t.variable(MODULE, "appSettings")}


def test_the_subscriber_is_an_option_off_by_default() -> None:
    assert t.default(MAIN, "deploySubscriber") is False
    module = t.modules(MAIN)["subscriber"]
    assert module["path"] == MODULE
    assert "deploySubscriber" in t.references(module["condition"])


def test_it_runs_on_flex_consumption_as_its_own_identity() -> None:
    plan = t.one("Microsoft.Web/serverfarms", "subscriberPlan")
    assert plan.config["sku"] == {"tier": "FlexConsumption", "name": "FC1"}
    site = t.one("Microsoft.Web/sites", "subscriberSite")
    assert site.config["identity"]["type"] == "UserAssigned"
    assert site.properties["functionAppConfig"]["runtime"] == {
        "name": "python",
        "version": "pythonVersion",
    }
    params = t.modules(MAIN)["subscriber"]["params"]
    assert "subscriberIdentity.id" in t.references(params["identityId"])
    assert "identity.id" not in t.references(params["identityId"])


def test_connections_are_identity_based_and_keyless() -> None:
    settings = app_settings()
    for connection in ("AzureWebJobsStorage", "CosmosDBConnection", "ServiceBusConnection"):
        assert settings[f"{connection}__credential"] == "managedidentity"
        assert settings[f"{connection}__clientId"] == "identityClientId"
        assert connection not in settings
    assert settings["ServiceBusConnection__fullyQualifiedNamespace"] == (
        "serviceBusFullyQualifiedNamespace"
    )


def test_its_settings_are_what_the_code_reads_and_the_sample_lists() -> None:
    code = {f.alias for f in SubscriberSettings.model_fields.values() if f.alias}
    code |= functions.setting_expressions(SUBSCRIBER / "function_app.py")
    code -= {"CosmosDBConnection", "COSMOS_VERIFY_TLS"}  # local-only forms
    template = set(app_settings())
    families = {name.split("__", 1)[0] for name in template}
    assert {name for name in code if name.split("__", 1)[0] not in families} == set()
    sample = t.json_file(SUBSCRIBER / "local.settings.sample.json")["Values"]
    assert code - {"CosmosDBConnection__accountEndpoint"} <= set(sample)
    assert sample["SUBSCRIBER_SUBSCRIPTION"] == t.default(MAIN, "subscriberSubscriptionName")
    assert sample["PROJECTION_CONTAINER"] == t.default(MAIN, "projectionContainerName")
    assert int(sample["INBOX_TTL_SECONDS"]) == DEFAULT_INBOX_TTL_SECONDS
    assert t.default(MAIN, "inboxTtlSeconds") == DEFAULT_INBOX_TTL_SECONDS
    assert t.default(MODULE, "inboxTtlSeconds") == DEFAULT_INBOX_TTL_SECONDS


def test_its_subscription_requires_sessions_and_exists_locally() -> None:
    subscription = t.one(
        "Microsoft.ServiceBus/namespaces/topics/subscriptions", "projectionSubscription"
    )
    assert subscription.properties["requiresSession"] is True
    assert subscription.properties["deadLetteringOnMessageExpiration"] is True
    config = t.json_file(ROOT / "tools" / "servicebus-config.json")
    [topic] = [
        x
        for ns in config["UserConfig"]["Namespaces"]
        for x in ns["Topics"]
        if x["Name"] == t.default(MAIN, "serviceBusTopicName")
    ]
    local = {s["Name"]: s for s in topic["Subscriptions"]}
    assert (
        local[t.default(MAIN, "subscriberSubscriptionName")]["Properties"]["RequiresSession"]
        is True
    )


def test_its_subscription_filters_on_the_aggregate_type_locally_as_in_azure() -> None:
    rule = t.one("Microsoft.ServiceBus/namespaces/topics/subscriptions/rules", "projectionFilter")
    in_azure = (
        rule.properties["sqlFilter"]["sqlExpression"]
        .replace("\\'", "'")
        .replace(
            "${projectionAggregateType}",
            t.default(DEPLOY / "modules" / "servicebus.bicep", "projectionAggregateType"),
        )
        .replace("${projectionSubscriptionName}", t.default(MAIN, "subscriberSubscriptionName"))
    )
    config = t.json_file(ROOT / "tools" / "servicebus-config.json")
    [topic] = [
        x
        for ns in config["UserConfig"]["Namespaces"]
        for x in ns["Topics"]
        if x["Name"] == t.default(MAIN, "serviceBusTopicName")
    ]
    [subscription] = [
        s
        for s in topic["Subscriptions"]
        if s["Name"] == t.default(MAIN, "subscriberSubscriptionName")
    ]
    [local] = subscription["Rules"]
    assert (local["Name"], local["Properties"]["FilterType"]) == ("$Default", "Sql")
    assert local["Properties"]["SqlFilter"]["SqlExpression"] == in_azure


def test_it_has_rights_on_its_subscription_only_owner_for_target_based_scaling() -> None:
    """Decided (deploy/README.md): Data Owner scoped to its own subscription by default, so
    the platform can read the message count and scale the trigger by target; `receiver` keeps
    least privilege (Data Receiver) at the cost of incremental scaling."""
    receiver = t.one("Microsoft.Authorization/roleAssignments", "projectionReceiver")
    assert receiver.config["scope"] == "projectionSubscription"
    role = t.resolved_text(receiver.file, t.variable(receiver.file, "projectionRoleId"))
    assert SERVICEBUS_DATA_OWNER in role and SERVICEBUS_DATA_RECEIVER in role
    assert "projectionRoleId" in t.references(receiver.properties["roleDefinitionId"])
    servicebus = DEPLOY / "modules" / "servicebus.bicep"
    assert t.allowed(servicebus, "projectionReceiverRights") == ["owner", "receiver"]
    assert t.default(servicebus, "projectionReceiverRights") == "owner"
    assert t.default(MAIN, "subscriberServiceBusRights") == "owner"
    params = t.modules(MAIN)["serviceBus"]["params"]
    assert t.references(params["projectionReceiverRights"]) == {"subscriberServiceBusRights"}
    assert t.references(params["projectionReceiverPrincipals"]) == {"subscriberPrincipals"}
    assert SUBSCRIBER_PRINCIPAL in t.references(t.variable(MAIN, "subscriberPrincipals"))
    # No other Service Bus role of the subscriber: nothing on the topic or the namespace.
    others = [
        r
        for r in t.resources("Microsoft.Authorization/roleAssignments")
        if "subscriberPrincipals" in t.references(r.config)
        and r.symbol != receiver.symbol
        and SERVICEBUS_DATA_OWNER in t.role_definition(r)
    ]
    assert others == []


def test_its_container_keeps_ttl_per_item_and_only_it_gets_data_access() -> None:
    container = t.one(
        "Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers", "projections"
    )
    resource = container.properties["resource"]
    assert resource["partitionKey"]["paths"] == ["/partitionKey"]
    assert t.value(resource["defaultTtl"]) == -1
    access = t.one(
        "Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments", "projectionDataContributor"
    )
    assert "colls" in str(access.properties["scope"])  # the container, not the account
    params = t.modules(MAIN)["cosmos"]["params"]
    assert "subscriberPrincipals" in t.references(params["projectionContributorPrincipalIds"])


def package() -> set[str]:
    spec = pathspec.GitIgnoreSpec.from_lines(
        (SUBSCRIBER / ".funcignore").read_text("utf-8").splitlines()
    )
    files = set()
    for directory, dirnames, filenames in os.walk(SUBSCRIBER):
        rel_dir = Path(directory).relative_to(SUBSCRIBER)
        dirnames[:] = [d for d in dirnames if not spec.match_file(f"{(rel_dir / d).as_posix()}/")]
        for name in filenames:
            rel = (rel_dir / name).as_posix()
            if name not in {".funcignore", "local.settings.json"} and not spec.match_file(rel):
                files.add(rel)
    return files


def test_its_package_has_the_app_and_nothing_local() -> None:
    files = package()
    assert {
        "function_app.py",
        "host.json",
        "requirements.txt",
        "contacts_projection/projection.py",
    } <= files
    assert not {f for f in files if "local.settings" in f or "__pycache__" in f}
    requirements = (SUBSCRIBER / "requirements.txt").read_text("utf-8").splitlines()
    # cosmos-outbox from the wheel built into ./wheels before publishing (deploy/README.md)
    assert {"--find-links ./wheels", "cosmos-outbox>=0.5,<0.6"} <= set(requirements)
    # its functions are async, on the SDKs' aio clients: their transport (not a dependency of
    # cosmos-outbox) is installed with the app
    assert "aiohttp>=3.9,<4" in requirements


def test_its_projection_read_takes_a_function_key_over_https_only() -> None:
    """The projection's HTTP routes are FUNCTION level: a function key in Azure (locally none
    is checked, as with func start); the app has no anonymous route."""
    levels = {
        b["authLevel"]
        for f in subscriber_functions().values()
        for b in f["bindings"]
        if b["type"] == "httpTrigger"
    }
    assert levels == {"FUNCTION"}
    site = t.one("Microsoft.Web/sites", "subscriberSite")
    assert site.properties["httpsOnly"] is True
