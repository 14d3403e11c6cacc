"""One source of truth for setting names: what the code reads, the template sets and the
sample documents must agree.

Names the code reads come from the code itself: the aliases of
`cosmos_outbox.settings.OutboxSettings` and the
`%NAME%` expressions and `connection="NAME"` of function_app.py. A connection may be set either
as a connection string (`CosmosDBConnection`, locally) or identity based
(`CosmosDBConnection__accountEndpoint` + `__credential` + `__clientId`, in Azure): both count
as the same connection ("family" = the part before `__`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tests.deploy import functions
from tests.deploy import templates as t
from tests.deploy.templates import ROOT

SAMPLE = ROOT / "local.settings.sample.json"

# Read by the code but only meaningful for an emulator whose certificate cannot be trusted
# (Microsoft's, self-signed): neither Azure's template nor the sample (on funcstack, whose
# certificate the app verifies) sets it.
LOCAL_ONLY = {"COSMOS_VERIFY_TLS"}
# Set by the platform in Azure (Flex Consumption: functionAppConfig.runtime), never an app setting.
PLATFORM = {"FUNCTIONS_WORKER_RUNTIME", "FUNCTIONS_EXTENSION_VERSION"}
# Set by the template for the host and the SDKs, not read by the app's settings object.
HOST_SETTING_PREFIXES = (
    "AzureWebJobs",
    "APPLICATIONINSIGHTS_",
    "AZURE_CLIENT_ID",
    "PYTHON_APPLICATIONINSIGHTS_",
)


def family(name: str) -> str:
    return name.split("__", 1)[0]


def _alias_names(field: Any) -> Iterator[str]:
    if isinstance(field.alias, str):
        yield field.alias
    validation = field.validation_alias
    if isinstance(validation, str):
        yield validation
    elif validation is not None and hasattr(validation, "choices"):
        for choice in validation.choices:
            if isinstance(choice, str):
                yield choice


def code_settings() -> list[set[str]]:
    """Each setting the code reads, as the set of names that provide it."""
    from cosmos_outbox.settings import RETIRED_SETTINGS, OutboxSettings

    groups = [set(_alias_names(field)) for field in OutboxSettings.model_fields.values()]
    groups = [g for g in groups if g and not g <= RETIRED_SETTINGS]
    groups += [{name} for name in functions.app_setting_expressions()]
    return groups


def template_settings() -> set[str]:
    return set(t.app_settings())


def sample_settings() -> set[str]:
    values = t.json_file(SAMPLE)["Values"]
    assert isinstance(values, dict)
    return set(values)


def provided(name: str, settings: set[str]) -> bool:
    return name in settings or family(name) in {family(s) for s in settings if "__" in s}


def test_settings_object_uses_the_agreed_names() -> None:
    names = set().union(*code_settings())
    for expected in (
        "COSMOS_DATABASE",
        "COSMOS_CONTAINER",
        "COSMOS_LEASE_CONTAINER",
        "SERVICEBUS_TOPIC",
        "EVENT_TTL_SECONDS",
        "FEED_POLL_DELAY_MS",
        "MAX_ITEMS_PER_INVOCATION",
        "CosmosDBConnection",
    ):
        assert expected in names


def test_template_sets_every_setting_the_code_reads() -> None:
    template = template_settings()
    missing = [
        sorted(group)
        for group in code_settings()
        if not group & (LOCAL_ONLY | PLATFORM) and not any(provided(n, template) for n in group)
    ]
    assert not missing, f"read by the code, not set by deploy/modules/functionapp.bicep: {missing}"


def test_template_sets_nothing_the_code_does_not_read() -> None:
    code_families = {family(name) for group in code_settings() for name in group}
    stale = sorted(
        name
        for name in template_settings()
        if not name.startswith(HOST_SETTING_PREFIXES) and family(name) not in code_families
    )
    assert not stale, f"set by the template but read by nobody: {stale}"


def test_sample_lists_every_setting_the_code_reads() -> None:
    sample = sample_settings()
    sample_families = {family(s) for s in sample}
    missing = [
        sorted(group)
        for group in code_settings()
        if not group & (LOCAL_ONLY | PLATFORM)
        and not any(family(n) in sample_families for n in group)
    ]
    assert not missing, f"read by the code, missing from local.settings.sample.json: {missing}"


def test_sample_lists_every_app_setting_the_template_sets() -> None:
    sample_families = {family(s) for s in sample_settings()}
    missing = sorted(
        name
        for name in template_settings()
        if not name.startswith(HOST_SETTING_PREFIXES) and family(name) not in sample_families
    )
    assert not missing, f"set in Azure, missing from local.settings.sample.json: {missing}"


def test_template_defaults_equal_the_code_defaults_and_the_apps_names() -> None:
    """The package's defaults where it has one; the app's own names (its container and topic,
    which the package leaves to the app) as its sample names them."""
    from cosmos_outbox.settings import OutboxSettings

    defaults = {
        field.alias: field.default
        for field in OutboxSettings.model_fields.values()
        if isinstance(field.alias, str)
    }
    sample = t.json_file(SAMPLE)["Values"]
    main = t.MAIN
    assert t.default(main, "cosmosDatabaseName") == defaults["COSMOS_DATABASE"]
    assert t.default(main, "cosmosContainerName") == sample["COSMOS_CONTAINER"]
    assert t.default(main, "cosmosLeaseContainerName") == defaults["COSMOS_LEASE_CONTAINER"]
    assert t.default(main, "serviceBusTopicName") == sample["SERVICEBUS_TOPIC"]
    assert t.default(main, "eventTtlSeconds") == defaults["EVENT_TTL_SECONDS"]
    assert t.default(main, "feedPollDelayMs") == defaults["FEED_POLL_DELAY_MS"]
    assert t.default(main, "maxItemsPerInvocation") == defaults["MAX_ITEMS_PER_INVOCATION"]
