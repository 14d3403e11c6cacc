"""The Bicep templates declare what the outbox needs in Azure (parsed, not deployed)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from infra.cosmos.contacts import LIST_CONTACTS_QUERY
from tests.deploy import templates as t
from tests.deploy.templates import DEPLOY, FUNCTION_APP_MODULE, MAIN, ROOT
from tools.provision import (
    INDEXING_POLICY_FILE,
    PROJECTION_INDEXING_POLICY_FILE,
    container_spec,
    indexing_policy,
)

COSMOS = DEPLOY / "modules" / "cosmos.bicep"
SERVICEBUS = DEPLOY / "modules" / "servicebus.bicep"

COSMOS_DATA_CONTRIBUTOR = "00000000-0000-0000-0000-000000000002"
SERVICEBUS_DATA_SENDER = "69a216fc-b8fb-44d8-bc22-1f3c2b7d47d5"
STORAGE_BLOB_DATA_OWNER = "b7e6dc6d-f1e8-4753-8033-0f276bb0955b"
STORAGE_QUEUE_DATA_CONTRIBUTOR = "974c5e8b-45b9-4653-ba55-5f855dd0fb88"
STORAGE_TABLE_DATA_CONTRIBUTOR = "0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3"
MONITORING_METRICS_PUBLISHER = "3913510d-42f4-4e42-8a64-420c390055eb"

APP_IDENTITY_PRINCIPAL = "identity.properties.principalId"
RELAY_MAX_RETRY_GAP_SECONDS = 60.0  # function_app.py: maximum_interval="00:01:00"


@pytest.mark.parametrize("path", t.bicep_files(), ids=lambda p: str(p.relative_to(DEPLOY)))
def test_every_template_parses(path: Path) -> None:
    assert t.parse(path)


# ---- Cosmos DB ----


def test_cosmos_account_is_nosql_session_consistent_and_keyless() -> None:
    account = t.one("Microsoft.DocumentDB/databaseAccounts")
    props = account.properties
    assert account.config["kind"] == "GlobalDocumentDB"
    assert props["consistencyPolicy"]["defaultConsistencyLevel"] == "Session"
    assert props["disableLocalAuth"] is True
    assert props["disableKeyBasedMetadataWriteAccess"] is True
    assert props["minimalTlsVersion"] == "Tls12"


@pytest.mark.parametrize(
    ("symbol", "declared", "policy"),
    [
        ("contacts", "contacts", INDEXING_POLICY_FILE),
        ("projections", "contact-projections", PROJECTION_INDEXING_POLICY_FILE),
    ],
)
def test_a_container_has_partition_key_ttl_on_and_the_shared_indexing_policy(
    symbol: str, declared: str, policy: Path
) -> None:
    """The Bicep template loads the container's policy from its file, which the local stack's
    declaration (tools/funcstack.json) names too: one source."""
    container = t.one("Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers", symbol)
    resource = container.properties["resource"]
    assert resource["partitionKey"]["paths"] == ["/partitionKey"]
    assert t.value(resource["defaultTtl"]) == -1
    loaded = resource["indexingPolicy"]["function"]
    assert loaded["type"] == "load_json_content"
    assert (COSMOS.parent / loaded["parameters"]["file_path"]).resolve() == policy
    assert container_spec(declared).indexing_policy == indexing_policy(policy)


#: The library's queries (its SQL texts: string constants, f-strings' literal parts), read on
#: the outbox's container but for the subscriber's (on the projections').
OUTBOX_QUERIES = ROOT / "packages" / "cosmos-outbox" / "src" / "cosmos_outbox"
PROJECTION_QUERIES = OUTBOX_QUERIES / "subscriber"
#: A text of a query, or a part of one (`_OPEN_OF + " AND c.sequenceNumber IN (...)"`): it names
#: a document's path (`c.data.deleted`) and says SQL.
SQL_PART = re.compile(r"\b(?:SELECT|WHERE|ORDER BY|AND|OR)\b")
DOCUMENT_PATH = re.compile(r"\bc((?:\.[A-Za-z_]\w*)+)")
#: Where a query filters or sorts: after its WHERE, or anywhere in a part that has no SELECT (a
#: condition added to a query's WHERE).
FILTERED = re.compile(r"\b(?:WHERE|ORDER BY)\b(.*)", re.DOTALL)

#: The paths a query of the outbox's container filters or sorts on that the policy leaves out,
#: and why reading them is no scan of the container (every other such path is indexed).
ACCEPTED_SCANS = {
    "/id/?": "indexed whatever the policy says (Cosmos DB indexes `id` in consistent mode)",
    "/state/?": "a failure record's state, tested on the records `/type` and `/entity` select",
    "/status/?": "a quarantine record's status, tested on the records `/type` selects (a few)",
    "/active/?": "a bulk operation's flag, tested in the operations' partition (a few documents)",
    "/releasedAt/?": "NOT IS_DEFINED, tested on the scheduled events `/deliverAt` selects",
    "/cancelledAt/?": "NOT IS_DEFINED, tested on the scheduled events `/deliverAt` selects",
}


def query_paths(text: str) -> set[str]:
    """The paths a SQL text (or part of one) filters or sorts on, as the policy names them."""
    if not SQL_PART.search(text) or not DOCUMENT_PATH.search(text):
        return set()
    where = FILTERED.search(text)
    if where is None and "SELECT" in text:
        return set()  # what a query projects only
    condition = where.group(1) if where is not None else text
    return {m.replace(".", "/") + "/?" for m in DOCUMENT_PATH.findall(condition)}


def shipped_query_paths(folder: Path, leave_out: Path | None = None) -> dict[str, list[str]]:
    """Each path the SQL texts of `folder`'s modules (`leave_out`'s not) filter or sort on, and
    where (module:line); docstrings are not queries."""
    found: dict[str, list[str]] = {}
    for module in sorted(folder.rglob("*.py")):
        if leave_out is not None and module.is_relative_to(leave_out):
            continue
        tree = ast.parse(module.read_text("utf-8"))
        docstrings = {
            id(node.value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docstrings
            ):
                for path in query_paths(node.value):
                    where = f"{module.relative_to(ROOT)}:{node.lineno}"
                    found.setdefault(path, []).append(where)
    return found


def test_query_paths_are_read_from_where_and_order_by() -> None:
    assert query_paths(LIST_CONTACTS_QUERY) == {"/type/?", "/data/deleted/?"}
    assert query_paths("SELECT TOP 3 c.x FROM c WHERE c.a = 1 ORDER BY c.b.c") == {
        "/a/?",
        "/b/c/?",
    }
    assert query_paths(" AND NOT IS_DEFINED(c.sequenceNumber)") == {"/sequenceNumber/?"}
    assert query_paths("SELECT c.id FROM c ") == set()  # a projection
    assert query_paths("the aggregate's events") == set()


def test_the_indexing_policy_indexes_what_the_queries_filter_and_sort_on_and_no_more() -> None:
    """Every path a shipped query of the contacts container filters or sorts on (the contact
    list's, the library's) is indexed, or an accepted scan; every indexed path is one of them."""
    policy = indexing_policy()
    assert policy["indexingMode"] == "consistent"
    assert [p["path"] for p in policy["excludedPaths"]] == ["/*"]
    included = {p["path"] for p in policy["includedPaths"]}
    queried = shipped_query_paths(OUTBOX_QUERIES, leave_out=PROJECTION_QUERIES)
    for path in query_paths(LIST_CONTACTS_QUERY):
        queried.setdefault(path, []).append("infra/cosmos/contacts.py")
    not_served = {p: at for p, at in queried.items() if p not in included | set(ACCEPTED_SCANS)}
    assert not not_served, f"queried, neither indexed nor an accepted scan: {not_served}"
    assert included <= set(queried), f"indexed, queried by none: {included - set(queried)}"
    assert set(ACCEPTED_SCANS) <= set(queried) - included, "an accepted scan no longer is one"


def test_the_projection_containers_policy_indexes_what_the_subscribers_queries_filter_on() -> None:
    """The subscriber's queries read its projections' container (an inbox record by its event's
    id): each path they filter or sort on is indexed there, and nothing else."""
    policy = indexing_policy(PROJECTION_INDEXING_POLICY_FILE)
    assert policy["indexingMode"] == "consistent"
    assert [p["path"] for p in policy["excludedPaths"]] == ["/*"]
    included = {p["path"] for p in policy["includedPaths"]}
    queried = shipped_query_paths(PROJECTION_QUERIES)
    assert {p: at for p, at in queried.items() if p not in included} == {}
    assert included == set(queried)


def test_lease_container_is_partitioned_by_id() -> None:
    leases = t.one("Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers", "leases")
    assert leases.properties["resource"]["partitionKey"]["paths"] == ["/id"]


def test_container_names_default_to_the_app_defaults() -> None:
    assert t.default(MAIN, "cosmosDatabaseName") == "outbox"
    assert t.default(MAIN, "cosmosContainerName") == "contacts"
    assert t.default(MAIN, "cosmosLeaseContainerName") == "leases"


def test_app_identity_gets_cosmos_built_in_data_contributor() -> None:
    assignment = t.one(
        "Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments", "dataContributor"
    )
    assert COSMOS_DATA_CONTRIBUTOR in t.role_definition(assignment)
    cosmos_params = t.modules(MAIN)["cosmos"]["params"]
    assert APP_IDENTITY_PRINCIPAL in t.references(cosmos_params["dataContributorPrincipalIds"])


# ---- Service Bus ----


def test_servicebus_namespace_is_standard_by_default_premium_selectable_and_keyless() -> None:
    assert t.allowed(MAIN, "serviceBusSku") == ["Standard", "Premium"]
    assert t.default(MAIN, "serviceBusSku") == "Standard"
    assert t.modules(MAIN)["serviceBus"]["params"]["skuName"] == "serviceBusSku"
    namespace = t.one("Microsoft.ServiceBus/namespaces")
    assert namespace.properties["disableLocalAuth"] is True


def test_topic_drops_duplicates_keeps_order_and_never_deletes_itself() -> None:
    topic = t.one("Microsoft.ServiceBus/namespaces/topics").properties
    assert topic["requiresDuplicateDetection"] is True
    assert topic["duplicateDetectionHistoryTimeWindow"] == "duplicateDetectionHistoryTimeWindow"
    assert topic["supportOrdering"] is True
    assert "autoDeleteOnIdle" not in topic  # the default: never


def test_duplicate_window_is_a_parameter_of_one_day_that_outlasts_relay_retries() -> None:
    passed = t.modules(MAIN)["serviceBus"]["params"]["duplicateDetectionHistoryTimeWindow"]
    assert passed == "duplicateDetectionHistoryTimeWindow"
    for path in (MAIN, SERVICEBUS):
        window = t.iso_duration_seconds(t.default(path, "duplicateDetectionHistoryTimeWindow"))
        assert window == 86400
        assert 20 <= window <= 7 * 86400  # Service Bus limits
        assert window > relay_max_retry_gap_seconds()


def relay_max_retry_gap_seconds() -> float:
    app = ROOT / "function_app.py"
    if app.exists():
        match = re.search(r'maximum_interval\s*=\s*"(\d+):(\d\d):(\d\d)"', app.read_text("utf-8"))
        if match:
            h, m, s = (int(g) for g in match.groups())
            return float(h * 3600 + m * 60 + s)
    return RELAY_MAX_RETRY_GAP_SECONDS


def test_consumer_subscription_requires_sessions_and_dead_letters() -> None:
    subscription = t.one(
        "Microsoft.ServiceBus/namespaces/topics/subscriptions", "subscription"
    ).properties
    assert subscription["requiresSession"] is True
    assert subscription["deadLetteringOnMessageExpiration"] is True
    assert subscription["maxDeliveryCount"] == "maxDeliveryCount"
    assert "autoDeleteOnIdle" not in subscription


def test_app_identity_may_send_to_the_topic() -> None:
    senders = [
        r
        for r in t.resources("Microsoft.Authorization/roleAssignments")
        if SERVICEBUS_DATA_SENDER in t.role_definition(r)
    ]
    assert len(senders) == 1 and senders[0].config["scope"] == "topic"
    sb_params = t.modules(MAIN)["serviceBus"]["params"]
    assert "appPrincipal" in t.references(sb_params["senderPrincipals"])
    app_principal = t.variable(MAIN, "appPrincipal")
    assert t.reference(app_principal["id"]) == APP_IDENTITY_PRINCIPAL
    assert app_principal["type"] == "ServicePrincipal"


def test_azure_entity_names_match_the_local_service_bus_config() -> None:
    config = t.json_file(ROOT / "tools" / "servicebus-config.json")
    topics = {
        topic["Name"]: topic for ns in config["UserConfig"]["Namespaces"] for topic in ns["Topics"]
    }
    topic = topics[t.default(MAIN, "serviceBusTopicName")]
    assert topic["Properties"]["RequiresDuplicateDetection"] is True
    # the deployed window locally too: a takeover or an outage that Azure's window absorbs is
    # absorbed locally, and one that would outlast it in Azure outlasts it locally
    assert topic["Properties"]["DuplicateDetectionHistoryTimeWindow"] == t.default(
        MAIN, "duplicateDetectionHistoryTimeWindow"
    )
    subscriptions = {s["Name"]: s for s in topic["Subscriptions"]}
    subscription = subscriptions[t.default(MAIN, "serviceBusSubscriptionName")]
    assert subscription["Properties"]["RequiresSession"] is True


# ---- Function App, identity, monitoring ----


def test_function_app_runs_python_on_flex_consumption_as_the_user_assigned_identity() -> None:
    plan = t.one("Microsoft.Web/serverfarms", "plan")
    sku = plan.config["sku"]["operator"]["operands"]  # flexConsumption ? FC1 : Y1
    assert sku["condition"] == "flexConsumption"
    assert sku["true_value"] == {"tier": "FlexConsumption", "name": "FC1"}
    assert t.default(FUNCTION_APP_MODULE, "hostingPlan") == "FlexConsumption"
    site = t.one("Microsoft.Web/sites", "site")
    assert site.config["identity"]["type"] == "UserAssigned"
    config = t.variable(FUNCTION_APP_MODULE, "flexAppConfig")
    assert config["runtime"] == {"name": "python", "version": "pythonVersion"}
    assert t.default(FUNCTION_APP_MODULE, "pythonVersion") == "3.13"
    auth = config["deployment"]["storage"]["authentication"]
    assert auth == {"type": "UserAssignedIdentity", "userAssignedIdentityResourceId": "identityId"}
    assert site.properties["httpsOnly"] is True


def conditional(node: object) -> dict[str, object]:
    """`condition ? a : b` as pycep gives it: condition, true_value, false_value."""
    assert isinstance(node, dict) and node["operator"]["type"] == "conditional", node
    operands: dict[str, object] = node["operator"]["operands"]
    return operands


def test_the_python_version_and_the_plan_are_parameters_linux_consumption_on_y1() -> None:
    """Python 3.11 - 3.14 on Flex Consumption (default); Linux Consumption (Y1) with its runtime
    in linuxFxVersion and the settings Flex forbids (issue 47)."""
    for module in (FUNCTION_APP_MODULE, MAIN):
        assert t.allowed(module, "pythonVersion") == ["3.11", "3.12", "3.13", "3.14"]
        assert t.allowed(module, "hostingPlan") == ["FlexConsumption", "Consumption"]
    assert t.allowed(DEPLOY / "modules" / "subscriberapp.bicep", "pythonVersion") == [
        "3.11",
        "3.12",
        "3.13",
        "3.14",
    ]
    for name in ("api", "relay"):
        params = t.modules(MAIN)[name]["params"]
        assert params["pythonVersion"] == "pythonVersion"
        assert params["hostingPlan"] == "hostingPlan"
    plan = conditional(t.one("Microsoft.Web/serverfarms", "plan").config["sku"])
    assert plan["false_value"] == {"tier": "Dynamic", "name": "Y1"}
    site = t.one("Microsoft.Web/sites", "site").properties
    assert conditional(site["functionAppConfig"]) == {
        "condition": "flexConsumption",
        "true_value": "flexAppConfig",
        "false_value": None,
    }
    assert conditional(site["siteConfig"]["linuxFxVersion"])["false_value"] == (
        "Python|${pythonVersion}"
    )
    settings = {
        s["name"]: s["value"] for s in t.variable(FUNCTION_APP_MODULE, "consumptionSettings")
    }
    assert settings == {
        "FUNCTIONS_EXTENSION_VERSION": "~4",
        "FUNCTIONS_WORKER_RUNTIME": "python",
        "SCM_DO_BUILD_DURING_DEPLOYMENT": "true",
        "ENABLE_ORYX_BUILD": "true",
    }
    parameters = t.json_file(DEPLOY / "main.parameters.json")["parameters"]
    assert parameters["pythonVersion"]["value"] == "${PYTHON_VERSION=3.13}"
    assert parameters["hostingPlan"]["value"] == "${HOSTING_PLAN=FlexConsumption}"


def test_connections_are_identity_based_with_the_user_assigned_client_id() -> None:
    settings = t.app_settings()
    for connection in ("AzureWebJobsStorage", "CosmosDBConnection", "ServiceBusConnection"):
        assert settings[f"{connection}__credential"] == "managedidentity"
        assert settings[f"{connection}__clientId"] == "identityClientId"
    assert settings["CosmosDBConnection__accountEndpoint"] == "cosmosEndpoint"
    assert settings["ServiceBusConnection__fullyQualifiedNamespace"] == (
        "serviceBusFullyQualifiedNamespace"
    )
    assert settings["AZURE_CLIENT_ID"] == "identityClientId"
    assert "Authorization=AAD" in settings["APPLICATIONINSIGHTS_AUTHENTICATION_STRING"]


def test_no_keys_or_connection_strings_in_app_settings() -> None:
    settings = t.app_settings()
    # The connection-string forms must not be set in Azure (identity forms are).
    assert not {"AzureWebJobsStorage", "CosmosDBConnection", "ServiceBusConnection"} & set(settings)
    # Flex Consumption rejects these: the runtime comes from functionAppConfig.runtime.
    assert not {"FUNCTIONS_WORKER_RUNTIME", "FUNCTIONS_EXTENSION_VERSION"} & set(settings)
    secret_markers = (
        "accountkey",
        "sharedaccesskey",
        "listkeys",
        "connectionstrings",
        "primarykey",
    )
    for name, node in settings.items():
        text = str(node).lower()
        assert not any(marker in text for marker in secret_markers), name
    for path in t.bicep_files():
        text = path.read_text("utf-8")
        assert "listKeys(" not in text and "listConnectionStrings(" not in text, path.name


def test_host_storage_is_keyless_and_the_identity_has_the_host_roles() -> None:
    storage = t.one("Microsoft.Storage/storageAccounts", "storage").properties
    assert storage["allowSharedKeyAccess"] is False
    assert storage["allowBlobPublicAccess"] is False
    assigned = {
        role
        for r in t.resources("Microsoft.Authorization/roleAssignments")
        if r.file == MAIN and r.config["scope"] == "storage"
        for role in (
            STORAGE_BLOB_DATA_OWNER,
            STORAGE_QUEUE_DATA_CONTRIBUTOR,
            STORAGE_TABLE_DATA_CONTRIBUTOR,
        )
        if role in t.role_definition(r)
        and t.reference(r.properties["principalId"]) == APP_IDENTITY_PRINCIPAL
    }
    assert assigned == {
        STORAGE_BLOB_DATA_OWNER,
        STORAGE_QUEUE_DATA_CONTRIBUTOR,
        STORAGE_TABLE_DATA_CONTRIBUTOR,
    }


def test_application_insights_takes_entra_id_telemetry_only() -> None:
    component = t.one("Microsoft.Insights/components").properties
    assert component["DisableLocalAuth"] is True
    assert t.reference(component["WorkspaceResourceId"]) == "logAnalytics.id"
    publisher = t.one("Microsoft.Authorization/roleAssignments", "metricsPublisher")
    assert MONITORING_METRICS_PUBLISHER in t.role_definition(publisher)
    assert publisher.config["scope"] == "applicationInsights"


def test_every_role_assignment_names_its_principal_type() -> None:
    # Without principalType a fresh identity may not have replicated yet and the assignment fails.
    for r in t.resources("Microsoft.Authorization/roleAssignments"):
        assert "principalType" in r.properties, f"{r.file.name}:{r.symbol}"


# ---- parameters, outputs, modules ----


@pytest.mark.parametrize(
    ("name", "expected"),
    [("eventTtlSeconds", 864000), ("feedPollDelayMs", 1000), ("maxItemsPerInvocation", 100)],
)
def test_tunables_are_parameters_with_the_app_defaults(name: str, expected: int) -> None:
    assert t.default(MAIN, name) == expected


def test_region_is_a_parameter_defaulting_to_the_resource_group() -> None:
    assert "resource_group" in str(t.default(MAIN, "location"))


def test_names_are_parameters() -> None:
    params = t.parse(MAIN)["parameters"]
    for name in (
        "environmentName",
        "functionAppName",
        "cosmosAccountName",
        "serviceBusNamespaceName",
        "storageAccountName",
        "serviceBusTopicName",
    ):
        assert name in params


def test_outputs_name_the_function_app_and_the_endpoints() -> None:
    outputs = t.parse(MAIN)["outputs"]
    for name in (
        "AZURE_FUNCTION_APP_NAME",
        "AZURE_FUNCTION_APP_URL",
        "AZURE_RELAY_FUNCTION_APP_NAME",
        "COSMOS_ENDPOINT",
        "SERVICEBUS_FULLY_QUALIFIED_NAMESPACE",
        "SERVICEBUS_TOPIC",
        "SERVICEBUS_SUBSCRIPTION",
    ):
        assert name in outputs
    assert not any("secure" in str(o["decorators"]) for o in outputs.values())


def test_module_calls_match_module_parameters() -> None:
    """What `bicep build` would reject: unknown params, or a required param not passed."""
    for path in [MAIN]:
        for symbol, module in t.modules(path).items():
            declared = t.parse(module["path"])["parameters"]
            passed = set(module["params"])
            assert passed <= set(declared), f"{symbol}: unknown {passed - set(declared)}"
            required = {n for n, p in declared.items() if "default" not in p}
            assert required <= passed, f"{symbol}: missing {required - passed}"


def test_azd_parameters_file_only_sets_declared_parameters() -> None:
    parameters = t.json_file(DEPLOY / "main.parameters.json")["parameters"]
    declared = t.parse(MAIN)["parameters"]
    assert set(parameters) <= set(declared)
    assert parameters["environmentName"]["value"] == "${AZURE_ENV_NAME}"


def test_checkov_skips_are_justified_in_place() -> None:
    pattern = re.compile(r"checkov:skip=([A-Z0-9_]+)(.*)")
    found = 0
    for path in t.bicep_files():
        for line in path.read_text("utf-8").splitlines():
            match = pattern.search(line)
            if match:
                found += 1
                assert line.lstrip().startswith("//"), line
                reason = match.group(2).lstrip(":").strip()
                assert len(reason) >= 20, f"{path.name}: {match.group(1)} has no reason"
    assert found > 0


def test_checkov_is_pinned_exactly() -> None:
    script = (DEPLOY / "checkov.sh").read_text("utf-8")
    assert re.search(r'CHECKOV_VERSION="\d+\.\d+\.\d+"', script)
    assert '"checkov==$CHECKOV_VERSION"' in script
    assert "--framework bicep" in script


def test_the_subscribers_subscription_takes_only_its_aggregate_type() -> None:
    """Its default rule is replaced (another rule beside $Default would let everything
    through) by a filter on the messages' aggregateType property; messages from before the
    property (all contact events) still match; and, as every subscription's, on the target of
    a resubmission or a targeted notice (`outboxTarget`: none, or this subscription)."""
    from domain.contact import Contact

    rule = t.one("Microsoft.ServiceBus/namespaces/topics/subscriptions/rules", "projectionFilter")
    assert (rule.config["parent"], rule.config["name"]) == ("projectionSubscription", "$Default")
    assert rule.properties["filterType"] == "SqlFilter"
    expression = (
        rule.properties["sqlFilter"]["sqlExpression"]
        .replace("\\'", "'")
        .replace("${projectionAggregateType}", t.default(SERVICEBUS, "projectionAggregateType"))
    )
    assert expression == (
        f"(aggregateType = '{Contact.aggregate_type}' OR NOT EXISTS(aggregateType)) AND "
        "(NOT EXISTS(outboxTarget) OR outboxTarget = '${projectionSubscriptionName}')"
    )


def test_every_subscription_takes_only_what_names_no_target_or_names_it() -> None:
    """A dead letter resubmitted to one subscription (cosmos-outbox: `outboxTarget`) reaches
    that one only, in Azure as locally (tools/servicebus-config.json)."""
    rule = t.one("Microsoft.ServiceBus/namespaces/topics/subscriptions/rules", "subscriptionFilter")
    assert (rule.config["parent"], rule.config["name"]) == ("subscription", "$Default")
    assert rule.properties["sqlFilter"]["sqlExpression"].replace("\\'", "'") == (
        "NOT EXISTS(outboxTarget) OR outboxTarget = '${subscriptionName}'"
    )
    config = t.json_file(ROOT / "tools" / "servicebus-config.json")
    for topic in (x for ns in config["UserConfig"]["Namespaces"] for x in ns["Topics"]):
        for subscription in topic["Subscriptions"]:
            [local] = subscription["Rules"]
            expression = local["Properties"]["SqlFilter"]["SqlExpression"]
            name = subscription["Name"]
            assert f"NOT EXISTS(outboxTarget) OR outboxTarget = '{name}'" in expression, name


def test_the_api_apps_cors_is_a_parameter_off_by_default_as_with_func_start() -> None:
    """App Service CORS (siteConfig.cors) is what Host.CORS / Host.CORSCredentials in
    local.settings.json are locally: the same comma-separated list, empty by default."""
    site = t.one("Microsoft.Web/sites", "site")
    assert site.properties["siteConfig"]["cors"] == {
        "allowedOrigins": "corsAllowedOrigins",
        "supportCredentials": "corsSupportCredentials",
    }
    assert t.default(FUNCTION_APP_MODULE, "corsAllowedOrigins") == []
    assert t.default(FUNCTION_APP_MODULE, "corsSupportCredentials") is False
    assert t.default(MAIN, "corsAllowedOrigins") == ""
    assert t.default(MAIN, "corsSupportCredentials") is False
    api = t.modules(MAIN)["api"]["params"]
    assert api["corsAllowedOrigins"] == "corsOrigins"
    assert api["corsSupportCredentials"] == "corsSupportCredentials"
    # the list is split on commas, spaces dropped; an empty string is no origin at all
    functions = {
        n["function"]["type"]
        for n in t.walk(t.variable(MAIN, "corsOrigins"))
        if isinstance(n, dict) and "function" in n
    }
    assert functions == {"split", "replace", "empty", "trim"}
    assert "corsAllowedOrigins" in t.references(t.variable(MAIN, "corsOrigins"))
    parameters = t.json_file(DEPLOY / "main.parameters.json")["parameters"]
    assert parameters["corsAllowedOrigins"]["value"] == "${CORS_ALLOWED_ORIGINS=}"
    assert parameters["corsSupportCredentials"]["value"] == "${CORS_SUPPORT_CREDENTIALS=false}"
