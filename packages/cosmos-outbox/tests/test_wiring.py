"""Adapters wired once (issue 65 item 3): a leaf adapter of the services is declared in one
place, its `Services` field, which names its factory from the settings; the settings' services
build every leaf from there, the outbox makes each once, and the test kit gives each its fake by
name (a leaf it has none for fails, naming it)."""

from __future__ import annotations

from dataclasses import fields

import pytest

import cosmos_outbox_testing
from cosmos_outbox import Outbox, Services
from cosmos_outbox._wiring import LEAF
from cosmos_outbox.services import leaves
from cosmos_outbox.settings import OutboxSettings, read_settings
from cosmos_outbox_testing import in_memory


def test_the_leaves_are_the_services_fields_that_declare_themselves() -> None:
    assert leaves() == (
        "publisher",
        "payloads",
        "backlog",
        "schedule",
        "dead_letters",
        "target_rules",
    )
    factories = {f.name: f.metadata[LEAF] for f in fields(Services) if LEAF in f.metadata}
    # each made from the settings by the factory it names (the backlog with the store's client)
    assert factories == {
        "publisher": "publisher_from_settings",
        "payloads": "payloads_from_settings",
        "backlog": None,
        "schedule": "schedule_from_settings",
        "dead_letters": "dead_letters_from_settings",
        "target_rules": "target_rules_from_settings",
    }


def test_the_settings_services_build_every_leaf_from_its_declaration(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from cosmos_outbox.services import services_from_settings

    monkeypatch.setenv(
        "CosmosDBConnection", "AccountEndpoint=https://127.0.0.1:9/;AccountKey=a2V5;"
    )
    monkeypatch.setenv("COSMOS_CONTAINER", "outbox")
    monkeypatch.setenv("SERVICEBUS_TOPIC", "events")
    monkeypatch.setenv(
        "ServiceBusConnection",
        "Endpoint=sb://127.0.0.1/;SharedAccessKeyName=k;SharedAccessKey=a2V5",
    )
    monkeypatch.setenv("SERVICEBUS_SCHEDULE_QUEUE", "releases")
    monkeypatch.setenv("OUTBOX_SUBSCRIPTIONS", "catalog")
    settings = read_settings(OutboxSettings)
    services = services_from_settings(settings, asynchronous=True)
    made = {
        leaf: type(getattr(services, leaf)()).__name__ for leaf in leaves() if leaf != "backlog"
    }
    assert made == {
        "publisher": "AsyncServiceBusPublisher",
        "payloads": "NoneType",  # no payload storage named: no claim check
        "schedule": "AsyncServiceBusScheduleQueue",
        "dead_letters": "AsyncServiceBusDeadLetters",
        "target_rules": "AsyncServiceBusTargetRules",
    }


def test_the_outbox_makes_each_leaf_once() -> None:
    memory = in_memory()
    made: list[str] = []

    def schedule() -> object:
        made.append("schedule")
        return memory.schedule

    services = memory.services
    counted = Services(
        store=services.store,
        publisher=services.publisher,
        token_secret=services.token_secret,
        schedule=schedule,  # type: ignore[arg-type]
    )
    wiring = Outbox(services=lambda: counted).wiring()
    assert wiring.made("schedule") is wiring.made("schedule")
    wiring.relay()
    wiring.releases()
    assert made == ["schedule"]


def test_the_kit_gives_every_leaf_its_fake_and_names_one_it_has_none_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    memory = in_memory()
    assert {leaf: getattr(memory.services, leaf)() for leaf in leaves()} == {
        "publisher": memory.publisher,
        "payloads": memory.payloads,
        "backlog": memory.backlog,
        "schedule": memory.schedule,
        "dead_letters": memory.dead_letters,
        "target_rules": memory.target_rules,
    }
    monkeypatch.setattr(cosmos_outbox_testing, "leaves", lambda: (*leaves(), "notifications"))
    with pytest.raises(LookupError, match="no fake for the services' notifications"):
        in_memory()
