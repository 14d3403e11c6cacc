"""Entities from a JSON file in the shape of the official Service Bus emulator's Config.json
(given by the caller: the endpoint names no entity of its own; without a file the namespace is
empty and entities come from the control channel).

Beside the emulator's schema (Azure/azure-service-bus-emulator-installer,
``ServiceBus-Emulator/Schema/Config-schema.json``), a namespace may declare its tier, as ARM's
``Microsoft.ServiceBus/namespaces`` ``sku.name`` does: ``"Sku": "Premium"`` (or ``{"Name":
"Premium"}``; ``Standard`` when absent), and a Premium queue or topic its
``MaxMessageSizeInKilobytes`` (1024 - 102400, the management API's name). Names longer than
Service Bus takes (``_limits``) are refused here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from funcstack.config import read_json
from funcstack.servicebus._entity_settings import config_entities, warnings_for
from funcstack.servicebus._filters import Rule, RuleError, parse_rules
from funcstack.servicebus._limits import (
    KB,
    PREMIUM,
    STANDARD,
    Tier,
    check_entity_name,
    tier_named,
)

NAMESPACE = "sbemulatorns"  # the official emulator's one namespace
SAS_KEY_VALUE = "SAS_KEY_VALUE"  # the emulator's well-known placeholder key; not checked


def connection_string(host: str, port: int) -> str:
    """The ``UseDevelopmentEmulator=true`` connection string for an endpoint (plain AMQP)."""
    return (
        f"Endpoint=sb://{host}:{port};SharedAccessKeyName=RootManageSharedAccessKey;"
        f"SharedAccessKey={SAS_KEY_VALUE};UseDevelopmentEmulator=true;"
    )


_DURATION = re.compile(
    r"^P(?:(?P<d>\d+(?:\.\d+)?)D)?(?:T(?:(?P<h>\d+(?:\.\d+)?)H)?(?:(?P<m>\d+(?:\.\d+)?)M)?"
    r"(?:(?P<s>\d+(?:\.\d+)?)S)?)?$"
)


def parse_duration(text: str) -> float:
    """Seconds in an ISO 8601 duration such as ``PT20S``, ``PT1M`` or ``P14D``."""
    match = _DURATION.match(text.strip())
    if not match:
        raise ValueError(f"not an ISO 8601 duration: {text!r}")
    parts = {k: float(v) if v else 0.0 for k, v in match.groupdict().items()}
    return parts["d"] * 86400 + parts["h"] * 3600 + parts["m"] * 60 + parts["s"]


@dataclass
class ReceiverEntityConfig:
    """A queue or a subscription: where messages wait for receivers."""

    name: str
    requires_session: bool = False
    max_delivery_count: int = 10
    lock_duration: float = 60.0
    #: DefaultMessageTimeToLive in seconds (a message's own time to live can only shorten it)
    default_ttl: float | None = None
    dead_lettering_on_expiration: bool = False
    #: A subscription's rules: it receives a message when any matches (none: every message).
    rules: list[Rule] = field(default_factory=list)
    #: Its last rule was deleted (the management API, ``_atom``): it receives nothing, as in
    #: Azure (no rules declared means Azure's ``$Default``, every message).
    receives_nothing: bool = False


@dataclass
class SenderEntityConfig:
    """A queue or a topic: where messages are sent (duplicate detection lives here)."""

    name: str
    requires_duplicate_detection: bool = False
    duplicate_window: float = 600.0
    subscriptions: list[ReceiverEntityConfig] = field(default_factory=list)
    is_queue: bool = False
    #: The largest message it takes, in bytes: its tier's, or a Premium entity's
    #: MaxMessageSizeInKilobytes.
    max_message_bytes: int = STANDARD.max_message_bytes
    #: A topic's DefaultMessageTimeToLive in seconds: its subscriptions' can only be shorter.
    default_ttl: float | None = None


@dataclass
class NamespaceConfig:
    name: str
    entities: list[SenderEntityConfig]
    tier: Tier = STANDARD
    #: One line per entity setting the endpoint does not honour (``_entity_settings``).
    warnings: list[str] = field(default_factory=list)


def _receiver(
    name: str, props: dict[str, Any], rules: list[Rule] | None = None
) -> ReceiverEntityConfig:
    return ReceiverEntityConfig(
        name=name,
        requires_session=bool(props.get("RequiresSession", False)),
        max_delivery_count=int(props.get("MaxDeliveryCount", 10)),
        lock_duration=parse_duration(str(props.get("LockDuration", "PT1M"))),
        default_ttl=(
            parse_duration(str(props["DefaultMessageTimeToLive"]))
            if props.get("DefaultMessageTimeToLive")
            else None
        ),
        dead_lettering_on_expiration=bool(props.get("DeadLetteringOnMessageExpiration", False)),
        rules=rules or [],
    )


def _max_message_bytes(kind: str, name: str, props: dict[str, Any], tier: Tier) -> int:
    raw = props.get("MaxMessageSizeInKilobytes")
    if raw is None or tier.entity_message_kilobytes is None:
        return tier.max_message_bytes  # on Standard the setting is not used (warned about)
    low, high = tier.entity_message_kilobytes
    if isinstance(raw, bool) or not isinstance(raw, int) or not low <= raw <= high:
        raise ValueError(
            f"{kind} {name!r}: MaxMessageSizeInKilobytes {raw!r} is not a whole "
            f"number from {low} to {high} (the {tier.name} tier's range)"
        )
    return raw * KB


def _sender(kind: str, name: str, props: dict[str, Any], tier: Tier) -> SenderEntityConfig:
    check_entity_name(name, kind=kind, where=f"{kind} {name[:40]!r}")
    return SenderEntityConfig(
        name=name,
        requires_duplicate_detection=bool(props.get("RequiresDuplicateDetection", False)),
        duplicate_window=parse_duration(
            str(props.get("DuplicateDetectionHistoryTimeWindow", "PT10M"))
        ),
        max_message_bytes=_max_message_bytes(kind, name, props, tier),
        default_ttl=(
            parse_duration(str(props["DefaultMessageTimeToLive"]))
            if kind == "topic" and props.get("DefaultMessageTimeToLive")
            else None
        ),
    )


def queue_config(name: str, props: dict[str, Any], tier: Tier = STANDARD) -> SenderEntityConfig:
    """A queue from emulator-format ``Properties`` (the same keys as config.json)."""
    entity = _sender("queue", name, props, tier)
    entity.is_queue = True
    entity.subscriptions = [_receiver(name, props)]
    return entity


def topic_config(
    name: str,
    props: dict[str, Any],
    subscriptions: dict[str, dict[str, Any]] | None = None,
    tier: Tier = STANDARD,
) -> SenderEntityConfig:
    entity = _sender("topic", name, props, tier)
    entity.subscriptions = [subscription_config(n, p) for n, p in (subscriptions or {}).items()]
    return entity


def subscription_config(
    name: str, props: dict[str, Any], rules: list[dict[str, Any]] | None = None
) -> ReceiverEntityConfig:
    check_entity_name(name, kind="subscription", where=f"subscription {name[:40]!r}")
    for rule in rules or []:
        if isinstance(rule, dict) and isinstance(rule.get("Name"), str):
            check_entity_name(
                rule["Name"],
                kind="rule",
                where=f"subscription {name!r}, rule {rule['Name'][:40]!r}",
            )
    return _receiver(name, props, parse_rules(rules, f"subscription {name!r}"))


def namespace_tier(namespace: dict[str, Any]) -> Tier:
    """The tier a namespace declares with ``Sku`` (a name, or ARM's ``{"Name": ...}``)."""
    sku = namespace.get("Sku", STANDARD.name)
    if isinstance(sku, dict):
        sku = sku.get("Name", sku.get("name"))
    if not isinstance(sku, str):
        raise ValueError(f"namespace Sku {sku!r} is not a tier name: 'Standard' or 'Premium'")
    return tier_named(sku)


def load_config(
    path: Path | None, *, duplicate_window_seconds: float | None = None
) -> NamespaceConfig:
    """Read the emulator-format config (None: an empty namespace). A rule the endpoint cannot
    evaluate is refused here, naming the file, subscription and rule (``RuleError``).

    ``duplicate_window_seconds`` overrides the duplicate detection window of every entity.
    """
    if path is None:
        return NamespaceConfig(name=NAMESPACE, entities=[])
    raw = read_json(path)  # comments allowed, as in the official emulator's Config.json
    namespaces = raw["UserConfig"]["Namespaces"]
    if not namespaces:
        raise ValueError("config has no namespace")
    ns = namespaces[0]
    try:
        tier = namespace_tier(ns)
        entities: list[SenderEntityConfig] = []
        for queue in ns.get("Queues", []) or []:
            entities.append(queue_config(queue["Name"], queue.get("Properties", {}) or {}, tier))
        for topic in ns.get("Topics", []) or []:
            entity = _sender("topic", topic["Name"], topic.get("Properties", {}) or {}, tier)
            try:
                entity.subscriptions = [
                    subscription_config(
                        sub["Name"], sub.get("Properties", {}) or {}, sub.get("Rules")
                    )
                    for sub in topic.get("Subscriptions", []) or []
                ]
            except RuleError as error:
                raise RuleError(f"{path}: topic {topic['Name']!r}, {error}") from None
            entities.append(entity)
    except RuleError:
        raise
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from None
    if duplicate_window_seconds is not None:
        for entity in entities:
            entity.duplicate_window = duplicate_window_seconds
    return NamespaceConfig(
        name=str(ns.get("Name", NAMESPACE)),
        entities=entities,
        tier=tier,
        warnings=warnings_for(config_entities(ns), premium=tier is PREMIUM),
    )
