"""The settings: validated once, named as the app settings, no app's names as defaults, errors
that name the setting and never its value."""

from __future__ import annotations

from datetime import UTC, datetime

import azure.functions as func
import pytest

from cosmos_outbox._mapper import application_properties
from cosmos_outbox._records import OutboxMessage
from cosmos_outbox._wiring import publisher_from_settings
from cosmos_outbox.settings import (
    OutboxSettings,
    SettingsError,
    load_settings,
    load_trigger_settings,
)

KEYED = "AccountEndpoint=https://x:8081/;AccountKey=a2V5;"


@pytest.fixture(autouse=True)
def _container(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test but the one about it names a container (an app always does)."""
    monkeypatch.setenv("COSMOS_CONTAINER", "orders")


def test_defaults_apply_when_only_a_connection_and_a_container_are_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CosmosDBConnection", KEYED)
    s = load_settings()
    assert (s.cosmos_database, s.cosmos_container, s.cosmos_lease_container) == (
        "outbox",
        "orders",
        "leases",
    )
    assert (s.servicebus_topic, s.event_ttl_seconds) == (None, 864000)
    assert (s.feed_poll_delay_ms, s.max_items_per_invocation) == (1000, 100)
    assert s.cosmos_verify_tls is True
    assert s.cloudevents_source_base == ""
    assert s.servicebus_connection is None and s.servicebus_namespace is None


def test_the_container_has_no_default_and_is_named_when_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CosmosDBConnection", KEYED)
    monkeypatch.delenv("COSMOS_CONTAINER")
    with pytest.raises(SettingsError, match="COSMOS_CONTAINER"):
        load_settings()


def test_the_relay_needs_a_topic_and_says_which_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CosmosDBConnection", KEYED)
    monkeypatch.setenv(
        "ServiceBusConnection", "Endpoint=sb://x/;SharedAccessKeyName=k;SharedAccessKey=c2VjcmV0;"
    )
    with pytest.raises(SettingsError, match="SERVICEBUS_TOPIC"):
        publisher_from_settings(load_settings())


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
    names = {f.alias for f in OutboxSettings.model_fields.values()}
    assert names == {
        "CosmosDBConnection",
        "CosmosDBConnection__accountEndpoint",
        "COSMOS_DATABASE",
        "COSMOS_CONTAINER",
        "COSMOS_LEASE_CONTAINER",
        "COSMOS_VERIFY_TLS",
        "ServiceBusConnection",
        "ServiceBusConnection__fullyQualifiedNamespace",
        "SERVICEBUS_TOPIC",
        "EVENT_TTL_SECONDS",
        "FEED_POLL_DELAY_MS",
        "MAX_ITEMS_PER_INVOCATION",
        "LEASE_ACQUIRE_INTERVAL_MS",
        "LEASE_EXPIRATION_INTERVAL_MS",
        "LEASE_RENEW_INTERVAL_MS",
        "BACKLOG_ESTIMATE_SCHEDULE",
        "OUTBOX_OPERATIONS_SCHEDULE",
        "CLOUDEVENTS_SOURCE_BASE",
        "CLOUDEVENTS_SOURCE",
        "SERVICEBUS_MAX_MESSAGE_BYTES",
        "OUTBOX_PAYLOAD_MAX_BYTES",
        "OUTBOX_PAYLOAD_CONTAINER",
        "OutboxPayloadStorage",
        "OutboxPayloadStorage__blobServiceUri",
        "AzureWebJobsStorage",
        "AzureWebJobsStorage__blobServiceUri",
        "AzureWebJobsStorage__accountName",
        "IDEMPOTENCY_TTL_SECONDS",
        "OUTBOX_PROCESSOR_NAME",
        "OUTBOX_LEASE_PREFIX",
        "SERVICEBUS_SCHEDULE_QUEUE",
        "OUTBOX_SUBSCRIPTIONS",
        "OUTBOX_DEAD_LETTER_QUEUES",
        "OUTBOX_RELAY_STALL_SECONDS",
        "OUTBOX_FAILURE_INGEST",
        "OUTBOX_FAILURE_RETENTION_SECONDS",
    }


STORAGE = (
    "OutboxPayloadStorage",
    "OutboxPayloadStorage__blobServiceUri",
    "OutboxPayloadStorage__serviceUri",
    "AzureWebJobsStorage",
    "AzureWebJobsStorage__blobServiceUri",
    "AzureWebJobsStorage__accountName",
)


def test_the_claim_check_limits_default_to_standard_and_cosmos_item_sizes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CosmosDBConnection", KEYED)
    for name in STORAGE:
        monkeypatch.delenv(name, raising=False)
    s = load_settings()
    assert (s.servicebus_max_message_bytes, s.payload_max_bytes) == (262144, 2 * 1024 * 1024)
    assert s.payload_container == "outbox-payloads"
    assert s.payload_storage() is None  # no storage: no claim check


@pytest.mark.parametrize(
    ("settings", "setting", "uri"),
    [
        (
            {
                "OutboxPayloadStorage": "UseDevelopmentStorage=true",
                "AzureWebJobsStorage": "DefaultEndpointsProtocol=https;AccountName=h",
            },
            "OutboxPayloadStorage",
            None,
        ),
        (
            {
                "OutboxPayloadStorage__blobServiceUri": "https://p.blob.core.windows.net/",
                "AzureWebJobsStorage": "UseDevelopmentStorage=true",
            },
            "OutboxPayloadStorage__blobServiceUri",
            "https://p.blob.core.windows.net",
        ),
        (
            {"OutboxPayloadStorage__serviceUri": "https://p.blob.core.windows.net"},
            "OutboxPayloadStorage__blobServiceUri",
            "https://p.blob.core.windows.net",
        ),
        ({"AzureWebJobsStorage": "UseDevelopmentStorage=true"}, "AzureWebJobsStorage", None),
        (
            {"AzureWebJobsStorage__accountName": "hoststore"},
            "AzureWebJobsStorage__accountName",
            "https://hoststore.blob.core.windows.net",
        ),
        ({"AzureWebJobsStorage": ""}, None, None),
    ],
)
def test_the_payload_storage_is_its_own_connection_else_the_hosts(
    monkeypatch: pytest.MonkeyPatch,
    settings: dict[str, str],
    setting: str | None,
    uri: str | None,
) -> None:
    monkeypatch.setenv("CosmosDBConnection", KEYED)
    for name in STORAGE:
        monkeypatch.delenv(name, raising=False)
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    connection = load_settings().payload_storage()
    if setting is None:
        assert connection is None
        return
    assert connection is not None
    assert (connection.setting, connection.service_uri) == (setting, uri)
    assert (connection.connection_string is None) == (uri is not None)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("SERVICEBUS_MAX_MESSAGE_BYTES", "100"),
        ("SERVICEBUS_MAX_MESSAGE_BYTES", "256KB"),
        ("OUTBOX_PAYLOAD_MAX_BYTES", "-1"),
        ("OUTBOX_PAYLOAD_CONTAINER", "Payloads"),
        ("OUTBOX_PAYLOAD_CONTAINER", "a--b"),
        ("OUTBOX_PAYLOAD_CONTAINER", "ab"),
        ("OutboxPayloadStorage__blobServiceUri", "p.blob.core.windows.net"),
    ],
)
def test_a_bad_claim_check_setting_is_named(
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    value: str,
) -> None:
    monkeypatch.setenv("CosmosDBConnection", KEYED)
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError, match=name):
        load_settings()


@pytest.mark.parametrize(
    ("base", "source"),
    [
        ("https://shop.example.com", "https://shop.example.com/orders"),
        ("https://shop.example.com/", "https://shop.example.com/orders"),
        ("urn:example:shop", "urn:example:shop/orders"),
        ("/api", "/api/orders"),
        ("", "/orders"),
    ],
)
def test_the_cloudevents_source_base_is_put_before_the_source_path(
    monkeypatch: pytest.MonkeyPatch,
    base: str,
    source: str,
) -> None:
    monkeypatch.setenv("CosmosDBConnection", KEYED)
    monkeypatch.setenv("CLOUDEVENTS_SOURCE_BASE", base)
    message = OutboxMessage(
        message_id="e1",
        session_id="o1",
        subject="OrderPlaced",
        version=1,
        body=b"{}",
        application_properties={},
        aggregate_type="order",
        source="/orders",
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
    )
    properties = application_properties(message, base=load_settings().cloudevents_source_base)
    assert properties["cloudEvents_source"] == source


@pytest.mark.parametrize(
    "base", ["orders", "https://a b", "/x\ny", "http://[::1", "https://x/?q=1", "https://x/#f"]
)
def test_a_cloudevents_source_base_that_is_not_a_uri_names_the_setting(
    monkeypatch: pytest.MonkeyPatch,
    base: str,
) -> None:
    monkeypatch.setenv("CosmosDBConnection", KEYED)
    monkeypatch.setenv("CLOUDEVENTS_SOURCE_BASE", base)
    with pytest.raises(SettingsError, match="CLOUDEVENTS_SOURCE_BASE"):
        load_settings()


def test_the_replaced_cloudevents_source_setting_is_refused_with_what_changed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CosmosDBConnection", KEYED)
    monkeypatch.setenv("CLOUDEVENTS_SOURCE", "https://shop.example.com/orders")
    with pytest.raises(
        SettingsError,
        match=r"CLOUDEVENTS_SOURCE: .*replaced by "
        r"CLOUDEVENTS_SOURCE_BASE",
    ):
        load_settings()


def _relay_trigger(environ: dict[str, str]) -> dict[str, object]:
    """The relay trigger's binding as the worker indexes it with `environ` as app settings."""
    from cosmos_outbox import Outbox

    app = func.FunctionApp()
    app.register_functions(Outbox().relay_blueprint(triggers=load_trigger_settings(environ)))
    [relay] = [f for f in app.get_functions() if f.get_function_name() == "relay_events"]
    trigger = relay.get_trigger()
    assert trigger is not None
    binding: dict[str, object] = trigger.get_dict_repr()
    return binding


def test_the_relays_processor_has_a_name_of_its_own_and_can_keep_the_leases_before() -> None:
    """In Azure two Cosmos DB triggers on one container with one lease container and one prefix
    share the leases (each sees part of the changes): the relay's processor has a name of its own
    (`outbox.`, the trigger's `leaseContainerPrefix`); `OUTBOX_PROCESSOR_NAME=""` keeps the
    leases a relay deployed before 0.3 wrote."""
    assert _relay_trigger({})["leaseContainerPrefix"] == "outbox."
    assert _relay_trigger({"OUTBOX_PROCESSOR_NAME": "orders."})["leaseContainerPrefix"] == "orders."
    assert "leaseContainerPrefix" not in _relay_trigger({"OUTBOX_PROCESSOR_NAME": ""})
    with pytest.raises(SettingsError, match="OUTBOX_PROCESSOR_NAME"):
        load_trigger_settings({"OUTBOX_PROCESSOR_NAME": "a/b"})


def test_the_relays_lease_intervals_are_its_triggers_binding_properties() -> None:
    """LEASE_*_INTERVAL_MS are the Cosmos DB trigger's leaseAcquireInterval /
    leaseExpirationInterval / leaseRenewInterval (ms); unset or 0 they are left out (the
    host's processor keeps its own); a renew interval not under the expiration interval --
    given, or the processor's default -- is refused at indexing, naming both."""
    plain = _relay_trigger({})
    assert not {"leaseAcquireInterval", "leaseExpirationInterval", "leaseRenewInterval"} & set(
        plain
    )
    given = _relay_trigger(
        {
            "LEASE_ACQUIRE_INTERVAL_MS": "500",
            "LEASE_EXPIRATION_INTERVAL_MS": "3000",
            "LEASE_RENEW_INTERVAL_MS": "1000",
        }
    )
    assert (
        given["leaseAcquireInterval"],
        given["leaseExpirationInterval"],
        given["leaseRenewInterval"],
    ) == (500, 3000, 1000)
    assert "leaseRenewInterval" not in _relay_trigger({"LEASE_RENEW_INTERVAL_MS": "0"})
    with pytest.raises(
        SettingsError, match=r"renew interval \(5 s, LEASE_RENEW_INTERVAL_MS\).*LEASE_EXPIRATION"
    ):
        load_trigger_settings(
            {"LEASE_RENEW_INTERVAL_MS": "5000", "LEASE_EXPIRATION_INTERVAL_MS": "5000"}
        )
    with pytest.raises(SettingsError, match=r"\(60 s, the processor's default\)"):
        load_trigger_settings({"LEASE_RENEW_INTERVAL_MS": "90000"})


@pytest.mark.parametrize("value", ["orders.", ""])
def test_the_renamed_lease_prefix_setting_is_refused_naming_its_new_name(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OUTBOX_LEASE_PREFIX was renamed OUTBOX_PROCESSOR_NAME (0.5): set, it is refused at
    indexing and at start, the message naming the new name, never silently ignored."""
    with pytest.raises(SettingsError, match=r"OUTBOX_LEASE_PREFIX.*OUTBOX_PROCESSOR_NAME"):
        load_trigger_settings({"OUTBOX_LEASE_PREFIX": value})
    monkeypatch.setenv("CosmosDBConnection", KEYED)
    monkeypatch.setenv("OUTBOX_LEASE_PREFIX", value)
    with pytest.raises(SettingsError, match=r"OUTBOX_LEASE_PREFIX.*OUTBOX_PROCESSOR_NAME"):
        load_settings()


def test_the_default_lease_prefix_is_renamed_and_warns() -> None:
    import cosmos_outbox.settings

    with pytest.warns(DeprecationWarning, match="DEFAULT_PROCESSOR_NAME"):
        assert cosmos_outbox.settings.DEFAULT_LEASE_PREFIX == "outbox."


def test_the_relay_binds_the_default_database_and_leases_when_their_settings_are_not_set() -> None:
    """A plain app without COSMOS_DATABASE / COSMOS_LEASE_CONTAINER (the README gives them
    defaults: `outbox`, `leases`) must start: the host cannot resolve an expression whose app
    setting is missing (Azure fails the function's indexing, funcstack's host refuses it the
    same way), so the trigger binds the defaults' names; a setting that is set is bound as its
    expression, which the host resolves. COSMOS_CONTAINER has no default: always its
    expression (the settings say it is missing when the relay first runs)."""
    bare = _relay_trigger({})
    assert (bare["databaseName"], bare["leaseContainerName"]) == ("outbox", "leases")
    assert bare["containerName"] == "%COSMOS_CONTAINER%"
    named = _relay_trigger({"COSMOS_DATABASE": "stock", "COSMOS_LEASE_CONTAINER": "stock-leases"})
    assert (named["databaseName"], named["leaseContainerName"]) == (
        "%COSMOS_DATABASE%",
        "%COSMOS_LEASE_CONTAINER%",
    )


def test_failures_are_kept_two_weeks_once_settled_and_a_shorter_retention_than_an_hour_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CosmosDBConnection", KEYED)
    settings = load_settings()
    assert (settings.failure_ingest_mode, settings.failure_retention_seconds) == (
        "true",
        14 * 86_400,
    )
    monkeypatch.setenv("OUTBOX_FAILURE_RETENTION_SECONDS", "60")
    with pytest.raises(SettingsError, match="OUTBOX_FAILURE_RETENTION_SECONDS"):
        load_settings()
    assert load_trigger_settings(
        {"OUTBOX_FAILURE_INGEST": "true", "OUTBOX_SUBSCRIPTIONS": "a=c,b"}
    ).subscriptions() == (("a", None, "c"), ("b", None, None))
    with pytest.raises(SettingsError, match="OUTBOX_FAILURE_RETENTION_SECONDS"):
        load_trigger_settings({"OUTBOX_FAILURE_RETENTION_SECONDS": "x"})


def test_with_the_failures_ingest_on_each_watched_dead_letter_queue_has_its_trigger() -> None:
    """OUTBOX_FAILURE_INGEST (read at indexing): a Service Bus trigger on each watched
    subscription's and queue's dead-letter queue (`<name>/$DeadLetterQueue`, as Azure's host
    binds one), as by default; off, none."""
    from cosmos_outbox import Outbox

    def dead_letter_triggers(environ: dict[str, str]) -> dict[str, dict[str, object]]:
        app = func.FunctionApp()
        app.register_functions(Outbox().relay_blueprint(triggers=load_trigger_settings(environ)))
        found: dict[str, dict[str, object]] = {}
        for function in app.get_functions():
            trigger, name = function.get_trigger(), str(function.get_function_name())
            if name.startswith("ingest_failures_") and trigger:
                found[name] = trigger.get_dict_repr()
        return found

    watched = {
        "OUTBOX_SUBSCRIPTIONS": "all-events=projections,audit",
        "OUTBOX_DEAD_LETTER_QUEUES": "commands",
    }
    assert dead_letter_triggers({**watched, "OUTBOX_FAILURE_INGEST": "false"}) == {}
    found = dead_letter_triggers({**watched, "OUTBOX_FAILURE_INGEST": "true"})
    assert dead_letter_triggers(watched).keys() == found.keys()  # on by default
    paths = sorted(
        (
            str(t["type"]),
            str(t.get("topicName")),
            str(t.get("subscriptionName") or t.get("queueName")),
        )
        for t in found.values()
    )
    assert paths == [
        ("serviceBusTrigger", "%SERVICEBUS_TOPIC%", "all-events/$DeadLetterQueue"),
        ("serviceBusTrigger", "%SERVICEBUS_TOPIC%", "audit/$DeadLetterQueue"),
        ("serviceBusTrigger", "None", "commands/$DeadLetterQueue"),
    ]
    assert "ingest_failures_audit" in found


def test_failures_drained_elsewhere_are_read_as_records_with_no_ingest_trigger_here(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """OUTBOX_FAILURE_INGEST=elsewhere (the relay, and its ingest, run in another host): the
    indexed app registers no `ingest_failures_*` function, and the operators' dead-letter routes
    still read the failure records (not a peek of the queues)."""
    from cosmos_outbox import Outbox
    from cosmos_outbox._wiring import Wiring
    from cosmos_outbox.services import services_from_settings

    watched = {"OUTBOX_SUBSCRIPTIONS": "audit", "OUTBOX_DEAD_LETTER_QUEUES": "commands"}
    triggers = load_trigger_settings({**watched, "OUTBOX_FAILURE_INGEST": "elsewhere"})
    app = func.FunctionApp()
    app.register_functions(Outbox().relay_blueprint(triggers=triggers))
    names = {str(function.get_function_name()) for function in app.get_functions()}
    assert "relay_events" in names
    assert not {name for name in names if name.startswith("ingest_failures_")}
    assert (triggers.failure_records, triggers.failure_ingest_here) == (True, False)

    monkeypatch.setenv("CosmosDBConnection", KEYED)
    monkeypatch.setenv("COSMOS_CONTAINER", "outbox")
    for name, value in watched.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("OUTBOX_FAILURE_INGEST", " Elsewhere ")
    services = services_from_settings(load_settings(), asynchronous=True)
    assert services.failure_ingest  # the records are the failures' truth here too
    letters = Wiring(services).operations().dead_letters
    assert letters._failures is not None  # the dead-letter routes read the records


def test_a_relay_process_told_the_failures_are_drained_elsewhere_starts_no_receiver(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`cosmos-outbox relay` reads OUTBOX_FAILURE_INGEST as the Functions app does: `true`, a
    receiver per watched dead-letter queue; `elsewhere`, none."""
    import asyncio

    from cosmos_outbox._wiring import Wiring
    from cosmos_outbox.relay import RelayProcessor
    from cosmos_outbox.services import services_from_settings

    monkeypatch.setenv("CosmosDBConnection", KEYED)
    monkeypatch.setenv("COSMOS_CONTAINER", "outbox")
    monkeypatch.setenv("OUTBOX_SUBSCRIPTIONS", "audit")
    monkeypatch.setenv("OUTBOX_DEAD_LETTER_QUEUES", "commands")

    async def receivers(mode: str) -> list[str]:
        monkeypatch.setenv("OUTBOX_FAILURE_INGEST", mode)
        settings = load_settings()
        relay = RelayProcessor(settings)
        relay._wiring = Wiring(services_from_settings(settings, asynchronous=True))
        relay._start_failure_receivers()
        started = [receiver.entity.name for receiver in relay.failure_receivers]
        for receiver in relay.failure_receivers:
            await receiver.stop()  # before it first runs: nothing is connected
        return started

    assert asyncio.run(receivers("true")) == ["audit", "commands"]
    assert asyncio.run(receivers("elsewhere")) == []


@pytest.mark.parametrize(
    ("given", "records", "here"),
    [
        ("true", True, True),
        ("On", True, True),
        ("1", True, True),
        ("elsewhere", True, False),
        ("false", False, False),
        ("no", False, False),
    ],
)
def test_the_failures_ingest_is_here_elsewhere_or_off(
    given: str, records: bool, here: bool
) -> None:
    """OUTBOX_FAILURE_INGEST: `true` (or a boolean's other spellings, as before) drains here and
    reads the records, `elsewhere` reads the records another host drains, `false` neither."""
    settings = load_trigger_settings({"OUTBOX_FAILURE_INGEST": given})
    assert (settings.failure_records, settings.failure_ingest_here) == (records, here)
    assert load_trigger_settings({}).failure_ingest_mode == "true"  # the default


def test_a_failures_ingest_neither_on_off_nor_elsewhere_is_refused_naming_the_setting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for bad in ("somewhere", "2", "relay"):
        with pytest.raises(SettingsError, match=r"OUTBOX_FAILURE_INGEST.*elsewhere"):
            load_trigger_settings({"OUTBOX_FAILURE_INGEST": bad})
    monkeypatch.setenv("CosmosDBConnection", KEYED)
    monkeypatch.setenv("OUTBOX_FAILURE_INGEST", "here")
    with pytest.raises(SettingsError, match="OUTBOX_FAILURE_INGEST"):
        load_settings()
