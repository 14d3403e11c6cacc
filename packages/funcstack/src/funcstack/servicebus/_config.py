"""Entities from a JSON file in the shape of the official Service Bus emulator's Config.json
(given by the caller: the endpoint names no entity of its own; without a file the namespace is
empty and entities come from the control channel)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from funcstack.config import read_json
from funcstack.servicebus._filters import Rule, RuleError, parse_rules

NAMESPACE = "sbemulatorns"  # the official emulator's one namespace
MAX_MESSAGE_SIZE = 256 * 1024
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


@dataclass
class SenderEntityConfig:
    """A queue or a topic: where messages are sent (duplicate detection lives here)."""

    name: str
    requires_duplicate_detection: bool = False
    duplicate_window: float = 600.0
    subscriptions: list[ReceiverEntityConfig] = field(default_factory=list)
    is_queue: bool = False


@dataclass
class NamespaceConfig:
    name: str
    entities: list[SenderEntityConfig]


def _receiver(name: str, props: dict[str, Any], rules: list[Rule] | None = None
              ) -> ReceiverEntityConfig:
    return ReceiverEntityConfig(
        name=name,
        requires_session=bool(props.get("RequiresSession", False)),
        max_delivery_count=int(props.get("MaxDeliveryCount", 10)),
        lock_duration=parse_duration(str(props.get("LockDuration", "PT1M"))),
        default_ttl=(
            parse_duration(str(props["DefaultMessageTimeToLive"]))
            if props.get("DefaultMessageTimeToLive") else None
        ),
        dead_lettering_on_expiration=bool(props.get("DeadLetteringOnMessageExpiration", False)),
        rules=rules or [],
    )


def _sender(name: str, props: dict[str, Any]) -> SenderEntityConfig:
    return SenderEntityConfig(
        name=name,
        requires_duplicate_detection=bool(props.get("RequiresDuplicateDetection", False)),
        duplicate_window=parse_duration(
            str(props.get("DuplicateDetectionHistoryTimeWindow", "PT10M"))
        ),
    )


def queue_config(name: str, props: dict[str, Any]) -> SenderEntityConfig:
    """A queue from emulator-format ``Properties`` (the same keys as config.json)."""
    entity = _sender(name, props)
    entity.is_queue = True
    entity.subscriptions = [_receiver(name, props)]
    return entity


def topic_config(
    name: str, props: dict[str, Any], subscriptions: dict[str, dict[str, Any]] | None = None
) -> SenderEntityConfig:
    entity = _sender(name, props)
    entity.subscriptions = [_receiver(n, p) for n, p in (subscriptions or {}).items()]
    return entity


def subscription_config(name: str, props: dict[str, Any],
                        rules: list[dict[str, Any]] | None = None) -> ReceiverEntityConfig:
    return _receiver(name, props, parse_rules(rules, f"subscription {name!r}"))


def load_config(path: Path | None, *,
                duplicate_window_seconds: float | None = None) -> NamespaceConfig:
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
    entities: list[SenderEntityConfig] = []
    for queue in ns.get("Queues", []) or []:
        entities.append(queue_config(queue["Name"], queue.get("Properties", {}) or {}))
    for topic in ns.get("Topics", []) or []:
        entity = _sender(topic["Name"], topic.get("Properties", {}) or {})
        try:
            entity.subscriptions = [
                subscription_config(sub["Name"], sub.get("Properties", {}) or {},
                                    sub.get("Rules"))
                for sub in topic.get("Subscriptions", []) or []
            ]
        except RuleError as error:
            raise RuleError(f"{path}: topic {topic['Name']!r}, {error}") from None
        entities.append(entity)
    if duplicate_window_seconds is not None:
        for entity in entities:
            entity.duplicate_window = duplicate_window_seconds
    return NamespaceConfig(name=str(ns.get("Name", NAMESPACE)), entities=entities)
