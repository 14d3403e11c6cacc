"""The claim check in the templates: a payload account of its own (no shared keys, no public
blobs), one private container, a lifecycle rule that deletes payloads after they can no longer
be needed (longer than any message lives on the topic), identity-based access only (the relay
writes, subscribers read, both scoped to the container), and app settings that agree with the
code."""

from __future__ import annotations

from typing import Any

from tests.deploy import templates as t
from tests.deploy.templates import DEPLOY, MAIN

MODULE = DEPLOY / "modules" / "payloads.bicep"
SERVICEBUS = DEPLOY / "modules" / "servicebus.bicep"
SUBSCRIBER_APP = DEPLOY / "modules" / "subscriberapp.bicep"
BLOB_DATA_CONTRIBUTOR = "ba92f5b4-2d11-453d-a403-e96b0029c9fe"
BLOB_DATA_READER = "2a2b9908-6ea1-4ae2-8e65-a410df84e7d1"
BLOB_DATA_OWNER = "b7e6dc6d-f1e8-4753-8033-0f276bb0955b"


def _of(path: Any) -> list[t.Resource]:
    return [r for r in t.resources() if r.file == path]


def test_the_payloads_have_an_account_of_their_own_with_identity_access_only() -> None:
    [account] = [r for r in _of(MODULE) if r.type == "Microsoft.Storage/storageAccounts"]
    props = account.properties
    assert props["allowSharedKeyAccess"] is False  # no keys, so no SAS either
    assert props["allowBlobPublicAccess"] is False
    assert props["minimumTlsVersion"] == "TLS1_2" and props["supportsHttpsTrafficOnly"] is True
    module = t.modules(MAIN)["payloads"]
    assert module["path"] == MODULE and module["condition"] is None


def test_its_container_is_private_and_named_as_the_code_expects() -> None:
    from cosmos_outbox.settings import DEFAULT_PAYLOAD_CONTAINER

    [container] = [
        r
        for r in _of(MODULE)
        if r.type == "Microsoft.Storage/storageAccounts/blobServices/containers"
    ]
    assert container.properties["publicAccess"] == "None"
    assert t.default(MODULE, "containerName") == DEFAULT_PAYLOAD_CONTAINER


def test_a_lifecycle_rule_deletes_payloads_after_the_topics_messages_have_expired() -> None:
    [policy] = [
        r for r in _of(MODULE) if r.type == "Microsoft.Storage/storageAccounts/managementPolicies"
    ]
    [rule] = policy.properties["policy"]["rules"]
    assert rule["enabled"] is True and rule["type"] == "Lifecycle"
    assert rule["definition"]["filters"]["prefixMatch"] == ["${containerName}/"]
    delete = rule["definition"]["actions"]["baseBlob"]["delete"]
    # after the last write: a relay retry or a re-drive writes the payload again, renewing it
    assert t.references(delete["daysAfterModificationGreaterThan"]) == {"retentionDays"}
    assert t.references(t.modules(MAIN)["payloads"]["params"]["retentionDays"]) == {
        "payloadRetentionDays"
    }
    days = t.default(MAIN, "payloadRetentionDays")
    ttl = t.iso_duration_seconds(t.default(SERVICEBUS, "defaultMessageTimeToLive"))
    assert days * 86400 > ttl  # no message on the topic outlives its payload
    [minimum] = [
        d["argument"]
        for d in t.parameter(MAIN, "payloadRetentionDays")["decorators"]
        if d["type"] == "min_value"
    ]
    assert minimum * 86400 > ttl
    assert days * 86400 > t.default(MAIN, "eventTtlSeconds")  # a re-drive may resend them


def test_the_relay_may_write_and_subscribers_only_read_the_container() -> None:
    assignments = {
        r.symbol: r for r in _of(MODULE) if r.type == "Microsoft.Authorization/roleAssignments"
    }
    assert BLOB_DATA_CONTRIBUTOR in t.role_definition(assignments["contributors"])
    assert BLOB_DATA_READER in t.role_definition(assignments["readers"])
    for assignment in assignments.values():
        assert assignment.config["scope"] == "container"  # not the account
    params = t.modules(MAIN)["payloads"]["params"]
    assert "appPrincipal" in t.references(params["contributorPrincipals"])
    assert t.references(params["readerPrincipals"]) == {"subscriberPrincipals"}
    assert not {BLOB_DATA_OWNER, BLOB_DATA_CONTRIBUTOR} & {
        role
        for r in assignments.values()
        if "readerPrincipals" in t.references(r.config)
        for role in (BLOB_DATA_OWNER, BLOB_DATA_CONTRIBUTOR)
        if role in t.role_definition(r)
    }


def test_both_apps_reach_the_payloads_with_their_identity_and_the_relay_knows_its_limits() -> None:
    relay = t.app_settings()
    subscriber = {e["name"]: e["value"] for e in t.variable(SUBSCRIBER_APP, "appSettings")}
    for settings in (relay, subscriber):
        assert t.references(settings["OutboxPayloadStorage__blobServiceUri"]) == {
            "payloadBlobEndpoint"
        }
        assert settings["OutboxPayloadStorage__credential"] == "managedidentity"
        assert "OutboxPayloadStorage" not in settings  # never a connection string
        assert t.references(settings["OUTBOX_PAYLOAD_CONTAINER"]) == {"payloadContainer"}
    assert "payloadMaxBytes" in t.references(relay["OUTBOX_PAYLOAD_MAX_BYTES"])
    assert "serviceBusMaxMessageBytes" in t.references(relay["SERVICEBUS_MAX_MESSAGE_BYTES"])
    for name in ("api", "relay", "subscriber"):
        params = t.modules(MAIN)[name]["params"]
        assert "payloads.outputs.blobEndpoint" in t.references(params["payloadBlobEndpoint"])
    # Standard's 256 KB, Premium's 1 MB batches: the relay's cap follows the tier.
    limit = t.variable(MAIN, "serviceBusMaxMessageBytes")
    values = {n for n in t.walk(limit) if isinstance(n, int)}
    assert {1048576, 262144} <= values and "serviceBusSku" in t.references(limit)
