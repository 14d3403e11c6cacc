"""Which properties of a queue, topic or subscription the local endpoint honours, and one warning
line for each it does not, naming the entities that set it and what funcstack does instead.

The properties are every one of the official emulator's Config.json schema
(Azure/azure-service-bus-emulator-installer, ``ServiceBus-Emulator/Schema/Config-schema.json``)
and of the management model (``QueueProperties``, ``TopicProperties``,
``SubscriptionProperties`` in azure-servicebus's ``management``; the ATOM/ARM names, PascalCase
as in Config.json). A property set to what the endpoint does anyway (``"ForwardTo": ""``,
``"EnablePartitioning": false``, ``"Status": "Active"``, ``AutoDeleteOnIdle`` of
``TimeSpan.MaxValue``) is no difference and draws no warning; a name that is no property of that
kind of entity is warned about as unknown (a typo is never silently ignored).

Pure: returns the lines; the endpoint logs them at start, the launcher passes them on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

#: Honoured by the endpoint (docs/servicebus.md says how).
HONOURED: dict[str, frozenset[str]] = {
    "queue": frozenset(
        {
            "LockDuration",
            "MaxDeliveryCount",
            "RequiresSession",
            "DefaultMessageTimeToLive",
            "DeadLetteringOnMessageExpiration",
            "RequiresDuplicateDetection",
            "DuplicateDetectionHistoryTimeWindow",
            "MaxMessageSizeInKilobytes",
        }
    ),
    "topic": frozenset(
        {
            "DefaultMessageTimeToLive",
            "RequiresDuplicateDetection",
            "DuplicateDetectionHistoryTimeWindow",
            "MaxMessageSizeInKilobytes",
        }
    ),
    "subscription": frozenset(
        {
            "LockDuration",
            "MaxDeliveryCount",
            "RequiresSession",
            "DefaultMessageTimeToLive",
            "DeadLetteringOnMessageExpiration",
        }
    ),
}

#: Settings with no behaviour to reproduce locally (metadata, a service-side optimisation).
NO_LOCAL_EFFECT = frozenset({"UserMetadata", "EnableBatchedOperations"})

_NEVER = "P10675199DT2H48M5.4775807S"  # TimeSpan.MaxValue: the "never" of AutoDeleteOnIdle


def _set(value: Any) -> bool:
    return value not in (None, "", False, [], {})


#: name -> (the kinds of entity that have it, whether a value asks for something the endpoint
#: does not do, what funcstack does instead)
UNHONOURED: dict[str, tuple[frozenset[str], Callable[[Any], bool], str]] = {
    "ForwardTo": (
        frozenset({"queue", "subscription"}),
        _set,
        "messages stay in the entity they reach; funcstack does not forward them",
    ),
    "ForwardDeadLetteredMessagesTo": (
        frozenset({"queue", "subscription"}),
        _set,
        "dead-lettered messages stay in the entity's dead-letter queue",
    ),
    "AutoDeleteOnIdle": (
        frozenset({"queue", "topic", "subscription"}),
        lambda v: _set(v) and str(v).strip() != _NEVER,
        "idle entities are never deleted",
    ),
    "EnablePartitioning": (
        frozenset({"queue", "topic"}),
        _set,
        "one partition: duplicate detection spans the whole entity, and a PartitionKey "
        "other than the SessionId is not refused",
    ),
    "EnableExpress": (
        frozenset({"queue", "topic"}),
        _set,
        "each message is stored as any other (none is held in memory only)",
    ),
    "MaxSizeInMegabytes": (
        frozenset({"queue", "topic"}),
        _set,
        "the entity has no size quota: a send is never refused as QuotaExceeded",
    ),
    "Status": (
        frozenset({"queue", "topic", "subscription"}),
        lambda v: _set(v) and str(v).strip().lower() != "active",
        "the entity is active: sends and receives are not refused",
    ),
    "AuthorizationRules": (
        frozenset({"queue", "topic"}),
        _set,
        "keys and tokens are not checked (any connection string is accepted)",
    ),
    "SupportOrdering": (
        frozenset({"topic"}),
        lambda v: v is False,
        "messages keep the order they were sent in anyway",
    ),
    "FilteringMessagesBeforePublishing": (
        frozenset({"topic"}),
        _set,
        "a message no subscription takes is accepted and dropped",
    ),
    "DeadLetteringOnFilterEvaluationExceptions": (
        frozenset({"subscription"}),
        _set,
        "rules are checked when the config loads; a rule does not fail at evaluation",
    ),
    "AvailabilityStatus": (
        frozenset({"queue", "topic", "subscription"}),
        _set,
        "the service reports it, nobody sets it: ignored",
    ),
    "SizeInBytes": (frozenset({"topic"}), _set, "the service reports it, nobody sets it: ignored"),
}


def _label(kind: str, name: str) -> str:
    return f"{kind} {name!r}"


def warnings_for(
    entities: Iterable[tuple[str, str, Mapping[str, Any]]], *, premium: bool = False
) -> list[str]:
    """One line per property the endpoint does not honour, naming each entity (``(kind, name,
    properties)``; kind ``queue``, ``topic`` or ``subscription``, a subscription named
    ``topic/subscription``) that sets it, with what funcstack does instead; then one line per
    name that is no property of its kind of entity. ``premium``: the namespace's tier is
    Premium (MaxMessageSizeInKilobytes is used only there)."""
    unhonoured: dict[str, list[str]] = {}
    unknown: dict[tuple[str, str], list[str]] = {}
    standard_sizes: list[str] = []
    for kind, name, props in entities:
        for key, value in props.items():
            if key == "MaxMessageSizeInKilobytes" and not premium and kind in ("queue", "topic"):
                standard_sizes.append(f"{_label(kind, name)}: {value!r}")
                continue
            if key in HONOURED[kind] or key in NO_LOCAL_EFFECT:
                continue
            rule = UNHONOURED.get(key)
            if rule is None or kind not in rule[0]:
                unknown.setdefault((key, kind), []).append(_label(kind, name))
                continue
            if rule[1](value):
                unhonoured.setdefault(key, []).append(f"{_label(kind, name)}: {value!r}")
    lines = [
        f"{key} is not honoured by the local Service Bus endpoint ({'; '.join(where)}): "
        f"{UNHONOURED[key][2]}"
        for key, where in unhonoured.items()
    ]
    if standard_sizes:
        lines.append(
            f"MaxMessageSizeInKilobytes is used only on Premium ({'; '.join(standard_sizes)}): "
            "the namespace is Standard, its messages and batches 256 KB (declare the "
            'namespace\'s "Sku": "Premium" for larger ones)'
        )
    lines += [
        f"{key} is not a property of a Service Bus {kind} ({', '.join(where)}): ignored (a typo?)"
        for (key, kind), where in unknown.items()
    ]
    return lines


def config_entities(namespace: Mapping[str, Any]) -> list[tuple[str, str, Mapping[str, Any]]]:
    """``(kind, name, properties)`` of every entity of a Config.json namespace."""
    out: list[tuple[str, str, Mapping[str, Any]]] = []
    for queue in namespace.get("Queues") or []:
        out.append(("queue", str(queue.get("Name")), queue.get("Properties") or {}))
    for topic in namespace.get("Topics") or []:
        out.append(("topic", str(topic.get("Name")), topic.get("Properties") or {}))
        for sub in topic.get("Subscriptions") or []:
            out.append(
                (
                    "subscription",
                    f"{topic.get('Name')}/{sub.get('Name')}",
                    sub.get("Properties") or {},
                )
            )
    return out
