from __future__ import annotations

import pytest

from infra.settings import Settings, SettingsError, load_settings


def test_defaults_apply_when_only_a_connection_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CosmosDBConnection", "AccountEndpoint=https://x:8081/;AccountKey=a2V5;")
    s = load_settings()
    assert (s.cosmos_database, s.cosmos_container, s.cosmos_lease_container) == (
        "outbox", "contacts", "leases")
    assert (s.servicebus_topic, s.event_ttl_seconds) == ("contact-events", 864000)
    assert (s.feed_poll_delay_ms, s.max_items_per_invocation) == (1000, 100)
    assert s.cosmos_verify_tls is True
    assert s.cloudevents_source_base == ""
    assert s.cloudevents_source("/contacts") == "/contacts"
    assert s.servicebus_connection is None and s.servicebus_namespace is None


def test_identity_based_connections_are_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CosmosDBConnection", raising=False)
    monkeypatch.setenv("CosmosDBConnection__accountEndpoint", "https://acct.documents.azure.com")
    monkeypatch.setenv("ServiceBusConnection__fullyQualifiedNamespace", "ns.servicebus.windows.net")
    s = load_settings()
    assert s.cosmos_connection is None
    assert s.servicebus_namespace == "ns.servicebus.windows.net"


def test_missing_cosmos_connection_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CosmosDBConnection", raising=False)
    monkeypatch.delenv("CosmosDBConnection__accountEndpoint", raising=False)
    with pytest.raises(SettingsError, match="CosmosDBConnection"):
        load_settings()


def test_errors_name_the_setting_and_never_echo_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CosmosDBConnection", "AccountEndpoint=https://x/;AccountKey=c2VjcmV0;")
    monkeypatch.setenv("EVENT_TTL_SECONDS", "ten days")
    with pytest.raises(SettingsError) as info:
        load_settings()
    assert "EVENT_TTL_SECONDS" in str(info.value)
    assert "c2VjcmV0" not in str(info.value)


def test_a_loaded_secret_is_never_shown_in_repr_or_str(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "AccountEndpoint=https://x/;AccountKey=c2VjcmV0;"
    monkeypatch.setenv("CosmosDBConnection", secret)
    monkeypatch.setenv("ServiceBusConnection", "Endpoint=sb://x/;SharedAccessKey=c2VjcmV0;")
    settings = load_settings()
    assert settings.cosmos_connection is not None
    assert settings.cosmos_connection.get_secret_value() == secret  # it does hold the secret
    for shown in (repr(settings), str(settings), str(settings.model_dump())):
        assert "c2VjcmV0" not in shown


def test_setting_names_are_the_documented_app_settings() -> None:
    names = {f.alias for f in Settings.model_fields.values()}
    assert names == {
        "CosmosDBConnection", "CosmosDBConnection__accountEndpoint", "COSMOS_DATABASE",
        "COSMOS_CONTAINER", "COSMOS_LEASE_CONTAINER", "COSMOS_VERIFY_TLS",
        "ServiceBusConnection", "ServiceBusConnection__fullyQualifiedNamespace",
        "SERVICEBUS_TOPIC", "EVENT_TTL_SECONDS", "FEED_POLL_DELAY_MS", "MAX_ITEMS_PER_INVOCATION",
        "BACKLOG_ESTIMATE_SCHEDULE", "CLOUDEVENTS_SOURCE_BASE", "CLOUDEVENTS_SOURCE",
    }


@pytest.mark.parametrize(("base", "source"), [
    ("https://crm.example.com", "https://crm.example.com/contacts"),
    ("https://crm.example.com/", "https://crm.example.com/contacts"),
    ("urn:example:crm", "urn:example:crm/contacts"), ("/api", "/api/contacts"),
    ("", "/contacts")])
def test_the_cloudevents_source_base_is_put_before_the_source_path(
    monkeypatch: pytest.MonkeyPatch, base: str, source: str,
) -> None:
    monkeypatch.setenv("CosmosDBConnection", "AccountEndpoint=https://x:8081/;AccountKey=a2V5;")
    monkeypatch.setenv("CLOUDEVENTS_SOURCE_BASE", base)
    assert load_settings().cloudevents_source("/contacts") == source


@pytest.mark.parametrize("base", ["contacts", "https://a b", "/x\ny", "http://[::1",
                                  "https://x/?q=1", "https://x/#f"])
def test_a_cloudevents_source_base_that_is_not_a_uri_names_the_setting(
    monkeypatch: pytest.MonkeyPatch, base: str,
) -> None:
    monkeypatch.setenv("CosmosDBConnection", "AccountEndpoint=https://x:8081/;AccountKey=a2V5;")
    monkeypatch.setenv("CLOUDEVENTS_SOURCE_BASE", base)
    with pytest.raises(SettingsError, match="CLOUDEVENTS_SOURCE_BASE"):
        load_settings()


def test_the_replaced_cloudevents_source_setting_is_refused_with_what_changed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CosmosDBConnection", "AccountEndpoint=https://x:8081/;AccountKey=a2V5;")
    monkeypatch.setenv("CLOUDEVENTS_SOURCE", "https://crm.example.com/contacts")
    with pytest.raises(SettingsError, match=r"CLOUDEVENTS_SOURCE: .*replaced by "
                                            r"CLOUDEVENTS_SOURCE_BASE"):
        load_settings()
